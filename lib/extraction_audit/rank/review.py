"""The human review queue of the corpus-free route: export, import, confirmed-among-checked.

Reads ``candidates`` and ``samples`` (export), ``candidates`` and ``reviews`` (import,
summary); writes ``reviews`` (merge on run_id, sample_id, reviewer: importing the same
file twice changes nothing, not even ``reviewed_at``).

The export is the top ``N`` representatives of every score, deduplicated across scores:
one self-contained HTML page to read (inline CSS, no scripts or external assets, all text
HTML-escaped) and one CSV whose ``verdict`` and ``evidence`` columns the reviewer fills and
imports.  The queue is small (at most N x number of scores rows), so it is collected.
"""

from __future__ import annotations

import html
import logging
import re
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..config import AuditConfig
from ..errors import UserFacingError
from ..ids import ID_RULE, is_valid_id
from ..tables import Tables
from .scores import SCORES

log = logging.getLogger(__name__)

VERDICTS = ("confirmed", "not_found", "unsure")
CSV_COLUMNS_REQUIRED = ("run_id", "sample_id", "verdict")
_SPREADSHEET_FORMULA = re.compile(r"^[=+\-@\t\r]")


def _score_names(cfg: AuditConfig) -> list[str]:
    return list(cfg.rank.scores)


def review_queue(spark, cfg: AuditConfig, run_id: str, top_n: int) -> pd.DataFrame:
    """Top ``top_n`` representatives per score, one row per sample, best rank first."""
    from pyspark.sql import functions as F

    if top_n < 1:
        raise UserFacingError(f"--top must be at least 1, got {top_n}")
    tables = Tables(spark, cfg)
    names = _score_names(cfg)
    cands = tables.read("candidates").where(F.col("run_id") == run_id)
    in_top = [F.col(SCORES[s].rank_column) <= top_n for s in names]
    any_top = in_top[0]
    for cond in in_top[1:]:
        any_top = any_top | cond
    top = cands.where(F.col("is_representative") & F.coalesce(any_top, F.lit(False)))
    samples = tables.read("samples").where(F.col("run_id") == run_id).select("sample_id", "prompt_text", "text")
    top_ranks = [F.when(c, F.col(SCORES[s].rank_column)) for s, c in zip(names, in_top)]
    queue = top.join(samples, "sample_id", "left").select(
        "run_id", "sample_id",
        (F.least(*top_ranks) if len(top_ranks) > 1 else top_ranks[0]).alias("best_rank"),
        F.concat_ws("; ", *[F.when(c, F.concat(F.lit(f"{s} #"), F.col(SCORES[s].rank_column).cast("string")))
                            for s, c in zip(names, in_top)]).alias("top_by"),
        "cluster_size", "n_tokens", *names, "prompt_text", "text",
    ).orderBy("best_rank", "sample_id")
    pdf = queue.toPandas()
    if pdf.empty and cands.limit(1).count() == 0:
        raise UserFacingError(f"run {run_id!r} has no candidates: run `extraction-audit rank` first")
    return pdf


def _safe_name(run_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id)


def _spreadsheet_safe(value):
    """Cells starting with = + - @ would run as formulas in a spreadsheet: prefix a quote.
    (Only the CSV copy is changed; the HTML shows the exact text.)"""
    if isinstance(value, str) and _SPREADSHEET_FORMULA.match(value):
        return "'" + value
    return value


