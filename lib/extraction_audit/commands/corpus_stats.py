"""``extraction-audit corpus-stats``: index metadata and size (rows, bytes, bytes per token)."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("corpus-stats", help="print the corpus index's metadata and size")
    add_config_argument(p)
    p.add_argument("--count-ngrams", action="store_true",
                   help="also count the corpus's distinct n-grams (a full pass over its tokens)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import load_cli_config
    from ..index import corpus_stats
    from ..spark import get_spark

    cfg = load_cli_config(args)
    print(json.dumps(corpus_stats(get_spark(cfg), cfg, count_ngrams=args.count_ngrams), indent=2, default=str))
    return 0
