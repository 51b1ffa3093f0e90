"""``extraction-audit index``: tokenize the corpus and add its n-grams to the index."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("index", help="index (or incrementally extend) the corpus n-gram tables")
    add_config_argument(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import load_cli_config
    from ..index import build_index
    from ..spark import get_spark

    cfg = load_cli_config(args)
    stats = build_index(get_spark(cfg), cfg)
    print(json.dumps(stats, indent=2, default=str))
    return 0