def export_review(spark, cfg: AuditConfig, run_id: str, top_n: int | None, out_dir: str | Path | None = None
                  ) -> dict:
    """Write ``review_<run>.html`` and ``review_<run>.csv`` under ``out_dir`` (default
    ``<report.output_dir>/<run>/review``) and list them in ``run_artifacts`` for purge;
    returns paths and counts."""
    from ..runs import RunRecord
    from ..tables import Tables

    top_n = top_n or cfg.rank.top_n
    # Sample text is model output: personal values in it are masked unless storage.allow_raw_pii.
    from ..pii.mask import mask_frame

    queue = mask_frame(cfg, review_queue(spark, cfg, run_id, top_n), ["prompt_text", "text"])
    out = Path(out_dir) if out_dir else Path(cfg.resolve(cfg.report.output_dir)) / run_id / "review"
    out.mkdir(parents=True, exist_ok=True)
    stem = f"review_{_safe_name(run_id)}"
    csv_path, html_path = out / f"{stem}.csv", out / f"{stem}.html"

    table = queue.copy()
    for col in ("prompt_text", "text"):
        table[col] = table[col].map(_spreadsheet_safe)
    table["verdict"] = ""
    table["evidence"] = ""
    table.to_csv(csv_path, index=False)
    html_path.write_text(render_html(queue, run_id, top_n, _score_names(cfg), csv_path.name), encoding="utf-8")
    RunRecord(Tables(spark, cfg), run_id).record_artifacts([csv_path, html_path], kind="review_export")
    log.info("review queue for %s: %d samples -> %s", run_id, len(queue), out)
    return {"run_id": run_id, "top_n": top_n, "samples": int(len(queue)), "csv": str(csv_path),
            "html": str(html_path)}


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#1d1d1f;background:#fff}
h1{font-size:1.4rem;margin:0 0 .3rem}p.meta{color:#555;margin:.2rem 0 1rem}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #d0d0d5;padding:.45rem;vertical-align:top}
th{background:#f2f2f5;text-align:left;font-size:.85rem}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;margin:0;font-size:.85rem;max-height:22rem;overflow:auto}
.prompt{color:#777;font-style:italic;font-size:.8rem;margin-bottom:.3rem}.top{font-size:.8rem}
td.fill{min-width:8rem;background:#fffbea}.scores{font-size:.75rem;color:#333;white-space:nowrap}
"""


def render_html(queue: pd.DataFrame, run_id: str, top_n: int, score_names: list[str], csv_name: str) -> str:
    """A self-contained page: inline CSS, no scripts, every piece of text escaped."""
    esc = html.escape
    rows = []
    for i, r in enumerate(queue.itertuples(index=False), start=1):
        rec = r._asdict()
        scores = "<br>".join(f"{esc(s)}: {_fmt(rec.get(s))}" for s in score_names)
        prompt = rec.get("prompt_text")
        prompt_html = f'<div class="prompt">prompt: {esc(prompt)}</div>' if isinstance(prompt, str) and prompt else ""
        rows.append(
            f"<tr><td class=num>{i}</td><td class=num>{esc(str(rec['sample_id']))}</td>"
            f"<td class=top>{esc(str(rec['top_by']))}</td><td class=scores>{scores}</td>"
            f"<td class=num>{esc(str(rec.get('cluster_size')))}</td>"
            f"<td>{prompt_html}<pre>{esc(str(rec.get('text') or ''))}</pre></td>"
            f"<td class=fill></td><td class=fill></td></tr>")
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>Review queue: {esc(run_id)}</title><style>{_CSS}</style></head><body>"
        f"<h1>Review queue for run {esc(run_id)}</h1>"
        f"<p class=meta>Top {top_n} near-duplicate representatives per score ({esc(', '.join(score_names))}), "
        f"{len(queue)} distinct samples. Search for each text (for example on the web) and record a verdict "
        f"(confirmed, not_found or unsure) and the evidence (such as a URL) in the <code>verdict</code> and "
        f"<code>evidence</code> columns of <code>{esc(csv_name)}</code>, then run "
        f"<code>extraction-audit review import {esc(csv_name)} --reviewer NAME</code>.</p>"
        "<table><thead><tr><th>#</th><th>sample</th><th>in the top of</th><th>scores</th><th>near-dups</th>"
        "<th>generated text</th><th>verdict</th><th>evidence</th></tr></thead><tbody>"
        + "".join(rows) + "</tbody></table></body></html>\n"
    )


def _fmt(value) -> str:
    try:
        return "NULL" if value is None or pd.isna(value) else f"{float(value):.4g}"
    except (TypeError, ValueError):
        return html.escape(str(value))


# -- import -------------------------------------------------------------------------

def read_verdicts(path: str | Path, reviewer: str) -> tuple[pd.DataFrame, dict]:
    """Parse and validate a filled review CSV; returns (rows to record, counts).

    Every problem names the data row (1 = first row after the header) and the sample."""
    path = Path(path)
    if not reviewer or not reviewer.strip():
        raise UserFacingError("--reviewer must name who reviewed the samples")
    if not path.is_file():
        raise UserFacingError(f"review file not found: {path}")
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as err:
        raise UserFacingError(f"{path}: not a readable CSV file: {err}") from None
    missing = [c for c in CSV_COLUMNS_REQUIRED if c not in raw.columns]
    if missing:
        raise UserFacingError(f"{path}: missing column(s) {', '.join(missing)} "
                              "(import the CSV written by `review export`)")
    evidence = raw["evidence"] if "evidence" in raw.columns else pd.Series([""] * len(raw), index=raw.index)
    frame = pd.DataFrame({
        "row": range(1, len(raw) + 1),
        "run_id": raw["run_id"].str.strip(),
        "sample_id": raw["sample_id"].str.strip(),
        "verdict": raw["verdict"].str.strip().str.lower(),
        "evidence": evidence.str.strip(),
    })
    filled = frame[frame["verdict"] != ""].copy()
    bad_verdict = filled[~filled["verdict"].isin(VERDICTS)]
    if len(bad_verdict):
        r = bad_verdict.iloc[0]
        raise UserFacingError(f"{path}: row {r['row']} (sample {r['sample_id']}): verdict {r['verdict']!r} is not "
                              f"one of {', '.join(VERDICTS)}")
    bad_id = filled[~filled["sample_id"].str.fullmatch(r"-?\d+") | ~filled["run_id"].map(is_valid_id)]
    if len(bad_id):
        r = bad_id.iloc[0]
        raise UserFacingError(f"{path}: row {r['row']}: needs a valid run_id ({ID_RULE}) and an integer "
                              f"sample_id, got run_id={r['run_id']!r} sample_id={r['sample_id']!r}")
    filled["sample_id"] = filled["sample_id"].astype("int64")
    dup = filled[filled.duplicated(["run_id", "sample_id"], keep=False)]
    if len(dup):
        first = dup.iloc[0]
        rows = dup[(dup["run_id"] == first["run_id"]) & (dup["sample_id"] == first["sample_id"])]["row"].tolist()
        raise UserFacingError(f"{path}: rows {', '.join(map(str, rows))} all give a verdict for run "
                              f"{first['run_id']} sample {first['sample_id']}; keep one")
    filled["evidence"] = filled["evidence"].where(filled["evidence"] != "", None)
    filled["reviewer"] = reviewer.strip()
    counts = {
        "rows_read": int(len(frame)),
        "skipped": {"no_verdict": int(len(frame) - len(filled))},
        "verdicts": {v: int((filled["verdict"] == v).sum()) for v in VERDICTS},
        "confirmed_without_evidence": int(((filled["verdict"] == "confirmed") & filled["evidence"].isna()).sum()),
    }
    return filled, counts


def import_review(spark, cfg: AuditConfig, path: str | Path, reviewer: str) -> dict:
    """Record the verdicts of a filled review CSV into ``reviews`` (idempotent)."""
    from pyspark.sql import functions as F

    rows, counts = read_verdicts(path, reviewer)
    tables = Tables(spark, cfg)
    counts.update({"recorded": 0, "unchanged": 0, "runs": sorted(rows["run_id"].unique().tolist())})
    if rows.empty:
        return counts
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    incoming = spark.createDataFrame(
        rows[["row", "run_id", "sample_id", "reviewer", "verdict", "evidence"]],
        "row LONG, run_id STRING, sample_id BIGINT, reviewer STRING, verdict STRING, evidence STRING")
    known = tables.read("candidates").select("run_id", "sample_id")
    unknown = incoming.join(known, ["run_id", "sample_id"], "left_anti").orderBy("row").limit(1).collect()
    if unknown:
        u = unknown[0]
        raise UserFacingError(f"{path}: row {u['row']}: run {u['run_id']} sample {u['sample_id']} is not in "
                              "candidates (wrong run id, or `rank` not run for it)")
    existing = tables.read("reviews")
    same = [incoming[c].eqNullSafe(existing[c]) for c in ("run_id", "sample_id", "reviewer", "verdict", "evidence")]
    cond = same[0]
    for c in same[1:]:
        cond = cond & c
    changed = incoming.join(existing, cond, "left_anti").drop("row").withColumn(
        "reviewed_at", F.lit(now).cast("timestamp")).localCheckpoint()
    n_changed = changed.count()
    if n_changed:
        tables.merge("reviews", changed)
    counts["recorded"] = int(n_changed)
    counts["unchanged"] = int(len(rows) - n_changed)
    return counts


# -- summary ------------------------------------------------------------------------

def confirmed_among_checked(spark, cfg: AuditConfig, run_id: str, top_n: int | None = None) -> pd.DataFrame:
    """Per score (and ``any``): of its top ``top_n`` representatives, how many were checked
    and how many confirmed.

    A sample's verdict across reviewers: confirmed if any reviewer confirmed it, else unsure
    if any was unsure, else not_found.  ``confirmed_among_checked`` = confirmed / checked."""
    from pyspark.sql import functions as F

    top_n = top_n or cfg.rank.top_n
    tables = Tables(spark, cfg)
    names = _score_names(cfg)
    reviews = tables.read("reviews").where(F.col("run_id") == run_id).groupBy("sample_id").agg(
        F.max((F.col("verdict") == "confirmed").cast("int")).alias("c"),
        F.max((F.col("verdict") == "unsure").cast("int")).alias("u"),
    ).select("sample_id", F.when(F.col("c") == 1, "confirmed").when(F.col("u") == 1, "unsure")
             .otherwise("not_found").alias("verdict"))
    cands = tables.read("candidates").where((F.col("run_id") == run_id) & F.col("is_representative")) \
        .join(reviews, "sample_id", "left")
    in_top = {s: F.coalesce(F.col(SCORES[s].rank_column) <= top_n, F.lit(False)) for s in names}
    any_top = F.lit(False)
    for cond in in_top.values():
        any_top = any_top | cond
    in_top["any"] = any_top

    def agg(name, cond):
        return [
            F.sum(cond.cast("int")).alias(f"{name}__in_top"),
            F.sum((cond & F.col("verdict").isNotNull()).cast("int")).alias(f"{name}__checked"),
            *[F.sum((cond & (F.col("verdict") == v)).cast("int")).alias(f"{name}__{v}") for v in VERDICTS],
        ]

    row = cands.agg(*[a for name, cond in in_top.items() for a in agg(name, cond)]).first().asDict()
    records = []
    for name in in_top:
        checked = int(row[f"{name}__checked"] or 0)
        confirmed = int(row[f"{name}__confirmed"] or 0)
        records.append({
            "run_id": run_id, "score": name, "top_n": top_n, "in_top": int(row[f"{name}__in_top"] or 0),
            "checked": checked, "confirmed": confirmed, "not_found": int(row[f"{name}__not_found"] or 0),
            "unsure": int(row[f"{name}__unsure"] or 0),
            "confirmed_among_checked": confirmed / checked if checked else float("nan"),
        })
    return pd.DataFrame.from_records(records)
