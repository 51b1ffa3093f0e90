"""The report's known-prefix probe section: discoverable memorisation with intervals, the
duplication curve (rate against copies in the corpus) for the run and its control, and
the recovery share of the sampling route at each budget checkpoint.

Numbers come from the named queries ``PROBE_OUTCOMES`` and ``PROBE_CHECKPOINTS``; the rates
and intervals from ``probe.summary``.  Kept in its own module (figure, HTML, Markdown,
JSON) so the rest of the report is untouched when no run has probes.  Reads / writes no
tables itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import pandas as pd

from ..probe.kernels import class_labels
from ..probe.summary import duplication_curve, rates, recovery_share
from . import fmt
from .bootstrap import Estimate
from .plots import RUN_COLORS, legend_below


@dataclass
class ProbeFigures:
    approx_similarity: float
    class_order: list[str]
    overall: pd.DataFrame      # run_id, mode, probes, exact_rate/low/high, approx_rate/low/high
    by_class: pd.DataFrame     # + doc_count_class (the duplication curve)
    by_source: pd.DataFrame    # + source
    recovery: pd.DataFrame     # run_id, budget_tokens, reproduced, found, share, share_low, share_high


def collect(q, cfg, run_ids: list[str]) -> ProbeFigures | None:
    """Probe figures for the runs that have probes (None when none has)."""
    outcomes = q("PROBE_OUTCOMES", run_ids=list(run_ids))
    if outcomes.empty:
        return None
    rc, pc = cfg.report, cfg.probe
    kw = {"n_boot": rc.bootstrap_samples, "seed": rc.bootstrap_seed, "confidence": rc.confidence}
    frame = outcomes.assign(all="all")
    checkpoints = q("PROBE_CHECKPOINTS", run_ids=list(run_ids))
    points = {r: sorted(int(b) for b in checkpoints[checkpoints["run_id"] == r]["budget_tokens"])
              for r in outcomes["run_id"].unique()}
    return ProbeFigures(
        approx_similarity=pc.approx_similarity,
        class_order=class_labels(pc.class_edges),
        overall=rates(frame, [], pc.approx_similarity, **kw),
        by_class=duplication_curve(frame, class_labels(pc.class_edges), pc.approx_similarity, **kw),
        by_source=rates(frame, ["source"], pc.approx_similarity, **kw),
        recovery=recovery_share(outcomes, points, **kw),
    )


def duplication_curve_png(figs: ProbeFigures, labels: dict[str, str]) -> bytes | None:
    """Greedy exact and approximate rate by document-count class, one line per run, with intervals."""
    import io

    from matplotlib.figure import Figure

    curve = figs.by_class[figs.by_class["mode"] == "greedy"]
    if curve.empty:
        return None
    fig = Figure(figsize=(9, 3.4), dpi=110, layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    xs = {c: i for i, c in enumerate(figs.class_order)}
    for ax, (stat, title) in zip(axes, (("exact", "exact continuation"),
                                        ("approx", f"edit similarity ≥ {figs.approx_similarity:g}"))):
        for i, (run_id, rows) in enumerate(curve.groupby("run_id", sort=False)):
            x = [xs[c] for c in rows["doc_count_class"]]
            y = rows[f"{stat}_rate"].to_numpy(float)
            err = [y - rows[f"{stat}_low"].to_numpy(float), rows[f"{stat}_high"].to_numpy(float) - y]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=labels.get(run_id, run_id),
                        color=RUN_COLORS[i % len(RUN_COLORS)])
        ax.set_xticks(range(len(figs.class_order)), figs.class_order)
        ax.set_xlabel("documents holding the continuation")
        ax.set_title(f"greedy: {title}", fontsize=10)
        ax.set_ylim(-0.02, 1.02)
    axes[0].set_ylabel("share of probes reproduced")
    # Below the panels, never over the data (the control's line sits at 0, where a legend inside would go).
    legend_below(fig, *axes[0].get_legend_handles_labels())
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _share(value, low, high) -> str:
    return fmt.value_with_interval(Estimate(value, low, high), share=True)


def _rate(row, stat: str) -> str:
    return _share(row[f"{stat}_rate"], row[f"{stat}_low"], row[f"{stat}_high"])


def html_section(figs: ProbeFigures | None, labels: dict[str, str], png: bytes | None, img) -> str:
    """The HTML section (``img`` renders PNG bytes as an <img>)."""
    if figs is None:
        return ""
    q = ('<span class="q">query: <a href="#q-PROBE_OUTCOMES">PROBE_OUTCOMES</a>, '
         '<a href="#q-PROBE_CHECKPOINTS">PROBE_CHECKPOINTS</a></span>')
    parts = [f"<h2 id='probes'>Known-prefix probes (discoverable memorisation) {q}</h2>",
             "<p class='note'>Stratified random corpus positions (by source and by how many documents hold the "
             "continuation); the true opening tokens are the prompt, the true next tokens the target. "
             f"Approximate: token edit similarity ≥ {figs.approx_similarity:g}. Rates weight each probe by its "
             "stratum's size; intervals are percentile bootstraps over probes.</p>"]

    def table(frame: pd.DataFrame, key: str | None) -> str:
        head = "<tr><th>run</th><th>mode</th>" + (f"<th>{escape(key)}</th>" if key else "") + \
               "<th>probes</th><th>exact</th><th>approximate</th></tr>"
        body = "".join(
            f"<tr><td>{escape(labels.get(r['run_id'], r['run_id']))}</td><td>{escape(r['mode'])}</td>"
            + (f"<td>{escape(str(r[key]))}</td>" if key else "")
            + f"<td class='num'>{int(r['probes'])}</td><td class='num'>{escape(_rate(r, 'exact'))}</td>"
              f"<td class='num'>{escape(_rate(r, 'approx'))}</td></tr>"
            for r in frame.to_dict("records"))
        return f"<table>{head}{body}</table>"

    parts += ["<h3>Overall</h3>", table(figs.overall, None),
              "<h3>Duplication curve: rate against copies in the corpus</h3>", img(png, "duplication curve"),
              table(figs.by_class, "doc_count_class"),
              "<h3>By source</h3>", table(figs.by_source, "source"),
              "<h3>Recovery share of the sampling route</h3>",
              "<p class='note'>Of the probed passages the model reproduces exactly from their opening words "
              "(greedy), the share that sampling with the deployed settings had emitted by each budget "
              "checkpoint. A low share means a low rate under ordinary prompts is weak evidence.</p>"]
    rec = figs.recovery
    body = "".join(
        f"<tr><td>{escape(labels.get(r['run_id'], r['run_id']))}</td><td class='num'>{fmt.number(r['budget_tokens'])}"
        f"</td><td class='num'>{r['reproduced']}</td><td class='num'>{r['found']}</td>"
        f"<td class='num'>{escape(_share(r['share'], r['share_low'], r['share_high']))}</td></tr>"
        for r in rec.to_dict("records"))
    parts.append("<table><tr><th>run</th><th>budget (tokens)</th><th>reproduced given prefix</th>"
                 f"<th>found by sampling</th><th>recovery share</th></tr>{body}</table>")
    return "".join(parts)


def markdown_lines(figs: ProbeFigures | None, labels: dict[str, str]) -> list[str]:
    if figs is None:
        return []
    lines = ["### Known-prefix probes (discoverable memorisation)", "",
             "| Run | Mode | Class | Probes | Exact | Approximate |", "| --- | --- | --- | --: | --- | --- |"]
    for frame, key in ((figs.overall, None), (figs.by_class, "doc_count_class")):
        for r in frame.to_dict("records"):
            lines.append(f"| {labels.get(r['run_id'], r['run_id'])} | {r['mode']} | {r[key] if key else 'all'} | "
                         f"{int(r['probes'])} | {_rate(r, 'exact')} | {_rate(r, 'approx')} |")
    lines += ["", "| Run | Budget (tokens) | Reproduced given prefix | Found by sampling | Recovery share |",
              "| --- | --: | --: | --: | --- |"]
    for r in figs.recovery.to_dict("records"):
        lines.append(f"| {labels.get(r['run_id'], r['run_id'])} | {r['budget_tokens']} | {r['reproduced']} | "
                     f"{r['found']} | {_share(r['share'], r['share_low'], r['share_high'])} |")
    return [*lines, ""]


def to_json(figs: ProbeFigures | None) -> dict | None:
    if figs is None:
        return None
    return {"approx_similarity": figs.approx_similarity, "class_order": figs.class_order,
            **{name: getattr(figs, name).to_dict("records") for name in ("overall", "by_class", "by_source",
                                                                         "recovery")}}
