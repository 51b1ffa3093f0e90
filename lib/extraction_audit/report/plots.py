"""Report figures as PNG bytes (matplotlib, Agg canvas; no pyplot global state).

Every plotted value is a query result passed in by ``build``; the only thing computed
here is display geometry (the log x axis draws straight segments between checkpoints).
Reads / writes no tables.
"""

from __future__ import annotations

import io

import pandas as pd

from .curves import METRICS

_PANELS = ("distinct_passages", "distinct_regions", "distinct_rare_passages", "share_extracted")
_TITLES = {**METRICS, "distinct_regions": "distinct source regions", "share_extracted": "share extracted"}
RUN_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def legend_below(fig, handles, names) -> None:
    """One legend under all panels (a constrained-layout figure), never over the data."""
    fig.legend(handles, names, loc="outside lower center", ncols=min(3, max(1, len(names))), fontsize=8,
               frameon=False)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def growth_curve_png(growth: pd.DataFrame, labels: dict[str, str], intervals: dict[str, pd.DataFrame] | None = None,
                     extrapolation: dict[str, pd.DataFrame] | None = None, baseline_share: float | None = None,
                     crossings: list[dict] | None = None) -> bytes | None:
    """Four panels against generated tokens (log x): distinct passages, distinct source
    regions, distinct rare passages, share extracted; one line per run, labelled by
    ``labels`` (short: model and date) in one legend below the panels, never over the data.

    ``intervals[run]``: rows (budget_tokens, stat, low, high) drawn as error bars;
    ``extrapolation[run]``: rows (generated_tokens, expected, low, high) drawn dashed;
    ``baseline_share``: the chance baseline as a horizontal line on the share panel;
    ``crossings``: dicts with metric and approx_budget, marked with a vertical dotted line."""
    if growth.empty:
        return None
    fig = _figure(13, 4.2)
    axes = fig.subplots(1, len(_PANELS))
    for i, (run_id, rows) in enumerate(growth.groupby("run_id", sort=False)):
        color = RUN_COLORS[i % len(RUN_COLORS)]
        rows = rows.sort_values("budget_tokens")
        x = rows["generated_tokens"].clip(lower=1)
        ci = (intervals or {}).get(run_id)
        for ax, metric in zip(axes, _PANELS):
            if metric not in rows:
                continue
            y = rows[metric].astype(float)
            scale = 100.0 if metric == "share_extracted" else 1.0
            ax.plot(x, y * scale, marker="o", color=color, label=labels.get(run_id, run_id))
            if ci is not None and not ci.empty:
                sub = ci[ci["stat"] == metric].merge(rows[["budget_tokens", "generated_tokens", metric]],
                                                     on="budget_tokens")
                if not sub.empty:
                    ax.errorbar(sub["generated_tokens"].clip(lower=1), sub[metric] * scale,
                                yerr=[(sub[metric] - sub["low"]).clip(lower=0) * scale,
                                      (sub["high"] - sub[metric]).clip(lower=0) * scale],
                                fmt="none", ecolor=color, alpha=0.6, capsize=3)
        ext = (extrapolation or {}).get(run_id)
        if ext is not None and not ext.empty:
            ax = axes[0]
            ax.plot(ext["generated_tokens"], ext["expected"], linestyle="--", color=color, alpha=0.8,
                    label=f"{labels.get(run_id, run_id)}: extrapolated")
            ax.fill_between(ext["generated_tokens"], ext["low"], ext["high"], color=color, alpha=0.12)
    if baseline_share is not None:
        axes[-1].axhline(baseline_share * 100, color="grey", linestyle=":", label="chance baseline")
    for c in crossings or []:
        if c.get("metric") in _PANELS:
            axes[_PANELS.index(c["metric"])].axvline(c["approx_budget"], color="black", linestyle=":", alpha=0.5)
    for ax, metric in zip(axes, _PANELS):
        ax.set_xscale("log")
        ax.set_xlabel("generated tokens (log scale)", fontsize=8)
        ax.set_title(_TITLES[metric] + (" (%)" if metric == "share_extracted" else ""), fontsize=10)
        top = ax.get_ylim()[1]
        ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)  # headroom above the highest point
        ax.grid(True, which="both", alpha=0.3)
    handles, names = [], []
    for ax in (axes[0], axes[-1]):
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    legend_below(fig, handles, names)
    return _png(fig)


def doc_count_histogram_png(histogram: pd.DataFrame) -> bytes | None:
    """Passages by document-count bucket: 1-2 documents (privacy findings) in red,
    0 (stitched across documents) in orange, more documents (boilerplate) in grey."""
    if histogram.empty or histogram["passages"].sum() + histogram["excluded_passages"].sum() == 0:
        return None
    fig = _figure(9, 3.4)
    ax = fig.subplots()
    order = histogram.sort_values("bucket_order")
    colors = ["#ff7f0e" if b == 0 else "#d62728" if b in (1, 2) else "#7f7f7f" for b in order["bucket_order"]]
    from matplotlib.patches import Patch

    ax.bar(order["doc_count_bucket"], order["passages"], color=colors)
    bars = ax.bar(order["doc_count_bucket"], order["excluded_passages"], bottom=order["passages"], color="#dddddd")
    totals = order["passages"] + order["excluded_passages"]
    ax.bar_label(bars, labels=[f"{int(t):,}" if t else "" for t in totals], fontsize=8, padding=2)
    ax.set_ylim(0, max(1.0, float(totals.max())) * 1.18)  # headroom: no bar or label touches the frame
    ax.set_xlabel("corpus documents containing the passage")
    ax.set_ylabel("distinct passages")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no 2.5-passage ticks
    ax.set_title("Document count: 1-2 = privacy findings, many = boilerplate", fontsize=10)
    fig.legend(handles=[Patch(color="#d62728", label="rare: privacy findings"),
                        Patch(color="#7f7f7f", label="repeated (boilerplate, licences, news)"),
                        Patch(color="#ff7f0e", label="stitched across documents (flagged, not rare)"),
                        Patch(color="#dddddd", label="low-entropy filler or prompt copy (excluded)")],
               loc="outside right upper", fontsize=7, frameon=False)
    return _png(fig)
