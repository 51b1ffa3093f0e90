"""Per-type precision and recall of the default detectors on one split of the eval set.

    python tests/pii_eval/score.py --split dev          # tune on this one
    python tests/pii_eval/score.py --split heldout      # report this one; never tune on it
    python tests/pii_eval/score.py --split dev --errors # list false positives and misses

Matching rule: ``extraction_audit.pii.evaluation`` (same type and overlapping span).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from extraction_audit.config import parse_config
from extraction_audit.pii.detectors import DetectionSettings, DetectorSet
from extraction_audit.pii.evaluation import detector_set_scorer, format_table, load_snippets, score

HERE = Path(__file__).resolve().parent


def default_detector_set() -> DetectorSet:
    """The shipped defaults (all detectors, GB + US phones, builtin names); the key is irrelevant."""
    return DetectorSet(DetectionSettings.from_config(parse_config({"pii": {"hmac_key": "eval"}})))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=["dev", "heldout"], default="dev")
    parser.add_argument("--errors", action="store_true", help="print every false positive and miss")
    args = parser.parse_args(argv)
    snippets = load_snippets(HERE / f"{args.split}.jsonl")
    errors: list[dict] = []
    scores = score(snippets, detector_set_scorer(default_detector_set()), errors)
    print(f"{args.split}: {len(snippets)} snippets")
    print(format_table(scores))
    if args.errors:
        for e in sorted(errors, key=lambda e: (e["type"], e["kind"])):
            print(f"{e['kind']:<14} {e['type']:<16} {e['id']}  {e['surface']!r}  in  {e['context']!r}")


if __name__ == "__main__":
    main()
