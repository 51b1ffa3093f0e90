"""Self-contained HTML report: inline CSS, figures as base64 PNG, no external assets.

Renders a ``build.ReportData``; computes nothing.  Every section names the query whose
result it shows, and the appendix prints each query's SQL and parameters.
"""

from __future__ import annotations

import base64
import json
from html import escape

import numpy as np
import pandas as pd

from . import fmt
from .bootstrap import PERCENTILE_METHOD, SE_METHOD
from .curves import METRICS
from .queries import QUERIES
from .text import limitations, pii_caveat, scope_line, settings_lines

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1180px;
color:#222;line-height:1.45;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em}th,td{border:1px solid #ddd;padding:.3em .55em;
vertical-align:top}th{background:#f4f4f4;text-align:left}td.num{text-align:right;white-space:nowrap}
.meta{color:#555}.note{color:#555;font-size:.9em}.warn{background:#fff4e5;border-left:4px solid #f0a020;
padding:.5em 1em}.passage{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em;min-width:420px;
max-width:640px;white-space:pre-wrap;word-break:break-word}code.id{font-size:.85em;white-space:nowrap}td.label{white-space:nowrap}.q{color:#777;font-size:.8em}img{max-width:100%}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.82em}details{margin:.3em 0}
"""


def _q(name: str) -> str:
    return f'<span class="q">query: <a href="#q-{escape(name)}">{escape(name)}</a></span>'


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return '<p class="note">No data to plot.</p>'
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


# Text shown as it is, styled by kind: run labels and intervals ("12.08% – 27.06%") on one line.
_TEXT_CLASSES = {"label": "label", "interval": "num", "passage": "passage"}


def _cell(value, kind: str = "") -> str:
    if kind == "share":
        return f'<td class="num">{fmt.number(value, share=True)}</td>'
    if kind == "num":
        return f'<td class="num">{fmt.number(value)}</td>'
    if kind == "id":
        return f'<td><code class="id">{escape(fmt.short_id(value))}</code></td>'
    if kind == "k":
        k_requested, k = value
        return f'<td class="num">{escape(fmt.k_label(k_requested, k))}</td>'
    if kind in _TEXT_CLASSES:
        return f'<td class="{_TEXT_CLASSES[kind]}">{escape("" if fmt.is_missing(value) else str(value))}</td>'
    if isinstance(value, (list, tuple, np.ndarray)):
        value = ", ".join(str(v) for v in value)
    elif isinstance(value, float) and not fmt.is_missing(value):
        value = f"{value:.3g}"
    return f"<td>{escape('' if fmt.is_missing(value) else str(value))}</td>"


def _status_text(status) -> str:
    """The report is written inside the run's report step, so the run reads ``running:report``."""
    status = str(status)
    return f"{status} (the step writing this report)" if status == "running:report" else status


def _table(frame: pd.DataFrame, columns: list[tuple[str, str, str]]) -> str:
    """columns: (column, header, kind) with kind '', 'num', 'share', 'interval', 'label' or 'passage'."""
    if frame is None or frame.empty:
        return '<p class="note">No rows.</p>'
    head = "".join(f"<th>{escape(h)}</th>" for _, h, _ in columns)
    body = "".join(
        "<tr>" + "".join(_cell((row.get("k_requested"), row.get("k")) if k == "k" else row.get(c), k)
                         for c, _, k in columns) + "</tr>"
        for row in frame.to_dict("records")
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _rows(rows: list[tuple[str, str, str]]) -> str:
    body = "".join(f"<tr><td>{escape(a)}</td><td class='num'>{escape(b)}</td><td>{c}</td></tr>"
                   for a, b, c in rows)
    return f"<table><tr><th>Measure</th><th>Value</th><th>Source</th></tr>{body}</table>"


def render(data, figures: dict[str, bytes | None]) -> str:
    main = data.main
    h = main.headline
    e = main.estimates
    conf = f"{data.confidence:.0%}"
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Extraction audit report: {escape(data.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Training-data extraction audit: {escape(data.run_id)}</h1>",
        f"<p class='meta'>Model <b>{escape(str(main.info.get('model_name') or main.info.get('model')))}</b> · corpus "
        f"<b>{escape(str(main.info.get('corpus_id')))}</b> · "
        f"run status {escape(_status_text(main.info.get('status')))} · "
        f"report generated {escape(data.generated_at)}</p>",
    ]
    if data.warnings:
        parts.append("<div class='warn'><b>Check before relying on this report:</b><ul>"
                     + "".join(f"<li>{escape(w)}</li>" for w in data.warnings) + "</ul></div>")

    # -- summary -----------------------------------------------------------------
    rich = main.richness
    summary = [
        ("Samples", fmt.number(h["samples"]), _q("HEADLINE")),
        ("Generated tokens (budget " + fmt.number(main.info.get("budget_tokens")) + ")",
         fmt.number(h["generated_tokens"]), _q("HEADLINE")),
        ("Share of generated tokens extracted", fmt.value_with_interval(e["share_extracted"], share=True),
         _q("HEADLINE")),
        ("Extracted tokens", fmt.value_with_interval(e["extracted_tokens"]), _q("HEADLINE")),
        ("Distinct extracted passages", fmt.value_with_interval(e["distinct_passages"]), _q("HEADLINE")),
        (f"Distinct rare passages (in 1–{data.rare_doc_count} documents: privacy findings)",
         fmt.value_with_interval(e["distinct_rare_passages"]), _q("HEADLINE")),
        ("Distinct source regions (overlapping passages of one document merged)",
         fmt.number(h.get("distinct_regions")), _q("HEADLINE")),
        ("… of which hold a rare passage", fmt.number(h.get("distinct_rare_regions")), _q("HEADLINE")),
        ("Corpus tokens extracted (union of matched corpus spans)", fmt.number(h.get("corpus_tokens_extracted")),
         _q("HEADLINE")),
        ("Corpus documents reproduced", fmt.number(h.get("source_documents")), _q("HEADLINE")),
        ("Passages in exactly one document", fmt.number(h["single_document_passages"]), _q("HEADLINE")),
        ("Passages stitched across documents (doc_count 0, flagged)", fmt.number(h["stitched_passages"]),
         _q("HEADLINE")),
        ("Low-entropy passages (excluded above)", fmt.number(h["low_entropy_passages"]), _q("HEADLINE")),
        ("Passages that only copy the sample's prompt (excluded above)", fmt.number(h.get("prompt_copy_passages")),
         _q("HEADLINE")),
        ("Passages first seen in this run (model family)", fmt.number(h["new_passages"]), _q("HEADLINE")),
        ("Distinct personal-data values tagged", fmt.value_with_interval(e["pii_found"]), _q("HEADLINE")),
        ("… of which found in the corpus", fmt.value_with_interval(e["pii_in_corpus"]), _q("HEADLINE")),
    ]
    baseline = data.tables["CHANCE_BASELINE"]
    if not baseline.empty:
        b = baseline.iloc[0]
        summary.append(("Chance baseline: share of held-out human text matched",
                        f"{fmt.number(b['share_extracted'], True)} ({fmt.number(b['share_extracted_low'], True)} – "
                        f"{fmt.number(b['share_extracted_high'], True)})", _q("CHANCE_BASELINE")))
    if rich:
        summary.append(("Estimated total distinct extractable passages (iChao2)",
                        f"{fmt.number(rich.estimate)} ({fmt.number(rich.low)} – {fmt.number(rich.high)})",
                        _q("PASSAGE_FREQUENCY_COUNTS")))
    parts += [
        "<h2 id='summary'>Summary</h2>",
        f"<p><b>{escape(scope_line(data))}</b></p>",
        f"<p>Intervals are {conf} intervals: shares and token counts by the {escape(PERCENTILE_METHOD)}; "
        f"distinct counts by {escape(SE_METHOD)} ({escape(main.bootstrap_method)}). Counts exclude low-entropy "
        "filler and passages that only copy the prompt. The result is a lower bound set by the effort spent; see Limitations.</p>",
        _rows(summary),
    ]

    # -- settings -------------------------------------------------------------------
    parts += ["<h2 id='settings'>Effort and settings</h2><ul>"]
    parts += [f"<li>{escape(line)}</li>" for line in settings_lines(data)]
    parts += ["</ul>", f"<p>By prompt strategy {_q('PROMPT_STRATEGY_BREAKDOWN')}:</p>",
              _table(data.tables["PROMPT_STRATEGY_BREAKDOWN"], [
                  ("prompt_strategy", "prompt strategy", ""), ("samples", "samples", "num"),
                  ("generated_tokens", "generated tokens", "num"), ("extracted_tokens", "extracted tokens", "num"),
                  ("share_extracted", "share extracted", "share"),
                  ("distinct_passages", "distinct passages", "num")])]

    # -- growth ---------------------------------------------------------------------
    parts += ["<h2 id='growth'>Growth with the budget</h2>",
              "<p>Distinct passages keep growing with the generation budget, so runs are compared at several "
              "budgets. Error bars: bootstrap intervals at each checkpoint; dashed: extrapolation to up to 3× the "
              "budget; dotted verticals: approximate crossing points (log-interpolated, display only). "
              f"{_q('GROWTH_CURVE')}</p>", _img(figures.get("growth_curve"), "growth curves")]
    growth = data.growth.copy()
    for rid, res in data.runs.items():
        ci = res.checkpoint_intervals
        for stat in ("distinct_passages", "distinct_rare_passages", "share_extracted"):
            sub = ci[ci["stat"] == stat]
            lookup = {int(b): (lo, hi) for b, lo, hi in zip(sub["budget_tokens"], sub["low"], sub["high"])}
            mask = growth["run_id"] == rid
            growth.loc[mask, f"{stat}_ci"] = [
                fmt.interval(_Est(*lookup[int(b)]), stat == "share_extracted", integer=True)
                if int(b) in lookup else "–"
                for b in growth.loc[mask, "budget_tokens"]]
    growth["label"] = [data.labels.get(r, r) for r in growth["run_id"]]
    parts.append(_table(growth, [
        ("label", "run", "label"), ("scope", "rows for", "label"), ("budget_tokens", "budget", "num"),
        ("generated_tokens", "generated tokens", "num"),
        ("n_samples", "samples", "num"), ("distinct_passages", "distinct passages", "num"),
        ("distinct_passages_ci", conf + " CI", "interval"), ("distinct_rare_passages", "rare passages", "num"),
        ("distinct_rare_passages_ci", conf + " CI", "interval"), ("share_extracted", "share extracted", "share"),
        ("share_extracted_ci", conf + " CI", "interval"), ("distinct_regions", "source regions", "num"),
        ("corpus_tokens_extracted", "corpus tokens extracted", "num"), ("pii_found", "PII values", "num"),
        ("pii_in_corpus", "PII in corpus", "num")]))
    parts.append("<p class='note'>Rows for a budget checkpoint hold the samples (in generation order) whose "
                 "cumulative tokens fit in the budget; the whole-run row holds every sample (the Summary's "
                 "figures).</p>")
    key = pd.DataFrame([{"label": data.labels.get(r, r), "run_id": r,
                         "model": res.info.get("model_name") or res.info.get("model"),
                         "model_path": res.info.get("model_path") or res.info.get("model"),
                         "started_at": fmt.timestamp(res.info.get("started_at"))} for r, res in data.runs.items()])
    parts += ["<p>Run key:</p>", _table(key, [("label", "label", "label"), ("run_id", "run id", ""),
                                              ("model", "model", ""), ("model_path", "model path", ""),
                                              ("started_at", "started", "")])]

    # -- comparison -------------------------------------------------------------------
    if data.comparisons:
        parts.append("<h2 id='comparison'>Comparison at equal budgets</h2>")
        parts.append("<p>Only budget checkpoints both runs have are compared (no interpolation in the tables). "
                     "Differences are first run minus second, with bootstrap intervals of the difference.</p>")
        for comp in data.comparisons:
            parts.append(f"<h3>{escape(data.labels.get(comp.run_id, comp.run_id))} vs "
                         f"{escape(data.labels.get(comp.other_run_id, comp.other_run_id))} "
                         f"{_q('COMPARE_AT_EQUAL_BUDGETS')}</h3><ul>")
            parts += [f"<li>{escape(s)}</li>" for s in comp.sentences]
            parts.append("</ul>")
            aligned = comp.aligned.copy()
            for metric in METRICS:
                aligned[f"{metric}_diff_ci"] = [
                    fmt.interval(_Est(lo, hi), metric == "share_extracted", signed=True, integer=True)
                    for lo, hi in zip(aligned[f"{metric}_diff_low"], aligned[f"{metric}_diff_high"])]
            cols = [("budget_tokens", "budget", "num")]
            for metric, label in METRICS.items():
                kind = "share" if metric == "share_extracted" else "num"
                cols += [(f"{metric}_a", f"{label}: {data.labels.get(comp.run_id, comp.run_id)}", kind),
                         (f"{metric}_b", f"{label}: {data.labels.get(comp.other_run_id, comp.other_run_id)}", kind),
                         (f"{metric}_diff_ci", f"difference {conf} CI", "interval")]
            parts.append(_table(aligned, cols))

    # -- extrapolation ------------------------------------------------------------------
    parts.append("<h2 id='extrapolation'>How much more would a larger budget find?</h2>")
    if rich:
        ext = main.extrapolation
        at2 = ext[ext["multiplier"] == 2]
        parts.append(
            f"<p>Method: {escape(rich.method)}. From how often passages repeat across samples "
            f"({rich.singletons:,} passages were emitted by exactly one sample, {rich.doubletons:,} by exactly "
            f"two, of {rich.observed:,} seen in {rich.samples:,} samples) the run's settings can emit an "
            f"estimated <b>{fmt.number(rich.estimate)}</b> distinct passages ({conf} interval "
            f"{fmt.number(rich.low)} – {fmt.number(rich.high)}); Chao2 alone gives {fmt.number(rich.chao2)}. "
            f"Good–Turing sample coverage is {rich.coverage:.1%}: that share of passage emissions in a further "
            "sample would be of passages already found.</p>")
        if not at2.empty:
            r2 = at2.iloc[0]
            parts.append(f"<p>Doubling the budget to about {fmt.number(r2['generated_tokens'])} tokens is expected "
                         f"to yield about {fmt.number(r2['expected'])} distinct passages "
                         f"({fmt.number(r2['low'])} – {fmt.number(r2['high'])}).</p>")
        rr = main.rare_richness
        if rr:
            parts.append(f"<p>Rare passages (1–{data.rare_doc_count} documents): {rr.observed:,} seen, estimated "
                         f"{fmt.number(rr.estimate)} in total ({fmt.number(rr.low)} – {fmt.number(rr.high)}).</p>")
        parts.append("<p class='note'>These estimators are themselves lower bounds when emission probabilities "
                     "are very uneven, and they say nothing about passages that only other prompts or "
                     f"sampling settings would elicit. {_q('PASSAGE_FREQUENCY_COUNTS')}</p>")
    else:
        parts.append("<p class='note'>No samples: nothing to extrapolate.</p>")

    # -- chance baseline --------------------------------------------------------------------
    parts.append(f"<h2 id='baseline'>Chance baseline {_q('CHANCE_BASELINE')}</h2>")
    if baseline.empty:
        parts.append("<p class='note'>Not computed for this run: set <code>report.holdout_source</code> to "
                     "held-out human text (never produced by the model, not in the corpus) to measure how "
                     "much text matches by chance (boilerplate).</p>")
    else:
        parts.append(f"<p>The same matcher over held-out human text gives the share of ≥n-token matches "
                     f"expected by chance, beside the model's share of "
                     f"{fmt.number(h['share_extracted'], True)}.</p>")
        parts.append(_table(baseline, [
            ("source", "held-out text", ""), ("sequences", "sequences", "num"),
            ("generated_tokens", "tokens", "num"), ("extracted_tokens", "matched tokens", "num"),
            ("share_extracted", "share matched", "share"), ("share_extracted_low", "low", "share"),
            ("share_extracted_high", "high", "share"), ("distinct_passages", "distinct passages", "num")]))

    # -- passages ----------------------------------------------------------------------------
    parts += [f"<h2 id='doc-count'>Document counts {_q('DOC_COUNT_HISTOGRAM')}</h2>",
              "<p>A passage found in one or two training documents is a privacy finding; one repeated in "
              "thousands of documents is usually boilerplate, a licence or widely copied text.</p>",
              _img(figures.get("doc_count_histogram"), "document-count histogram"),
              _table(data.tables["DOC_COUNT_HISTOGRAM"], [
                  ("doc_count_bucket", "documents containing the passage", ""), ("passages", "passages", "num"),
                  ("excluded_passages", "low-entropy or prompt copy (excluded)", "num"),
                  ("emitting_samples", "sample emissions", "num")])]
    passage_cols = [("passage_id", "id", "id"), ("n_tokens", "tokens", "num"), ("n_samples", "samples", "num"),
                    ("emission_rate", "emission rate per sample", "share"),
                    ("emission_rate_low", f"{conf} low (Wilson)", "share"),
                    ("emission_rate_high", "high", "share"), ("doc_count", "documents", "num"),
                    ("example_doc_ids", "example documents", ""), ("text", "text", "passage")]
    redaction = (" Passage text is redacted (<code>report.redact_passages</code>)." if data.redact_passages
                 else " Passage text is shown; set <code>report.redact_passages</code> to hide it.")
    if not data.redact_passages:
        redaction += (" Raw personal data is shown (<code>storage.allow_raw_pii</code>)." if data.raw_pii_shown
                      else " Every personal value the detectors find in it is masked, e.g. "
                           "<code>[card **** **** **** 1111]</code>.")
    parts += [f"<h2 id='rare'>Top rare passages {_q('TOP_RARE_PASSAGES')}</h2>",
              f"<p>Passages found in 1–{data.rare_doc_count} corpus documents, most emitted first.{redaction}</p>",
              _table(data.tables["TOP_RARE_PASSAGES"], passage_cols),
              f"<h2 id='emission'>Per-passage emission rate {_q('TOP_EMITTED_PASSAGES')}</h2>",
              "<p>Emission rate = samples that emitted the passage / samples in the run: an estimate of the "
              "probability that one response at the run's sampling settings reproduces it.</p>",
              _table(data.tables["TOP_EMITTED_PASSAGES"], passage_cols),
              f"<h2 id='stitched'>Stitched passages {_q('STITCHED_PASSAGES')}</h2>",
              "<p>Runs of covered tokens that no single document holds (windows of different documents joined): "
              "listed here, flagged, never counted as rare findings.</p>",
              _table(data.tables.get("STITCHED_PASSAGES"), passage_cols),
              f"<h2 id='documents'>Source documents {_q('SOURCE_DOCUMENTS')}</h2>",
              "<p>Overlapping passages of one document merged into regions: how much of each training document "
              "the run reproduced, by how many samples, and which personal-data types of that document the "
              "samples emitted (table <code>extracted_documents</code>; regions in "
              "<code>extracted_regions</code>).</p>",
              _table(data.tables.get("SOURCE_DOCUMENTS"), [
                  ("doc_id", "document", ""), ("source", "source", ""), ("regions", "regions", "num"),
                  ("rare_regions", "rare regions", "num"), ("tokens_extracted", "tokens extracted", "num"),
                  ("share_of_document", "share of document", "share"), ("n_passages", "passages", "num"),
                  ("n_samples", "samples", "num"), ("pii_types", "personal-data types", "")])]

    # -- PII ------------------------------------------------------------------------------
    parts += [f"<h2 id='pii'>Personal data by type {_q('PII_BY_TYPE')}</h2>",
              "<p>Per type: distinct values tagged in the samples, how many occur in the corpus, and in how "
              "many corpus documents, counted by searching the corpus for each value in all its surface forms "
              "(spacing, dashes, brackets, phone prefixes, case). Corpus documents are summed over values (a "
              "document holding two values counts twice). Redacted values only; raw values never appear in "
              "reports.</p>",
              f"<p class='note'>{escape(pii_caveat(data.tables['PII_BY_TYPE']))}</p>",
              _table(data.tables["PII_BY_TYPE"], [
                  ("entity_type", "entity type", ""), ("findings", "findings", "num"), ("samples", "samples", "num"),
                  ("distinct_values", "distinct values in samples", "num"), ("distinct_in_corpus", "in corpus", "num"),
                  ("corpus_value_documents", "corpus documents (summed over values)", "num"),
                  ("max_corpus_doc_count", "most documents for one value", "num"),
                  ("distinct_in_rare_documents", f"in 1–{data.rare_doc_count} documents", "num"),
                  ("values_not_counted", "values not counted (search limit)", "num"),
                  ("heldout_precision", "held-out precision", "share"), ("heldout_recall", "held-out recall", "share"),
                  ("examples_redacted", "examples (redacted)", "")])]

    # -- corpus-free route -------------------------------------------------------------------
    confirmed = data.tables["CONFIRMED_AMONG_CHECKED"]
    calibration = data.tables["RANK_CALIBRATION"]
    has_reviews = not confirmed.empty and int(confirmed.iloc[0]["checked"] or 0) > 0
    if has_reviews or not calibration.empty:
        parts.append(f"<h2 id='corpus-free'>Corpus-free route {_q('CONFIRMED_AMONG_CHECKED')}</h2>")
        if has_reviews:
            parts.append("<p>Candidates ranked by membership scores and checked by hand: the number confirmed "
                         "among those checked (Wilson interval).</p>")
            parts.append(_table(confirmed, [
                ("candidates", "candidates", "num"), ("checked", "checked", "num"),
                ("confirmed", "confirmed", "num"), ("not_found", "not found", "num"), ("unsure", "unsure", "num"),
                ("share_confirmed", "share confirmed", "share"), ("share_confirmed_low", f"{conf} low", "share"),
                ("share_confirmed_high", "high", "share")]))
        if not calibration.empty:
            parts.append(f"<p>Score calibration against verified extractions {_q('RANK_CALIBRATION')}:</p>")
            parts.append(_table(calibration, [
                ("score", "score", ""), ("k_requested", "k", "k"), ("precision_at_k", "precision at k", "share"),
                ("auc", "ROC AUC", ""), ("n_positive", "positives", "num"), ("n_ranked", "ranked", "num")]))

    # -- limitations and appendix ---------------------------------------------------------------
    from .probes import html_section as probe_section

    parts.append(probe_section(getattr(data, "probes", None), data.labels,
                               figures.get("probe_duplication_curve"), _img))
    parts += ["<h2 id='limitations'>Limitations</h2>"]
    parts += [f"<p>{escape(p)}</p>" for p in limitations(data)]
    parts.append("<h2 id='queries'>Queries</h2><p class='note'>Every figure above is the result of one of these "
                 "Spark SQL queries over the findings tables (views named like the tables); parameters as run.</p>")
    shown = dict.fromkeys(entry["query"] for entry in data.queries_run)
    for name in shown:
        params = [entry["params"] for entry in data.queries_run if entry["query"] == name]
        parts.append(f"<details id='q-{escape(name)}'><summary><b>{escape(name)}</b>: "
                     f"{escape(QUERIES[name].title)}</summary><pre>{escape(QUERIES[name].sql)}</pre>"
                     f"<p class='note'>parameters: {escape(json.dumps(params, default=str))}</p></details>")
    if data.missing_tables:
        parts.append(f"<p class='note'>Tables absent (shown as empty): {escape(', '.join(data.missing_tables))}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


class _Est:
    """Just the bounds, for fmt.interval."""

    def __init__(self, low, high):
        self.low, self.high = low, high
