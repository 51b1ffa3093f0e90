"""``extraction-audit probe``: known-prefix probes of a run's model (discoverable memorisation)."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("probe", help="prompt the model with the true opening words of sampled corpus positions "
                                     "and record how often it reproduces the continuation (after match)")
    add_config_argument(p)
    p.add_argument("--run-id", required=True)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import run_stage

    print(json.dumps(run_stage(args, "probe"), indent=2, default=str))
    return 0
