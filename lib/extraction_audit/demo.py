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
from .errors import UserFacingError

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
    control, target = audit_side_by_side(spark, control_cfg, cfg, new_run_id(f"{run_prefix}-control"),
                                         new_run_id(run_prefix))
    summary = summarise(spark, cfg, target["run_id"], control["run_id"])
    summary["seconds"] = round(time.time() - t0, 1)
    report = target["steps"].get("report") or {}
    summary["report"] = {**report, **(report.get("result") or {})}  # html, markdown, json paths
    summary["calibration"] = (target["steps"].get("calibrate") or {}).get("calibration") or []
    warehouse = Path(cfg.resolve(cfg.storage.warehouse))
    summary["config_path"] = str(write_demo_config(cfg, warehouse.parent / "demo-config.yaml"))
    key_file = Path(assets.root) / "pii-demo-key"
    if key_file.is_file() and not os.environ.get(cfg.pii.hmac_key_env):
        summary["pii_key_path"] = str(key_file)
    summary["probes"] = probe_summary(spark, cfg, target["run_id"], control["run_id"])
    print(format_summary(summary, cfg))
    return summary


def audit_side_by_side(spark, control_cfg: AuditConfig, cfg: AuditConfig, control_run_id: str,
                       run_id: str) -> tuple[dict, dict]:
    """Audit the control checkpoint on a second driver thread while the target is audited.

    A small audit's path is mostly per-job driver work and run-state commits, one after
    another; a second audit beside it uses the CPU they leave (demo: 188.6 -> 174.4 s, mean
    of alternating runs).  The target's ``index`` waits until the control has indexed the
    corpus (one build, not two racing), its ``pii`` (which marks values the control also
    emitted) for the control's samples, and its ``report`` (which compares the two) for the
    whole control audit.  A control failure stops the target at its next wait and is
    raised here; a target failure cancels the control's running Spark jobs and stops it
    before its next step."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from pyspark import inheritable_thread_target

    from .audit import run_audit

    done = {"index": threading.Event(), "generate": threading.Event()}
    target_failed = threading.Event()

    def control_step_done(step: str) -> None:
        if step in done:
            done[step].set()

    def before_control_step(step: str) -> None:
        if target_failed.is_set():
            raise UserFacingError(f"control audit stopped before {step}: the target audit failed")

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="demo-control") as pool:
        control = pool.submit(inheritable_thread_target(spark)(run_audit), spark, control_cfg,
                              run_id=control_run_id, before_step=before_control_step,
                              after_step=control_step_done)

        def wait_for_control(step: str) -> None:
            while not done[step].wait(0.2):
                if control.done():
                    control.result()  # the control's error, if it failed
                    return

        def before_target_step(step: str) -> None:
            if step == "index":
                wait_for_control("index")
            elif step == "pii":
                wait_for_control("generate")
            elif step == "report":
                control.result()

        try:
            target = run_audit(spark, cfg, run_id=run_id, control_run_id=control_run_id,
                               compare_run_ids=(control_run_id,), before_step=before_target_step)
        except BaseException:  # Ctrl-C included: the control stops too
            target_failed.set()  # at its next step; its running jobs are cancelled
            if not control.done():
                spark.sparkContext.cancelAllJobs()
            raise
        return control.result(), target


def summarise(spark, cfg: AuditConfig, run_id: str, control_run_id: str | None = None) -> dict:
    """The console summary's figures, from the report's named queries (``report/queries.py``),
    so the console, the report and the model card print the same numbers.  The queries run
    side by side on a few driver threads (each is a few small Spark jobs)."""
    from concurrent.futures import ThreadPoolExecutor

    from pyspark import inheritable_thread_target

    from .report.bootstrap import z_value
    from .report.queries import run_query, use_tables
    from .tables import Tables

    use_tables(spark, cfg)
    runs = [r for r in (run_id, control_run_id) if r]
    rare = cfg.match.rare_doc_count
    top = dict(run_id=run_id, redact=False, limit=5, z=z_value(cfg.report.confidence))
    queries = {
        "growth": ("GROWTH_CURVE", dict(run_ids=runs)),
        "headline": ("HEADLINE", dict(run_ids=runs, rare_doc_count=rare)),
        "top_rare_passages": ("TOP_RARE_PASSAGES", dict(rare_doc_count=rare, **top)),
        "stitched_passages": ("STITCHED_PASSAGES", top),
        "source_documents": ("SOURCE_DOCUMENTS", dict(run_id=run_id, limit=5)),
        "pii": ("PII_BY_TYPE", dict(run_id=run_id, rare_doc_count=rare)),
    }
    query = inheritable_thread_target(spark)(lambda name, params: run_query(spark, name, **params))
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="demo-summary") as pool:
        started = {key: pool.submit(query, name, params) for key, (name, params) in queries.items()}
        frames = {key: future.result() for key, future in started.items()}
    records = lambda frame: frame.to_dict(orient="records")  # noqa: E731
    growth = frames.pop("growth")
    return {
        "run_id": run_id, "control_run_id": control_run_id,
        "metrics": {r: records(growth[growth["run_id"] == r]) for r in runs},
        "headline": {h["run_id"]: h for h in records(frames.pop("headline"))},
        **{key: records(frame) for key, frame in frames.items()},
        "warehouse": Tables(spark, cfg).warehouse,
    }


#: (label, HEADLINE column, is a share): the whole-run figures, worded as in the report.
HEADLINE_LINES = (
    ("Samples", "samples", False),
    ("Generated tokens", "generated_tokens", False),
    ("Share of generated tokens extracted", "share_extracted", True),
    ("Distinct extracted passages", "distinct_passages", False),
    ("Distinct rare passages", "distinct_rare_passages", False),
    ("Distinct source regions", "distinct_regions", False),
    ("Source regions holding a rare passage", "distinct_rare_regions", False),
    ("Corpus tokens extracted", "corpus_tokens_extracted", False),
    ("Passages stitched across documents", "stitched_passages", False),
    ("Distinct personal-data values tagged", "pii_found", False),
    ("... of which found in the corpus", "pii_in_corpus", False),
)


def format_summary(summary: dict, cfg: AuditConfig) -> str:
    from .pii.mask import masker
    from .report import fmt

    mask = masker(cfg)
    lines = ["", "extraction-audit demo: summary", "=" * 30]
    for run, rows in summary["metrics"].items():
        label = "target " if run == summary["run_id"] else "control"
        h = summary["headline"].get(run) or {}
        model = (rows[0].get("model_name") or rows[0].get("model")) if rows else ""
        lines.append(f"{label} run {run} ({model})")
        lines.append("  whole run (every sample; the report's and model card's figures):")
        for text, col, share in HEADLINE_LINES:
            lines.append(f"    {text:<40} {fmt.number(h.get(col), share):>10}")
        lines.append("  growth (budget checkpoints hold the samples whose cumulative tokens fit; last row: whole run):")
        lines.append(f"    {'rows for':<17} {'budget':>8} {'samples':>7} {'generated':>9} {'share extracted':>15} "
                     f"{'passages':>8} {'rare':>5} {'regions':>7} {'corpus tokens':>13} {'pii':>4} {'in corpus':>9}")
        for m in rows:
            lines.append(f"    {m['scope']:<17} {fmt.number(m['budget_tokens']):>8} {fmt.number(m['n_samples']):>7} "
                         f"{fmt.number(m['generated_tokens']):>9} {fmt.number(m['share_extracted'], True):>15} "
                         f"{fmt.number(m['distinct_passages']):>8} {fmt.number(m['distinct_rare_passages']):>5} "
                         f"{fmt.number(m['distinct_regions']):>7} {fmt.number(m['corpus_tokens_extracted']):>13} "
                         f"{fmt.number(m['pii_found']):>4} {fmt.number(m['pii_in_corpus']):>9}")
    lines.append(f"top rare passages (in 1-{cfg.match.rare_doc_count} documents; most emitted first; personal data "
                 "masked unless storage.allow_raw_pii):")
    for p in summary["top_rare_passages"]:
        lines.append(_passage_line(p, mask))
    if summary.get("stitched_passages"):
        lines.append("stitched passages (no single document holds them; flagged, not rare findings):")
        lines += [_passage_line(p, mask) for p in summary["stitched_passages"]]
    if summary.get("source_documents"):
        lines.append("documents reproduced most (regions: overlapping passages of one document merged):")
        for d in summary["source_documents"]:
            types = ", ".join(d["pii_types"]) if d.get("pii_types") is not None and len(d["pii_types"]) else "-"
            lines.append(f"  {d['doc_id']}: {d['regions']} region(s), {fmt.number(d['tokens_extracted'])} of "
                         f"{fmt.number(d['doc_tokens'])} tokens, {d['n_samples']} samples, personal data: {types}")
    if summary["pii"]:
        lines.append("personal data in samples (distinct values; in corpus):")
        for p in summary["pii"]:
            lines.append(f"  {p['entity_type']:<16} {p['distinct_values']:>4} {p['distinct_in_corpus']:>4}")
    if summary.get("calibration"):
        lines.append("corpus-free scores vs the corpus route (precision@k, AUC):")
        for c in summary["calibration"]:
            auc = "n/a" if c.get("auc") is None else f"{c['auc']:.3f}"
            k = fmt.k_label(c.get("k_requested", c["k"]), c["k"])
            lines.append(f"  {c['score']:<20} k={k:<38} precision={c['precision_at_k']:.3f} auc={auc}")
    lines += format_probe_summary(summary.get("probes"), summary["run_id"])
    lines.append(f"tables: {summary['warehouse']} (Delta folders)")
    report = summary.get("report") or {}
    if report.get("html"):
        lines.append(f"report:     {report['html']}")
    if report.get("markdown"):
        lines.append(f"model card: {report['markdown']}")
    if summary.get("config_path"):
        env = cfg.pii.hmac_key_env
        lines += [
            "further commands on this data (the demo's config; the PII key comes from the environment):",
            *([f"  export {env}=\"$(cat {summary['pii_key_path']})\""] if summary.get("pii_key_path") else []),
            f"  extraction-audit sql --config {summary['config_path']} "
            "\"SELECT doc_id, regions, tokens_extracted FROM extracted_documents ORDER BY tokens_extracted DESC\"",
            f"  extraction-audit pii --config {summary['config_path']} --run-id {summary['run_id']}",
            f"  extraction-audit report --config {summary['config_path']} --run-id {summary['run_id']}",
        ]
    lines.append("A lower bound: more generation finds more passages; compare runs at several budgets.")
    return "\n".join(lines)


def _passage_line(p: dict, mask) -> str:
    exact = "" if p["doc_count_is_exact"] else "≥"
    text = " ".join(mask(p["text"]).split())
    return (f"  {p['passage_id'][:10]} docs={exact}{p['doc_count']} tokens={p['n_tokens']} samples={p['n_samples']} "
            f"e.g. {list(p['example_doc_ids'])[:2]}: {text[:90]!r}")


def write_demo_config(cfg: AuditConfig, path: Path) -> Path:
    """The demo's effective config as a file (JSON is YAML), for running further commands on
    the demo's tables.  The PII key stays out of it: it is read from the environment
    variable ``pii.hmac_key_env``, set from the demo folder's key file."""
    import json

    data = json.loads(cfg.to_json())
    data["pii"]["hmac_key"] = None
    data["storage"]["warehouse"] = cfg.resolve(cfg.storage.warehouse)
    data["report"]["output_dir"] = cfg.resolve(cfg.report.output_dir)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


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
