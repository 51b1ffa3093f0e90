"""``extraction-audit purge``: delete a run's samples and findings; with --vacuum remove the
data files too, after ``storage.retention_hours`` (see ``pii/retention.py``)."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("purge", help="delete every row of a run (samples, findings, metrics, run record); "
                                     "--vacuum also removes the data files older than storage.retention_hours")
    add_config_argument(p)
    p.add_argument("--run-id", required=True, help="run to delete")
    p.add_argument("--vacuum", action="store_true",
                   help="VACUUM the touched tables with storage.retention_hours (0 removes the files now)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import load_cli_config
    from ..pii.retention import purge_run
    from ..spark import get_spark

    cfg = load_cli_config(args)
    stats = purge_run(get_spark(cfg), cfg, args.run_id, vacuum=args.vacuum)
    print(json.dumps(stats, indent=2, default=str))
    return 0
