"""``extraction-audit rank``: membership scores and ranks for a run's samples, then (when
the corpus route ran on the same run) each score's precision@k and AUC against it."""

from __future__ import annotations

import json


def register(sub) -> None:
    from ..cli import add_config_argument

    p = sub.add_parser("rank", help="corpus-free route: score, de-duplicate and rank a run's samples")
    add_config_argument(p)
    p.add_argument("--run-id", required=True, help="run whose samples to rank")
    p.add_argument("--skip-calibration", action="store_true",
                   help="do not print the calibration against the run's verified matches (the calibrate "
                        "step still runs once match is done)")
    p.set_defaults(func=run)


def print_calibration(result, run_id: str) -> None:
    if result.empty:
        print(f"calibration: run {run_id} has no passage_occurrences (the corpus route has not run on it); "
              "nothing to calibrate against")
        return
    capped = result[result["k"] < result["k_requested"]]
    print(f"calibration against the corpus route for run {run_id} "
          "(positive = sample holds a non-low-entropy extracted passage):")
    print(result.drop(columns=["run_id"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if len(capped):
        print(f"note: k is capped at the number of ranked samples ({int(capped['n_ranked'].max())}) "
              f"where k_requested exceeds it")


def run(args) -> int:
    from pyspark.sql import functions as F

    from ..cli import load_cli_config, run_stage
    from ..spark import get_spark
    from ..tables import Tables

    stats = run_stage(args, "rank")
    print(json.dumps(stats, indent=2, default=str))
    if not args.skip_calibration:
        cfg = load_cli_config(args)
        stored = (Tables(get_spark(cfg), cfg).read("rank_calibration").where(F.col("run_id") == args.run_id)
                  .drop("computed_at").toPandas())
        order = {s: i for i, s in enumerate(cfg.rank.scores)}
        stored = stored.assign(_o=stored["score"].map(order)).sort_values(["_o", "k_requested"]).drop(columns="_o")
        print_calibration(stored.reset_index(drop=True), args.run_id)
    return 0
