"""``extraction-audit pii``: tag personal data in a run's samples and look it up in the corpus."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("pii", help="tag personal data in a run's samples, look it up in the corpus, "
                                   "write pii_findings (raw values only if storage.allow_raw_pii)")
    add_config_argument(p)
    p.add_argument("--run-id", help="run whose samples to tag (required unless --index-only)")
    p.add_argument("--control-run-id", default=None,
                   help="control run (e.g. the base model): values it also emitted get in_control")
    p.add_argument("--index-only", action="store_true",
                   help="only bring pii_corpus_index up to date with corpus_documents")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import load_cli_config
    from ..errors import UserFacingError
    from ..spark import get_spark

    cfg = load_cli_config(args)
    if not args.index_only and not args.run_id:
        raise UserFacingError("--run-id is required (or pass --index-only)")
    spark = get_spark(cfg)
    if args.index_only:
        from ..pii.corpus_index import build_pii_corpus_index

        stats = build_pii_corpus_index(spark, cfg)
    else:
        from ..runner import Runner

        stats = Runner(spark, cfg).run_step(args.run_id, "pii", {"control_run_id": args.control_run_id})
    print(json.dumps(stats, indent=2, default=str))
    return 0
