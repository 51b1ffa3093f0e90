"""Short Markdown summary for a model card: effort, settings, counts with intervals,
comparison, chance baseline, extrapolation and limitations.  Renders a
``build.ReportData``; computes nothing."""

from __future__ import annotations

from . import fmt
from .text import limitations, pii_caveat, scope_line, settings_lines


def render(data, figure_files: dict[str, str] | None = None) -> str:
    main = data.main
    e, h = main.estimates, main.headline
    conf = f"{data.confidence:.0%}"
    lines = [
        f"## Training-data extraction audit: {main.info.get('model_name') or main.info.get('model')}",
        "",
        f"Run `{data.run_id}`, corpus `{main.info.get('corpus_id')}`, report of {data.generated_at}.",
        "",
        "### Effort and settings",
        "",
        *[f"- {line}" for line in settings_lines(data)],
        "",
        "### Results",
        "",
        scope_line(data),
        "",
        f"| Measure | Value ({conf} interval) |",
        "| --- | --- |",
        f"| Share of generated tokens extracted | {fmt.value_with_interval(e['share_extracted'], True)} |",
        f"| Distinct extracted passages | {fmt.value_with_interval(e['distinct_passages'])} |",
        f"| Distinct rare passages (1–{data.rare_doc_count} documents) | "
        f"{fmt.value_with_interval(e['distinct_rare_passages'])} |",
        f"| Distinct source regions (overlapping passages of one document merged) | "
        f"{fmt.number(h.get('distinct_regions'))} |",
        f"| Source regions holding a rare passage | {fmt.number(h.get('distinct_rare_regions'))} |",
        f"| Corpus tokens extracted (union of matched corpus spans) | "
        f"{fmt.number(h.get('corpus_tokens_extracted'))} |",
        f"| Passages stitched across documents (flagged, not rare) | {fmt.number(h['stitched_passages'])} |",
        f"| Distinct personal-data values tagged / in corpus | {fmt.value_with_interval(e['pii_found'])} / "
        f"{fmt.value_with_interval(e['pii_in_corpus'])} |",
    ]
    baseline = data.tables["CHANCE_BASELINE"]
    if not baseline.empty:
        b = baseline.iloc[0]
        lines.append(f"| Chance baseline: share of held-out human text matched | "
                     f"{fmt.number(b['share_extracted'], True)} ({fmt.number(b['share_extracted_low'], True)} – "
                     f"{fmt.number(b['share_extracted_high'], True)}) |")
    rich = main.richness
    if rich:
        lines.append(f"| Estimated total distinct extractable passages (iChao2) | {fmt.number(rich.estimate)} "
                     f"({fmt.number(rich.low)} – {fmt.number(rich.high)}) |")
    confirmed = data.tables["CONFIRMED_AMONG_CHECKED"]
    if not confirmed.empty and int(confirmed.iloc[0]["checked"] or 0) > 0:
        c = confirmed.iloc[0]
        lines.append(f"| Confirmed among hand-checked candidates | {fmt.number(c['confirmed'])} of "
                     f"{fmt.number(c['checked'])} ({fmt.number(c['share_confirmed_low'], True)} – "
                     f"{fmt.number(c['share_confirmed_high'], True)}) |")
    pii = data.tables.get("PII_BY_TYPE")
    if pii is not None and len(pii):
        lines += ["", "Personal data by type (values found in samples; in the corpus, counted by value over all "
                  "surface forms):", "",
                  "| type | values in samples | in corpus | corpus documents (summed over values) | "
                  "held-out precision |", "| --- | --: | --: | --: | --: |"]
        for row in pii.to_dict("records"):
            lines.append(f"| {row['entity_type']} | {fmt.number(row.get('distinct_values'))} | "
                         f"{fmt.number(row.get('distinct_in_corpus'))} | "
                         f"{fmt.number(row.get('corpus_value_documents'))} | "
                         f"{fmt.number(row.get('heldout_precision'), share=True)} |")
        lines += ["", pii_caveat(pii)]
    lines += ["", f"Counts exclude low-entropy filler. Intervals: {main.bootstrap_method}; the extrapolation uses "
              f"{rich.method if rich else 'no method (no samples)'}.", ""]
    if figure_files and "growth_curve" in figure_files:
        lines += [f"![Growth curves]({figure_files['growth_curve']})", ""]
    for comp in data.comparisons:
        lines += [f"### {data.labels.get(comp.run_id, comp.run_id)} vs "
                  f"{data.labels.get(comp.other_run_id, comp.other_run_id)} at equal budgets", ""]
        lines += [f"- {s}" for s in comp.sentences]
        lines.append("")
    from .probes import markdown_lines as probe_lines

    lines += probe_lines(getattr(data, "probes", None), data.labels)
    lines += ["### Limitations", "", " ".join(limitations(data)), ""]
    return "\n".join(lines)
