"""Growth curves and run comparison at equal budgets.

A single rate at one budget misleads: one model can leak more than another at a small
budget and less in total.  Runs are therefore compared only at budget checkpoints both
runs have (``queries.COMPARE_AT_EQUAL_BUDGETS``: an inner join on ``budget_tokens``, no
interpolation), and every change of leader between consecutive common checkpoints is
called out.  Where the change happens *between* two checkpoints, an approximate budget
is given by linear interpolation of the difference on log(budget): a display aid for the
chart and the sentence, never a number in a table.

Reads / writes no tables (its inputs are query results).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import pandas as pd

#: metric column -> how the report names it
METRICS = {
    "distinct_passages": "distinct passages",
    "distinct_rare_passages": "distinct rare passages",
    "share_extracted": "share of generated tokens extracted",
}


@dataclass(frozen=True)
class Crossing:
    """The lead between two runs changes between two consecutive common checkpoints."""

    metric: str
    budget_before: int
    budget_after: int
    leader_before: str
    leader_after: str
    value_a_before: float
    value_b_before: float
    value_a_after: float
    value_b_after: float
    approx_budget: float  # log-interpolated, for display only

    def to_dict(self) -> dict:
        return asdict(self)


def log_interpolated_crossing(budget_1: float, diff_1: float, budget_2: float, diff_2: float) -> float:
    """Budget where a difference linear in log(budget) between two points reaches zero."""
    if diff_1 == diff_2:
        return float(budget_1)
    t = diff_1 / (diff_1 - diff_2)
    t = min(max(t, 0.0), 1.0)
    return float(math.exp(math.log(budget_1) + t * (math.log(budget_2) - math.log(budget_1))))


def find_crossings(aligned: pd.DataFrame, run_a: str, run_b: str, metric: str) -> list[Crossing]:
    """Changes of leader for ``metric`` in a ``COMPARE_AT_EQUAL_BUDGETS`` result.

    Ties are not a lead: the lead changes when the sign of ``a - b`` differs from the
    last non-zero sign; the approximate budget is then the first tied checkpoint if
    there is one, else the log-interpolated zero between the two checkpoints."""
    rows = aligned.sort_values("budget_tokens")
    a_col, b_col = f"{metric}_a", f"{metric}_b"
    crossings: list[Crossing] = []
    last = None  # (budget, diff, a, b) of the last checkpoint with a leader
    first_tie = None
    for budget, a, b in zip(rows["budget_tokens"], rows[a_col], rows[b_col]):
        if pd.isna(a) or pd.isna(b):
            continue
        diff = float(a) - float(b)
        if diff == 0:
            if last is not None and first_tie is None:
                first_tie = int(budget)
            continue
        if last is not None and (diff > 0) != (last[1] > 0):
            approx = float(first_tie) if first_tie is not None else log_interpolated_crossing(
                last[0], last[1], float(budget), diff)
            crossings.append(Crossing(
                metric, int(last[0]), int(budget),
                run_a if last[1] > 0 else run_b, run_a if diff > 0 else run_b,
                float(last[2]), float(last[3]), float(a), float(b), approx,
            ))
        last = (float(budget), diff, a, b)
        first_tie = None
    return crossings


def _fmt(metric: str, value: float) -> str:
    return f"{value:.2%}" if metric == "share_extracted" else f"{value:,.0f}"


def describe_comparison(aligned: pd.DataFrame, run_a: str, run_b: str, labels: dict[str, str] | None = None
                        ) -> list[str]:
    """One sentence per metric: who leads at each end, and every crossing point."""
    labels = labels or {}
    name_a, name_b = labels.get(run_a, run_a), labels.get(run_b, run_b)
    if aligned.empty:
        return [f"{name_a} and {name_b} have no budget checkpoint in common; compare their curves "
                "on the chart only, or re-run one of them with the other's budget."]
    rows = aligned.sort_values("budget_tokens")
    sentences = []
    for metric, label in METRICS.items():
        crossings = find_crossings(rows, run_a, run_b, metric)
        first, last = rows.iloc[0], rows.iloc[-1]
        a0, b0, a1, b1 = first[f"{metric}_a"], first[f"{metric}_b"], last[f"{metric}_a"], last[f"{metric}_b"]
        if any(pd.isna(v) for v in (a0, b0, a1, b1)):
            continue
        text = (f"{label.capitalize()}: at {int(first['budget_tokens']):,} tokens {name_a} {_fmt(metric, a0)} "
                f"vs {name_b} {_fmt(metric, b0)}; at {int(last['budget_tokens']):,} tokens "
                f"{_fmt(metric, a1)} vs {_fmt(metric, b1)}.")
        if crossings:
            for c in crossings:
                text += (f" The lead changes from {labels.get(c.leader_before, c.leader_before)} to "
                         f"{labels.get(c.leader_after, c.leader_after)} between {c.budget_before:,} and "
                         f"{c.budget_after:,} tokens (about {c.approx_budget:,.0f} by log interpolation).")
        elif len(rows) > 1:
            signs = {math.copysign(1, float(a) - float(b)) for a, b in zip(rows[f"{metric}_a"], rows[f"{metric}_b"])
                     if not pd.isna(a) and not pd.isna(b) and float(a) != float(b)}
            if len(signs) == 1:
                leader = name_a if signs.pop() > 0 else name_b
                text += f" {leader} leads at every common budget; no crossing."
        sentences.append(text)
    return sentences
