"""``extraction-audit index``: tokenize the corpus and add its n-grams to the index."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("index", help="index (or incrementally extend) the corpus n-gram tables")
    add_config_argument(p)
    p.add_argument("--run-id", default=None,
                   help="record the build as this run's index step (as the nightly bundle does)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import load_cli_config, run_stage
    from ..runner import Runner
    from ..spark import get_spark

    if args.run_id:
        stats = run_stage(args, "index")
    else:
        cfg = load_cli_config(args)
        stats = Runner(get_spark(cfg), cfg).run_unrecorded("index")
    print(json.dumps(stats, indent=2, default=str))
    return 0
