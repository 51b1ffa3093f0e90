"""``extraction-audit review``: export the human review queue, import verdicts, and print
confirmed-among-checked per score."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("review", help="human review queue of the corpus-free route")
    actions = p.add_subparsers(dest="review_command", required=True, metavar="ACTION")

    exp = actions.add_parser("export", help="write the top candidates per score as HTML + CSV")
    add_config_argument(exp)
    exp.add_argument("--run-id", required=True)
    exp.add_argument("--top", type=int, default=None, help="top N per score (default: rank.top_n)")
    exp.add_argument("--out", default=None, help="output folder (default: <report.output_dir>/<run-id>/review)")
    exp.set_defaults(func=run_export)

    imp = actions.add_parser("import", help="record the verdicts of a filled review CSV")
    add_config_argument(imp)
    imp.add_argument("file", help="the CSV written by `review export`, with verdict/evidence filled")
    imp.add_argument("--reviewer", required=True, help="who reviewed the samples")
    imp.add_argument("--top", type=int, default=None, help="top N used for the summary (default: rank.top_n)")
    imp.set_defaults(func=run_import)

    summ = actions.add_parser("summary", help="confirmed among checked, per score")
    add_config_argument(summ)
    summ.add_argument("--run-id", required=True)
    summ.add_argument("--top", type=int, default=None, help="top N per score (default: rank.top_n)")
    summ.set_defaults(func=run_summary)


def print_summary(frame) -> None:
    run_id = frame["run_id"].iloc[0]
    print(f"confirmed among checked, run {run_id}, top {int(frame['top_n'].iloc[0])} per score:")
    print(frame.drop(columns=["run_id", "top_n"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def run_export(args) -> int:
    from ..cli import load_cli_config
    from ..rank import export_review
    from ..spark import get_spark

    cfg = load_cli_config(args)
    print(json.dumps(export_review(get_spark(cfg), cfg, args.run_id, args.top, args.out), indent=2))
    return 0


def run_import(args) -> int:
    from ..cli import load_cli_config
    from ..rank import confirmed_among_checked, import_review
    from ..spark import get_spark

    cfg = load_cli_config(args)
    spark = get_spark(cfg)
    stats = import_review(spark, cfg, args.file, args.reviewer)
    print(json.dumps(stats, indent=2))
    for run_id in stats["runs"]:
        print_summary(confirmed_among_checked(spark, cfg, run_id, args.top))
    return 0


def run_summary(args) -> int:
    from ..cli import load_cli_config
    from ..rank import confirmed_among_checked
    from ..spark import get_spark

    cfg = load_cli_config(args)
    print_summary(confirmed_among_checked(get_spark(cfg), cfg, args.run_id, args.top))
    return 0
