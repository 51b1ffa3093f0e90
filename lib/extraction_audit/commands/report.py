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
                   help="first match report.holdout_source (or --holdout) to measure matches expected by chance")
    p.add_argument("--holdout", default=None, help="held-out human text for --chance-baseline")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import load_cli_config
    from ..report.build import build_report
    from ..spark import get_spark

    cfg = load_cli_config(args)
    spark = get_spark(cfg)
    if args.chance_baseline or args.holdout:
        from ..report.baseline import compute_chance_baseline

        compute_chance_baseline(spark, cfg, args.run_id, source=args.holdout)
    result = build_report(spark, cfg, args.run_id, compare_run_ids=args.compare, out_dir=args.out,
                          include_control=not args.no_control)
    for warning in result["warnings"]:
        print(f"warning: {warning}")
    print(f"html: {result['html']}")
    print(f"markdown: {result['markdown']}")
    return 0
