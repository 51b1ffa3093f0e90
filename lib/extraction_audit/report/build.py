"""Assemble and write the report: named queries -> uncertainty -> figures -> HTML / Markdown.

``build_report`` is the one entry point (CLI ``extraction-audit report`` and the demo call
it).  Every number comes from a named query in ``queries`` run through Spark SQL; this
module only adds intervals (bootstrap over samples, Wilson, Chao's log-normal), the
extrapolation and the comparison text, and records which query produced what so the
report's appendix can list them.

Reads (through ``queries``): runs, samples, passage_occurrences, extracted_passages,
run_metrics, pii_findings, candidates, reviews, rank_calibration, chance_baseline.
Writes: ``report.html`` (self-contained), ``model_card.md``, ``report.json`` and the PNG
figures under the output folder; the ``report`` step's counts in ``runs.step_stats``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import AuditConfig
from ..errors import UserFacingError
from . import queries as Q
from .bootstrap import (STATS, Estimate, SampleSummaries, difference, interval, poisson_bootstrap_spark,
                        z_value)
from .curves import METRICS, describe_comparison, find_crossings
from .extrapolation import RichnessEstimate, estimate_richness, extrapolation_curve

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """One run's numbers: query results plus their intervals."""

    run_id: str
    info: dict
    headline: dict
    estimates: dict[str, Estimate]
    bootstrap_method: str
    checkpoint_intervals: pd.DataFrame            # budget_tokens, stat, value, low, high
    richness: RichnessEstimate | None
    rare_richness: RichnessEstimate | None
    extrapolation: pd.DataFrame                   # multiplier, samples, generated_tokens, expected, low, high
    frequency_counts: pd.DataFrame
    replicates: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    checkpoint_replicates: dict[int, dict[str, np.ndarray]] = field(repr=False, default_factory=dict)


@dataclass
class Comparison:
    run_id: str
    other_run_id: str
    aligned: pd.DataFrame                          # COMPARE_AT_EQUAL_BUDGETS + difference intervals
    crossings: list[dict]
    sentences: list[str]


@dataclass
class ReportData:
    run_id: str
    compare_run_ids: list[str]
    generated_at: str
    confidence: float
    bootstrap_samples: int
    rare_doc_count: int
    redact_passages: bool
    labels: dict[str, str]
    runs: dict[str, RunResult]
    growth: pd.DataFrame
    comparisons: list[Comparison]
    tables: dict[str, pd.DataFrame]                # main-run sections keyed by query name
    queries_run: list[dict]
    missing_tables: list[str]
    warnings: list[str]
    raw_pii_shown: bool = False                    # storage.allow_raw_pii: passage text not masked
    probes: object = None                          # report.probes.ProbeFigures when a run has probes

    @property
    def main(self) -> RunResult:
        return self.runs[self.run_id]


class _Queries:
    """Runs named queries and remembers (name, parameters) for the report's appendix.

    ``prefetch`` starts queries on a few driver threads before they are needed: each one
    is a handful of small Spark jobs whose planning runs on one driver thread, so a report's
    twenty-odd queries one after another leave cores idle (warm demo report: 11.3 s, of
    which 9.2 s waiting on queries one at a time)."""

    def __init__(self, spark, confidence: float, pool=None):
        self.spark = spark
        self.z = z_value(confidence)
        self.log: list[dict] = []
        self._pool = pool
        self._pending: dict = {}

    def _with_z(self, name: str, params: dict) -> dict:
        return {**params, "z": self.z} if "z" in Q.QUERIES[name].params else params

    @staticmethod
    def _entry(name: str, params: dict) -> dict:
        return {"query": name, "params": {k: (list(v) if isinstance(v, (list, tuple)) else v)
                                           for k, v in params.items()}}

    def _params(self, name: str, params: dict) -> dict:
        params = self._with_z(name, params)
        entry = self._entry(name, params)
        if entry not in self.log:
            self.log.append(entry)
        return params

    def prefetch(self, name: str, **params) -> None:
        """Start the query now (when a pool was given); ``__call__`` with the same
        parameters picks up its result."""
        if self._pool is None:
            return
        from pyspark import inheritable_thread_target  # the step's job group follows the query

        params = self._with_z(name, params)
        key = repr(self._entry(name, params))
        if key not in self._pending:
            self._pending[key] = self._pool.submit(inheritable_thread_target(self.spark)(Q.run_query),
                                                   self.spark, name, **params)

    def __call__(self, name: str, **params) -> pd.DataFrame:
        params = self._params(name, params)
        started = self._pending.pop(repr(self._entry(name, params)), None)
        return started.result() if started is not None else Q.run_query(self.spark, name, **params)

    def df(self, name: str, **params):
        return Q.sql_df(self.spark, name, **self._params(name, params))


