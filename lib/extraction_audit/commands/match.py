"""``extraction-audit match``: verbatim matching of a run's samples against the corpus index."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("match", help="match a run's samples against the corpus index")
    add_config_argument(p)
    p.add_argument("--run-id", required=True)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import run_stage

    print(json.dumps(run_stage(args, "match"), indent=2, default=str))
    return 0
