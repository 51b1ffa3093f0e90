"""The one-command local demo: synthetic corpus with planted passages and personal data,
a tiny GPT-2 trained (and cached) on it, then a full audit of that model and of a less
trained checkpoint as the control, ending with a summary and the report.

Reads and writes every findings table under the local warehouse (``storage.warehouse``).
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from pathlib import Path

from .config import AuditConfig, load_config

log = logging.getLogger(__name__)


def demo_config(assets, base: AuditConfig | None = None, budget_tokens: int = 20_000,
                warehouse: str | None = None) -> AuditConfig:
    """The built-in local config pointed at the demo assets."""
    cfg = (base or load_config(None)).model_copy(deep=True)
    data = cfg.model_dump()
    data["model"].update(path=str(assets.model_dir), reference_path=str(assets.reference_model_dir),
                         name="demo-tiny-gpt2", family="demo-tiny-gpt2", tokenizer=None)
    data["corpus"].update(id="demo", format="jsonl", path=str(assets.corpus_dir), id_column="id",
                          source_column="source")
    gen = data["generation"]
    gen["budget_tokens"] = budget_tokens
    # A deployed assistant's settings (temperature 1, top-k 40), not the classic decaying
    # schedule, which would scramble the first 20 tokens after a public prefix.
    gen["sampling"].update(max_new_tokens=min(gen["sampling"]["max_new_tokens"], 128), temperature=1.0,
                           top_k=40, temperature_start=None, temperature_decay_tokens=0)
    gen["prompts"] = [
        {"strategy": "public_prefix", "share": 0.7, "source": str(assets.prompts_path),
         "prefix_min_tokens": 5, "prefix_max_tokens": 10},
        {"strategy": "empty", "share": 0.3},
    ]
    data["report"]["holdout_source"] = str(assets.holdout_path)
    # Known-prefix probes of document openings: the planted passages open their documents.
    if "probe" not in data["steps"]:
        data["steps"] = [*data["steps"], "probe"]
    if not data["pii"].get("hmac_key") and not os.environ.get(data["pii"]["hmac_key_env"]):
        data["pii"]["hmac_key"] = demo_pii_key(Path(assets.root))
    if warehouse:
        data["storage"]["warehouse"] = warehouse
    data.pop("base_dir", None)
    new = AuditConfig.model_validate(data)
    new.base_dir = cfg.base_dir
    return new


def demo_pii_key(root: Path) -> str:
    """A random HMAC key made once per demo folder (never a key in the code): the demo
    works on a fresh machine, and production configs must bring their own key."""
    path = root / "pii-demo-key"
    if not path.exists():
        path.write_text(secrets.token_hex(32), encoding="utf-8")
        path.chmod(0o600)
    return path.read_text(encoding="utf-8").strip()


def run_demo(spark=None, demo_dir: str = "./ea-data/demo", budget_tokens: int = 20_000,
             base: AuditConfig | None = None, run_prefix: str = "demo") -> dict:
    """Build assets, audit the control checkpoint and the target model, print a summary."""
    from .audit import run_audit
    from .runs import new_run_id
    from .spark import get_spark
    from .synthetic import ensure_demo_assets

    t0 = time.time()
    assets = ensure_demo_assets(Path(demo_dir).resolve())
    cfg = demo_config(assets, base, budget_tokens)
    spark = spark or get_spark(cfg)

    control_cfg = cfg.model_copy(deep=True)
    control_cfg.model.path = str(assets.reference_model_dir)
    control_cfg.model.name = "demo-tiny-gpt2-early-checkpoint"
    control_cfg.model.family = "demo-tiny-gpt2-early-checkpoint"
    control_cfg.steps = [s for s in cfg.steps if s in ("index", "generate", "match", "pii", "probe")]
    control = run_audit(spark, control_cfg, run_id=new_run_id(f"{run_prefix}-control"))

    target = run_audit(spark, cfg, run_id=new_run_id(run_prefix), control_run_id=control["run_id"],
                       compare_run_ids=(control["run_id"],))
    summary = summarise(spark, cfg, target["run_id"], control["run_id"])
    summary["seconds"] = round(time.time() - t0, 1)
    summary["report"] = (target["steps"].get("report") or {})
    summary["calibration"] = (target["steps"].get("calibrate") or {}).get("calibration") or []
    summary["probes"] = probe_summary(spark, cfg, target["run_id"], control["run_id"])
    print(format_summary(summary, cfg))
    return summary


def summarise(spark, cfg: AuditConfig, run_id: str, control_run_id: str | None = None) -> dict:
    from pyspark.sql import functions as F

    from .tables import Tables

    tables = Tables(spark, cfg)
    runs = [r for r in (run_id, control_run_id) if r]
    metrics = {r: [m.asDict() for m in tables.read("run_metrics").where(F.col("run_id") == r)
                   .orderBy("budget_tokens").collect()] for r in runs}
    rare = (tables.read("extracted_passages").where(F.col("run_id") == run_id)
            .where(~F.col("is_low_entropy") & ~F.coalesce("is_prompt_copy", F.lit(False)))
            .orderBy(F.col("doc_count").asc(), F.col("n_tokens").desc())
            .select("passage_id", "n_tokens", "n_samples", "doc_count", "doc_count_is_exact", "example_doc_ids",
                    "text").limit(5).collect())
    pii = []
    if tables.exists("pii_findings"):
        pii = (tables.read("pii_findings").where(F.col("run_id") == run_id)
               .groupBy("entity_type").agg(F.countDistinct("value_key").alias("values"),
                                           F.countDistinct(F.when(F.col("in_corpus"), F.col("value_key")))
                                           .alias("in_corpus"))
               .orderBy("entity_type").collect())
    return {
        "run_id": run_id, "control_run_id": control_run_id, "metrics": metrics,
        "top_rare_passages": [r.asDict() for r in rare],
        "pii": [r.asDict() for r in pii],
        "warehouse": tables.warehouse,
    }


def format_summary(summary: dict, cfg: AuditConfig) -> str:
    lines = ["", "extraction-audit demo: summary", "=" * 30]
    for run, rows in summary["metrics"].items():
        label = "target " if run == summary["run_id"] else "control"
        lines.append(f"{label} run {run}")
        lines.append(f"  {'budget':>10} {'generated':>10} {'share copied':>13} {'passages':>9} {'rare':>5} "
                     f"{'pii':>4} {'pii in corpus':>14}")
        for m in rows:
            lines.append(f"  {m['budget_tokens']:>10} {m['generated_tokens']:>10} {m['share_extracted']:>13.4f} "
                         f"{m['distinct_passages']:>9} {m['distinct_rare_passages']:>5} {m['pii_found']:>4} "
                         f"{m['pii_in_corpus']:>14}")
    lines.append("top rare passages (fewest training documents first; personal data masked unless "
                 "storage.allow_raw_pii):")
    from .pii.mask import masker

    mask = masker(cfg)
    for p in summary["top_rare_passages"]:
        exact = "" if p["doc_count_is_exact"] else "≥"
        text = " ".join(mask(p["text"]).split())
        lines.append(f"  docs={exact}{p['doc_count']} tokens={p['n_tokens']} samples={p['n_samples']} "
                     f"e.g. {list(p['example_doc_ids'])[:2]}: {text[:90]!r}")
    if summary["pii"]:
        lines.append("personal data in samples (distinct values; in corpus):")
        for p in summary["pii"]:
            lines.append(f"  {p['entity_type']:<16} {p['values']:>4} {p['in_corpus']:>4}")
    if summary.get("calibration"):
        lines.append("corpus-free scores vs the corpus route (precision@k, AUC):")
        for c in summary["calibration"]:
            auc = "n/a" if c.get("auc") is None else f"{c['auc']:.3f}"
            k = f"{c.get('k_requested', c['k'])}" + (f" (capped to {c['k']})" if c.get("k_requested", c["k"]) != c["k"]
                                                      else "")
            lines.append(f"  {c['score']:<20} k={k:<18} precision={c['precision_at_k']:.3f} auc={auc}")
    lines += format_probe_summary(summary.get("probes"), summary["run_id"])
    lines.append(f"tables: {summary['warehouse']} (Delta folders; see README for the SQL views)")
    report = summary.get("report") or {}
    if report.get("html"):
        lines.append(f"report: {report['html']}")
    lines.append("A lower bound: more generation finds more passages; compare runs at several budgets.")
    return "\n".join(lines)


def probe_summary(spark, cfg: AuditConfig, run_id: str, control_run_id: str | None) -> dict | None:
    """Known-prefix probe figures of the target and control (``report.probes``), or None."""
    from .report import queries as Q
    from .report.probes import collect, to_json

    Q.use_tables(spark, cfg)
    return to_json(collect(lambda name, **p: Q.run_query(spark, name, **p), cfg,
                           [r for r in (run_id, control_run_id) if r]))


def format_probe_summary(probes: dict | None, run_id: str) -> list[str]:
    if not probes:
        return []

    def pct(v) -> str:
        return "–" if v is None or v != v else f"{v:.0%}"

    lines = ["known-prefix probes, greedy (exact / edit similarity >= "
             f"{probes['approx_similarity']:g}), by documents holding the continuation:"]
    for row in probes["by_class"]:
        if row["mode"] == "greedy":
            label = "target " if row["run_id"] == run_id else "control"
            lines.append(f"  {label} {row['doc_count_class']:>6}: {row['probes']:>3} probes, exact "
                         f"{pct(row['exact_rate'])} ({pct(row['exact_low'])}-{pct(row['exact_high'])}), approx "
                         f"{pct(row['approx_rate'])}")
    for row in probes["recovery"]:
        if row["run_id"] == run_id:
            lines.append(f"  recovery share at {row['budget_tokens']:>6} tokens: {row['found']}/{row['reproduced']} "
                         f"= {pct(row['share'])} ({pct(row['share_low'])}-{pct(row['share_high'])})")
    return lines
