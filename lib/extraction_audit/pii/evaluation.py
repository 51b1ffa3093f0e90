"""Precision and recall of the detectors on a labelled set of snippets (``tests/pii_eval``).

A labelled snippet is ``{"id", "genre", "text", "spans": [{"type", "start", "end", "value"}]}``.
Matching is by type and overlap, counted on both sides:

- a *detection* is a true positive when a gold span of the same type overlaps it (shares at
  least one character), else a false positive; precision = true-positive detections / detections;
- a *gold span* is found when a detection of the same type overlaps it, else it is missed;
  recall = found gold spans / gold spans.

Overlap rather than exact spans because a finding's value is its canonical form: "Mrs Evie
Hall" found as "Evie Hall", or "40-47-84, account 70872490" found from the sort code on,
identify the same person or account.  Types a detector set reports but the labels do not
cover (``pii.custom``) are left out.

Reads and writes no tables.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

ENTITY_TYPES = ("email", "phone", "card", "iban", "uk_bank_account", "us_ssn", "nhs_number", "uk_nino",
                "date_of_birth", "ip_address", "person_name")


@dataclass
class TypeScore:
    detections: int = 0
    true_detections: int = 0
    gold: int = 0
    found: int = 0

    @property
    def precision(self) -> float:
        return self.true_detections / self.detections if self.detections else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.gold if self.gold else 1.0


def load_snippets(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def score(snippets: Iterable[dict], detect: Callable[[str], Iterable[tuple[str, int, int]]],
          errors: list[dict] | None = None) -> dict[str, TypeScore]:
    """Per-type counts; ``detect(text)`` yields ``(entity_type, start, end)``.  When ``errors``
    is a list, each false positive and miss is appended to it (for tuning on dev)."""
    scores = {t: TypeScore() for t in ENTITY_TYPES}

    def overlaps(span, others) -> bool:
        t, s, e = span
        return any(ot == t and s < oe and os_ < e for ot, os_, oe in others)

    def note(kind: str, snippet: dict, span) -> None:
        if errors is not None:
            t, s, e = span
            text = snippet["text"]
            errors.append({"kind": kind, "type": t, "id": snippet["id"], "surface": text[s:e],
                           "context": text[max(0, s - 40):e + 20]})

    for snippet in snippets:
        gold = [(s["type"], s["start"], s["end"]) for s in snippet["spans"]]
        found = [d for d in detect(snippet["text"]) if d[0] in scores]
        for span in found:
            hit = overlaps(span, gold)
            scores[span[0]].detections += 1
            scores[span[0]].true_detections += hit
            if not hit:
                note("false_positive", snippet, span)
        for span in gold:
            hit = overlaps(span, found)
            scores[span[0]].gold += 1
            scores[span[0]].found += hit
            if not hit:
                note("missed", snippet, span)
    return scores


def detector_set_scorer(detector_set) -> Callable[[str], list[tuple[str, int, int]]]:
    return lambda text: [(d.entity_type, d.start, d.end) for d in detector_set.detect(text)]


def format_table(scores: dict[str, TypeScore]) -> str:
    lines = [f"| {'type':<16} | {'gold':>4} | {'found':>5} | {'recall':>6} | {'detections':>10} | {'precision':>9} |",
             f"|{'-' * 18}|{'-' * 5}:|{'-' * 6}:|{'-' * 7}:|{'-' * 11}:|{'-' * 10}:|"]
    for t, s in scores.items():
        lines.append(f"| {t:<16} | {s.gold:>4} | {s.found:>5} | {s.recall:>6.3f} | {s.detections:>10} | "
                     f"{s.precision:>9.3f} |")
    return "\n".join(lines)


#: Held-out split of ``tests/pii_eval`` scored with the shipped default detectors:
#: type -> (gold spans, found, detections, true detections).  Reports quote these as the
#: precision caveat of each type's counts; ``tests/test_pii_corpus_counts.py`` checks they
#: equal a fresh scoring, so a detector change that moves them must update them.
HELDOUT_COUNTS: dict[str, tuple[int, int, int, int]] = {
    "email": (77, 77, 77, 77), "phone": (103, 103, 103, 103), "card": (75, 75, 75, 75),
    "iban": (70, 70, 70, 70), "uk_bank_account": (76, 76, 76, 76), "us_ssn": (85, 85, 85, 85),
    "nhs_number": (95, 95, 95, 95), "uk_nino": (69, 69, 69, 69), "date_of_birth": (75, 75, 76, 75),
    "ip_address": (72, 72, 72, 72), "person_name": (443, 442, 435, 435),
}
HELDOUT_SNIPPETS = 496


def heldout_figures() -> dict[str, dict[str, float]]:
    """type -> held-out precision, recall and gold span count (for report caveats)."""
    out = {}
    for t, (gold, found, detections, true_detections) in HELDOUT_COUNTS.items():
        s = TypeScore(detections, true_detections, gold, found)
        out[t] = {"heldout_precision": s.precision, "heldout_recall": s.recall, "heldout_gold": gold}
    return out
