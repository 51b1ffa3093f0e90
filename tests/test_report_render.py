"""Rendering without Spark: a run with nothing in it (no samples, no run_metrics, no
optional tables) still gets a readable report, and table cells of every type render."""

from __future__ import annotations

import numpy as np
import pandas as pd

from extraction_audit.report import html, markdown
from extraction_audit.report.bootstrap import STATS, Estimate
from extraction_audit.report.build import ReportData, RunResult, report_json
from extraction_audit.report.plots import doc_count_histogram_png, growth_curve_png


def _empty_run_data() -> ReportData:
    headline = {"run_id": "r0", "samples": 0, "generated_tokens": 0, "extracted_tokens": 0,
                "share_extracted": float("nan"), "distinct_passages": 0, "distinct_rare_passages": 0,
                "single_document_passages": 0, "stitched_passages": 0, "low_entropy_passages": 0, "new_passages": 0,
                "samples_with_passage": 0, "pii_found": 0, "pii_in_corpus": 0}
    run = RunResult(
        run_id="r0", info={"run_id": "r0", "model": "m", "corpus_id": "c", "status": "created", "budget_tokens": 1000,
                           "prompt_strategy": "empty:1", "sampling": "{}", "match_n": None},
        headline=headline, estimates={s: Estimate(headline.get(s)) for s in STATS}, bootstrap_method="none",
        checkpoint_intervals=pd.DataFrame(columns=["budget_tokens", "stat", "value", "low", "high"]),
        richness=None, rare_richness=None,
        extrapolation=pd.DataFrame(columns=["multiplier", "samples", "generated_tokens", "expected", "low", "high"]),
        frequency_counts=pd.DataFrame(columns=["k", "passages", "rare_passages"]))
    buckets = ["0 (stitched)", "1", "2", "3-9", "10-99", "100-999", "1000+"]
    tables = {
        "DOC_COUNT_HISTOGRAM": pd.DataFrame({"bucket_order": range(7), "doc_count_bucket": buckets, "passages": 0,
                                             "excluded_passages": 0, "emitting_samples": 0}),
        "TOP_RARE_PASSAGES": pd.DataFrame(), "TOP_EMITTED_PASSAGES": pd.DataFrame(),
        "PROMPT_STRATEGY_BREAKDOWN": pd.DataFrame(), "PII_BY_TYPE": pd.DataFrame(),
        "CONFIRMED_AMONG_CHECKED": pd.DataFrame([{"candidates": 0, "checked": 0, "confirmed": 0, "not_found": 0,
                                                  "unsure": 0, "share_confirmed": None}]),
        "RANK_CALIBRATION": pd.DataFrame([{"score": "zlib_ratio", "k_requested": 10, "k": 4, "precision_at_k": 0.5,
                                           "auc": np.float64(0.71234), "n_positive": 2, "n_ranked": 4}]),
        "CHANCE_BASELINE": pd.DataFrame(),
    }
    growth = pd.DataFrame(columns=["run_id", "budget_tokens", "generated_tokens", "n_samples", "distinct_passages",
                                   "distinct_rare_passages", "share_extracted", "pii_found", "pii_in_corpus"])
    return ReportData(run_id="r0", compare_run_ids=[], generated_at="now", confidence=0.95, bootstrap_samples=10,
                      rare_doc_count=2, redact_passages=True, labels={"r0": "r0"}, runs={"r0": run}, growth=growth,
                      comparisons=[], tables=tables, queries_run=[{"query": "HEADLINE", "params": {"run_ids": ["r0"]}}],
                      missing_tables=["pii_findings"], warnings=["run r0 has no samples: nothing to measure."])


def test_an_empty_run_renders():
    data = _empty_run_data()
    assert growth_curve_png(data.growth, data.labels) is None
    assert doc_count_histogram_png(data.tables["DOC_COUNT_HISTOGRAM"]) is None
    page = html.render(data, {"growth_curve": None, "doc_count_histogram": None})
    assert "nothing to measure" in page and "No data to plot" in page and "Not computed for this run" in page
    assert "zlib_ratio" in page and "0.712" in page            # numpy scalars render
    assert "Tables absent (shown as empty): pii_findings" in page
    text = markdown.render(data)
    assert "### Limitations" in text and "no method (no samples)" in text
    assert report_json(data)["runs"]["r0"]["richness"] is None


def test_table_cells_render_lists_arrays_and_missing_values():
    frame = pd.DataFrame([{"a": np.array(["d1", "d2"]), "b": None, "c": float("nan"), "d": 0.25, "e": "<x>"}])
    out = html._table(frame, [("a", "A", ""), ("b", "B", ""), ("c", "C", "num"), ("d", "D", "share"),
                              ("e", "E", "passage")])
    assert "d1, d2" in out and "25.00%" in out and "&lt;x&gt;" in out and "<td class=\"num\">–</td>" in out
    # Intervals and run labels never wrap inside their cell.
    out = html._table(pd.DataFrame([{"ci": "12.08% – 27.06%", "run": "demo-tiny-gpt2 · 2026-12-01"}]),
                      [("ci", "95% CI", "interval"), ("run", "run", "label")])
    assert '<td class="num">12.08% – 27.06%</td>' in out
    assert '<td class="label">demo-tiny-gpt2 · 2026-12-01</td>' in out
    assert "td.label{white-space:nowrap}" in html._CSS and "td.num{text-align:right;white-space:nowrap}" in html._CSS


def test_short_run_labels_capped_k_and_short_ids():
    from extraction_audit.report import fmt
    from extraction_audit.report.build import short_labels

    labels = short_labels([
        {"run_id": "demo-20261130T185545Z-ed5676", "model_name": "demo-tiny-gpt2", "started_at": "2026-11-30 18:55"},
        {"run_id": "demo-20261130T190000Z-aa1122", "model_name": "demo-tiny-gpt2", "started_at": "2026-11-30 19:00"},
        {"run_id": "ctl", "model": "/models/ckpt-early/", "started_at": None}])
    assert labels["ctl"] == "ckpt-early"
    assert labels["demo-20261130T185545Z-ed5676"] == "demo-tiny-gpt2 · 2026-11-30 · …ed5676"  # same model, same day
    assert fmt.k_label(1000, 41) == "1,000 (capped to 41: all ranked samples)" and fmt.k_label(10, 10) == "10"
    assert fmt.short_id("0123456789abcdef") == "0123456789"
    assert fmt.timestamp(pd.Timestamp("2026-12-01 03:27:45.017993")) == "2026-12-01 03:27 UTC"
    assert fmt.timestamp(None) == ""
    assert html._status_text("running:report") == "running:report (the step writing this report)"
    assert html._status_text("complete") == "complete"
