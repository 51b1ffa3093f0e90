"""``extraction-audit report``: HTML report + Markdown model-card summary for a run,
compared with other runs at equal budgets."""

from __future__ import annotations


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("report", help="write a self-contained HTML report and a Markdown model-card summary "
                                      "(growth curves, comparison at equal budgets, extrapolation)")
    add_config_argument(p)
    p.add_argument("--run-id", required=True, help="run to report on")
    p.add_argument("--compare", nargs="+", action="extend", default=[], metavar="RUN_ID",
                   help="other runs to compare at equal budgets (e.g. a checkpoint or the base model)")
    p.add_argument("--no-control", action="store_true",
                   help="do not add the run's control run (runs.control_run_id) to the comparison")
    p.add_argument("--out", default=None, help="output folder (default: <report.output_dir>/<run-id>)")
    p.add_argument("--chance-baseline", action="store_true",
                   help="match --holdout to measure matches expected by chance (always done when report.holdout_source is set)")
    p.add_argument("--holdout", default=None, help="held-out human text for --chance-baseline")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import run_stage

    stats = run_stage(args, "report", compare_run_ids=args.compare, out_dir=args.out,
                      include_control=not args.no_control, holdout=args.holdout,
                      chance_baseline=True if (args.chance_baseline or args.holdout) else None)
    for warning in stats["report_warnings"]:
        print(f"warning: {warning}")
    print(f"html: {stats['result']['html']}")
    print(f"markdown: {stats['result']['markdown']}")
    return 0