def short_labels(infos: list[dict]) -> dict[str, str]:
    """Legend labels that fit a chart: model name and start date (``demo-tiny-gpt2 · 2026-11-30``),
    with the run id's last characters only where two runs would read the same.  The report's
    run key table maps each label to the full run id."""
    def base(info: dict) -> str:
        name = info.get("model_name") or Path(str(info.get("model") or "").rstrip("/")).name or "run"
        started = info.get("started_at")
        day = pd.Timestamp(started).strftime("%Y-%m-%d") if started is not None and not pd.isna(started) else ""
        return f"{name} · {day}" if day else str(name)

    bases = {i["run_id"]: base(i) for i in infos}
    counts = pd.Series(list(bases.values())).value_counts()
    return {rid: (f"{b} · …{rid[-6:]}" if counts[b] > 1 else b) for rid, b in bases.items()}


#: Driver threads running the report's queries side by side.
_QUERY_THREADS = 4


def collect_report_data(spark, cfg: AuditConfig, run_id: str, compare_run_ids=(), include_control: bool = True
                        ) -> ReportData:
    """Run every query and compute the intervals, extrapolations and comparisons."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=_QUERY_THREADS, thread_name_prefix="report-query")
    try:
        queries = _Queries(spark, cfg.report.confidence, pool)
        return _collect(spark, cfg, run_id, compare_run_ids, include_control, queries)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _collect(spark, cfg: AuditConfig, run_id: str, compare_run_ids, include_control: bool, q: _Queries
             ) -> ReportData:
    rc = cfg.report
    warnings: list[str] = []
    missing = Q.use_tables(spark, cfg)
    rare = cfg.match.rare_doc_count

    requested = [run_id, *[r for r in dict.fromkeys(compare_run_ids) if r != run_id]]
    infos = q("RUN_INFO", run_ids=requested)
    info_by_run = {r["run_id"]: r for r in infos.to_dict("records")}
    if run_id not in info_by_run:
        where = cfg.storage.database or cfg.resolve(cfg.storage.warehouse)
        raise UserFacingError(f"run {run_id!r} is not in the runs table under {where} "
                              "(check --run-id and the storage settings)")
    unknown = [r for r in requested if r not in info_by_run]
    if unknown:
        raise UserFacingError(f"--compare run(s) {', '.join(unknown)} not found in the runs table")
    compare = requested[1:]
    control = info_by_run[run_id].get("control_run_id")
    if include_control and isinstance(control, str) and control in info_by_run and control not in requested:
        compare.append(control)
    all_ids = [run_id, *compare]
    labels = short_labels([info_by_run[r] for r in all_ids])

    sections = {
        "DOC_COUNT_HISTOGRAM": dict(run_id=run_id),
        "TOP_RARE_PASSAGES": dict(run_id=run_id, rare_doc_count=rare, redact=rc.redact_passages,
                                  limit=rc.top_passages),
        "TOP_EMITTED_PASSAGES": dict(run_id=run_id, redact=rc.redact_passages, limit=rc.top_passages),
        "STITCHED_PASSAGES": dict(run_id=run_id, redact=rc.redact_passages, limit=rc.top_passages),
        "SOURCE_DOCUMENTS": dict(run_id=run_id, limit=rc.top_passages),
        "PROMPT_STRATEGY_BREAKDOWN": dict(run_id=run_id),
        "PII_BY_TYPE": dict(run_id=run_id, rare_doc_count=rare),
        "CONFIRMED_AMONG_CHECKED": dict(run_id=run_id),
        "RANK_CALIBRATION": dict(run_id=run_id),
        "CHANCE_BASELINE": dict(run_id=run_id),
    }
    q.prefetch("GROWTH_CURVE", run_ids=all_ids)
    q.prefetch("HEADLINE", run_ids=all_ids, rare_doc_count=rare)
    q.prefetch("PASSAGE_FREQUENCY_COUNTS", run_ids=all_ids, rare_doc_count=rare)
    for other in compare:
        q.prefetch("COMPARE_AT_EQUAL_BUDGETS", run_id=run_id, other_run_id=other)
    for name, params in sections.items():
        q.prefetch(name, **params)
    q.prefetch("PROBE_OUTCOMES", run_ids=list(all_ids))
    q.prefetch("PROBE_CHECKPOINTS", run_ids=list(all_ids))

    growth = q("GROWTH_CURVE", run_ids=all_ids)
    headlines = {r["run_id"]: r for r in q("HEADLINE", run_ids=all_ids, rare_doc_count=rare).to_dict("records")}
    frequency = q("PASSAGE_FREQUENCY_COUNTS", run_ids=all_ids, rare_doc_count=rare)
    on_driver = [r for r in all_ids if 0 < headlines[r]["samples"] <= rc.bootstrap_max_driver_samples]
    per_sample = (q("PER_SAMPLE_SUMMARY", run_ids=on_driver, rare_doc_count=rare) if on_driver
                  else pd.DataFrame(columns=["run_id"]))
    runs = {}
    for rid in all_ids:
        runs[rid] = _analyse_run(
            q, cfg, rid, info_by_run[rid], headlines[rid], growth[growth["run_id"] == rid],
            frequency[frequency["run_id"] == rid],
            per_sample[per_sample["run_id"] == rid] if rid in on_driver else None, warnings)

    comparisons = [_compare(q, runs[run_id], runs[other], rc.confidence, labels) for other in compare]

    tables = {name: q(name, **params) for name, params in sections.items()}
    # Passage text is model output: mask every personal value detected in it unless allowed.
    from ..pii.mask import mask_frame

    for name in ("TOP_RARE_PASSAGES", "TOP_EMITTED_PASSAGES", "STITCHED_PASSAGES"):
        tables[name] = mask_frame(cfg, tables[name], ["text"])
    tables["PII_BY_TYPE"] = with_heldout_figures(tables["PII_BY_TYPE"])
    if growth[growth["run_id"] == run_id].empty:
        warnings.append(f"run_metrics has no rows for {run_id}: run the match step to get growth curves.")
    from .probes import collect as collect_probes

    probe_figures = collect_probes(q, cfg, all_ids)
    return ReportData(
        run_id=run_id, compare_run_ids=compare,
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        confidence=rc.confidence, bootstrap_samples=rc.bootstrap_samples, rare_doc_count=rare,
        redact_passages=rc.redact_passages, raw_pii_shown=cfg.storage.allow_raw_pii, labels=labels, runs=runs,
        growth=growth,
        comparisons=comparisons, tables=tables, queries_run=q.log,
        missing_tables=[m for m in missing if m in Q.QUERY_TABLES], warnings=warnings, probes=probe_figures,
    )


def with_heldout_figures(frame: pd.DataFrame) -> pd.DataFrame:
    """PII_BY_TYPE plus each type's precision and recall on the held-out evaluation set
    (``pii.evaluation.HELDOUT_COUNTS``; NaN for custom types, which it does not cover)."""
    from ..pii.evaluation import heldout_figures

    figures = heldout_figures()
    frame = frame.copy()
    for col in ("heldout_precision", "heldout_recall"):
        frame[col] = [figures.get(t, {}).get(col, float("nan")) for t in frame["entity_type"]] if len(frame) else []
    return frame


def _analyse_run(q: _Queries, cfg: AuditConfig, run_id: str, info: dict, headline: dict, growth: pd.DataFrame,
                 frequency: pd.DataFrame, per_sample: pd.DataFrame | None, warnings: list[str]) -> RunResult:
    """Intervals, checkpoint intervals and extrapolation for one run.  ``per_sample`` is the
    run's PER_SAMPLE_SUMMARY rows when it is small enough for the driver, else None
    (Poisson bootstrap in Spark)."""
    rc = cfg.report
    samples = int(headline["samples"] or 0)
    checkpoint_reps: dict[int, dict[str, np.ndarray]] = {}
    checkpoint_rows = []
    if samples == 0:
        warnings.append(f"run {run_id} has no samples: nothing to measure.")
        reps, method = {}, "none (no samples)"
    elif per_sample is not None:
        method = f"{rc.bootstrap_samples} bootstrap resamples of the run's {samples:,} samples"
        summaries = SampleSummaries(per_sample)
        reps = summaries.replicates(rc.bootstrap_samples, rc.bootstrap_seed)
        _check_point(summaries.point(), headline, run_id, warnings)
        mismatched = False
        for row in growth.to_dict("records"):
            n_first = summaries.prefix_length(row["n_samples"], row["generated_tokens"])
            point = summaries.point(n_first) if n_first is not None else None
            if point is None or point["distinct_passages"] != row["distinct_passages"] or \
                    point["extracted_tokens"] != row["extracted_tokens"]:
                mismatched = True
                continue
            budget = int(row["budget_tokens"])
            checkpoint_reps[budget] = summaries.replicates(rc.bootstrap_samples, rc.bootstrap_seed, n_first)
            for stat in ("distinct_passages", "distinct_rare_passages", "share_extracted", "extracted_tokens"):
                est = interval(stat, row[stat], checkpoint_reps[budget][stat], rc.confidence)
                checkpoint_rows.append({"budget_tokens": budget, "stat": stat, "value": est.value,
                                        "low": est.low, "high": est.high})
        if mismatched:
            warnings.append(f"run {run_id}: some run_metrics checkpoints are not the first n_samples samples "
                            "in sample_id order (or disagree with the passage tables); those checkpoints have "
                            "no interval.")
    else:
        method = (f"{rc.bootstrap_samples} Poisson-bootstrap replicates over the run's {samples:,} samples "
                  "(Spark); checkpoints have no interval")
        reps = poisson_bootstrap_spark(
            q.df("PER_SAMPLE_SUMMARY", run_ids=[run_id], rare_doc_count=cfg.match.rare_doc_count),
            rc.bootstrap_samples, rc.bootstrap_seed)
    estimates = {stat: interval(stat, _num(headline.get(stat)), reps[stat], rc.confidence) if reps
                 else Estimate(_num(headline.get(stat))) for stat in STATS}
    _check_run_metrics(growth, headline, run_id, warnings)

    richness = rare_richness = None
    extrap = pd.DataFrame(columns=["multiplier", "samples", "generated_tokens", "expected", "low", "high"])
    frequency = frequency.drop(columns=["run_id"])
    if samples:
        richness = estimate_richness(dict(zip(frequency["k"], frequency["passages"])), samples, rc.confidence)
        rare_richness = estimate_richness(dict(zip(frequency["k"], frequency["rare_passages"])), samples,
                                          rc.confidence)
        tokens_per_sample = float(headline["generated_tokens"]) / samples
        extrap = pd.DataFrame(extrapolation_curve(richness))
        extrap["generated_tokens"] = extrap["samples"] * tokens_per_sample
    return RunResult(run_id, info, headline, estimates, method, pd.DataFrame(
        checkpoint_rows, columns=["budget_tokens", "stat", "value", "low", "high"]), richness, rare_richness,
        extrap, frequency, reps, checkpoint_reps)


def _num(value):
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else float(value)


def _check_point(point: dict, headline: dict, run_id: str, warnings: list[str]) -> None:
    for stat in ("extracted_tokens", "distinct_passages", "distinct_rare_passages"):
        if _num(headline.get(stat)) != point[stat]:
            warnings.append(f"run {run_id}: per-sample {stat} ({point[stat]:,.0f}) differs from the passage "
                            f"tables ({headline.get(stat)}); occurrences may reference passages missing from "
                            "extracted_passages.")


def _check_run_metrics(growth: pd.DataFrame, headline: dict, run_id: str, warnings: list[str]) -> None:
    """The checkpoint covering all samples must agree with the whole-run numbers."""
    full = growth[growth["n_samples"] == headline["samples"]]
    for row in full.to_dict("records"):
        for stat in ("extracted_tokens", "distinct_passages", "distinct_rare_passages"):
            if _num(row[stat]) != _num(headline.get(stat)):
                warnings.append(f"run {run_id}: run_metrics {stat} at {row['budget_tokens']:,} tokens "
                                f"({row[stat]}) differs from the passage tables ({headline.get(stat)}).")


def _compare(q: _Queries, a: RunResult, b: RunResult, confidence: float,
             labels: dict[str, str]) -> Comparison:
    aligned = q("COMPARE_AT_EQUAL_BUDGETS", run_id=a.run_id, other_run_id=b.run_id)
    for metric in METRICS:
        lows, highs = [], []
        for budget, va, vb in zip(aligned["budget_tokens"], aligned[f"{metric}_a"], aligned[f"{metric}_b"]):
            ra, rb = a.checkpoint_replicates.get(int(budget)), b.checkpoint_replicates.get(int(budget))
            est = difference(metric, va, ra[metric], vb, rb[metric], confidence) if ra and rb else Estimate(None)
            lows.append(est.low)
            highs.append(est.high)
        aligned[f"{metric}_diff"] = aligned[f"{metric}_a"] - aligned[f"{metric}_b"]
        aligned[f"{metric}_diff_low"] = lows
        aligned[f"{metric}_diff_high"] = highs
    crossings = [c.to_dict() | {"run_a": a.run_id, "run_b": b.run_id}
                 for metric in METRICS for c in find_crossings(aligned, a.run_id, b.run_id, metric)]
    return Comparison(a.run_id, b.run_id, aligned, crossings,
                      describe_comparison(aligned, a.run_id, b.run_id, labels))


# ---------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------

def build_report(spark, cfg: AuditConfig, run_id: str, compare_run_ids=(), out_dir: str | Path | None = None,
                 include_control: bool = True) -> dict:
    """Write the HTML report, the Markdown model-card summary and report.json for ``run_id``,
    compared with ``compare_run_ids`` (and the run's control run unless
    ``include_control`` is false).  Returns the written paths and the step's counts.

    ``out_dir`` defaults to ``<report.output_dir>/<run_id>``."""
    from . import html as html_render
    from . import markdown as md_render
    from .plots import doc_count_histogram_png, growth_curve_png
    from .probes import duplication_curve_png as probe_figures_png

    started = time.time()
    data = collect_report_data(spark, cfg, run_id, compare_run_ids, include_control)
    out = Path(out_dir) if out_dir is not None else Path(cfg.resolve(cfg.report.output_dir)) / run_id
    out.mkdir(parents=True, exist_ok=True)

    figures = {
        "growth_curve": growth_curve_png(
            data.growth, data.labels,
            intervals={r: res.checkpoint_intervals for r, res in data.runs.items()},
            extrapolation={r: res.extrapolation for r, res in data.runs.items() if not res.extrapolation.empty},
            baseline_share=_baseline_share(data),
            crossings=[c for comp in data.comparisons for c in comp.crossings]),
        "doc_count_histogram": doc_count_histogram_png(data.tables["DOC_COUNT_HISTOGRAM"]),
        "probe_duplication_curve": probe_figures_png(data.probes, data.labels) if data.probes else None,
    }
    figure_paths = {}
    for name, png in figures.items():
        if png is not None:
            figure_paths[name] = out / f"{name}.png"
            figure_paths[name].write_bytes(png)
    paths = {
        "html": out / "report.html",
        "markdown": out / "model_card.md",
        "json": out / "report.json",
    }
    paths["html"].write_text(html_render.render(data, figures), encoding="utf-8")
    paths["markdown"].write_text(md_render.render(data, {k: p.name for k, p in figure_paths.items()}),
                                 encoding="utf-8")
    paths["json"].write_text(json.dumps(_clean(report_json(data)), indent=2, default=_json_default),
                             encoding="utf-8")
    stats = {
        "runs": len(data.runs),
        "queries": len(data.queries_run),
        "figures": len(figure_paths),
        "warnings": len(data.warnings),
        "missing_tables": data.missing_tables,
        "seconds": round(time.time() - started, 2),
        "html": str(paths["html"]),
    }
    log.info("report for %s written to %s (%.1fs)", run_id, paths["html"], stats["seconds"])
    return {**{k: str(v) for k, v in paths.items()}, "figures": {k: str(v) for k, v in figure_paths.items()},
            "out_dir": str(out), "stats": stats, "warnings": list(data.warnings)}


def _baseline_share(data: ReportData) -> float | None:
    baseline = data.tables["CHANCE_BASELINE"]
    if baseline.empty or baseline["share_extracted"].isna().all():
        return None
    return float(baseline["share_extracted"].iloc[0])


def _clean(value):
    """NaN -> None recursively (JSON has no NaN)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_clean(v) for v in value.tolist()]
    if isinstance(value, float) and value != value:
        return None
    return value


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return None if np.isnan(value) else float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (pd.Timestamp, datetime)):
        return value.isoformat()
    return str(value)


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as dicts with full float precision (DataFrame.to_json rounds to 10 digits)."""
    return [{k: (None if _is_nan(v) else v) for k, v in row.items()} for row in frame.to_dict("records")]


def _is_nan(value) -> bool:
    return isinstance(value, float) and value != value


def report_json(data: ReportData) -> dict:
    """Every number in the report, machine-readable (what the tests compare with SQL)."""
    from .probes import to_json as probes_json

    return {
        "run_id": data.run_id,
        "compare_run_ids": data.compare_run_ids,
        "labels": dict(data.labels),  # run id -> the short label charts, tables and sentences use
        "generated_at": data.generated_at,
        "confidence": data.confidence,
        "bootstrap_samples": data.bootstrap_samples,
        "rare_doc_count": data.rare_doc_count,
        "runs": {
            rid: {
                "info": {k: v for k, v in res.info.items()},
                "headline": res.headline,
                "estimates": {k: e.to_dict() for k, e in res.estimates.items()},
                "bootstrap_method": res.bootstrap_method,
                "checkpoint_intervals": _records(res.checkpoint_intervals),
                "richness": res.richness.to_dict() if res.richness else None,
                "rare_richness": res.rare_richness.to_dict() if res.rare_richness else None,
                "extrapolation": _records(res.extrapolation),
                "frequency_counts": _records(res.frequency_counts),
            }
            for rid, res in data.runs.items()
        },
        "growth_curve": _records(data.growth),
        "comparisons": [
            {"run_id": c.run_id, "other_run_id": c.other_run_id, "aligned": _records(c.aligned),
             "crossings": c.crossings, "sentences": c.sentences}
            for c in data.comparisons
        ],
        "tables": {name: _records(frame) for name, frame in data.tables.items()},
        "queries_run": data.queries_run,
        "missing_tables": data.missing_tables,
        "warnings": data.warnings,
        "probes": probes_json(data.probes),
    }
