"""``extraction-audit audit``: every configured step under one run id; re-run to finish a crashed run."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("audit", help="run (or resume) a complete audit: index, generate, match, pii, rank, report")
    add_config_argument(p)
    p.add_argument("--run-id", default=None, help="resume this run (default: a new run id)")
    p.add_argument("--control-run-id", default=None, help="run of the control (e.g. base) model")
    p.add_argument("--compare", action="append", default=[], metavar="RUN_ID",
                   help="runs to compare with in the report")
    p.add_argument("--steps", default=None,
                   help="comma-separated subset of steps (default: config steps); on an existing run these "
                        "are added to the steps it must finish, never put in their place")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import load_cli_config
    from ..runner import Runner
    from ..spark import get_spark

    cfg = load_cli_config(args)
    steps = [s.strip() for s in args.steps.split(",")] if args.steps else None
    result = Runner(get_spark(cfg), cfg).audit(
        args.run_id, steps, {"control_run_id": args.control_run_id, "compare_run_ids": tuple(args.compare)})
    print(json.dumps(result, indent=2, default=str))
    return 0
