"""The runner's own cost per step: run state bookkeeping with stages that compute nothing.

Every step of a run pays the runner's reads and writes of ``runs`` and ``run_steps``
before and after the stage itself; at small budgets (a nightly audit of a fine-tune, every
test) that fixed cost adds up over nine steps.  This swaps each registered stage for a
no-op with the same contract, runs ``audit`` over all planned steps a few times (fresh
run ids on one warehouse, so the Delta logs grow as they do in real use) and prints Spark
jobs and seconds per step outside the stages' job groups::

    python tests/benchmarks/bench_runner_overhead.py --runs 3
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from extraction_audit import stages as S
    from extraction_audit.config import load_config
    from extraction_audit.runner import Runner
    from extraction_audit.spark import get_spark
    from extraction_audit.tables import Tables

    root = tempfile.mkdtemp(prefix="bench-runner-")
    cfg = load_config(None, overrides={"storage.warehouse": f"{root}/warehouse",
                                       "storage.cache_dir": f"{root}/cache",
                                       "spark.master": "local[2]", "spark.shuffle_partitions": 2})
    started = time.monotonic()
    spark = get_spark(cfg)
    print(f"session start: {time.monotonic() - started:.1f} s")
    tables = Tables(spark, cfg)
    tables.ensure_all()
    for name, stage in list(S.STAGES.items()):
        S.STAGES[name] = dataclasses.replace(stage, run=lambda ctx: {"noop": 1}, begin=None,
                                             finish=None if stage.finish is None else (lambda s: {}))
    sc = spark.sparkContext
    steps = S.audit_steps(cfg)
    print(f"steps: {', '.join(steps)}")
    per_run = []
    for i in range(args.runs):
        before = _all_jobs(sc)
        t = time.monotonic()
        Runner(spark, cfg, tables).audit(run_id=f"bench-{i}")
        seconds = time.monotonic() - t
        jobs = _all_jobs(sc) - before
        per_run.append((jobs, seconds))
        print(f"run {i}: {jobs} Spark jobs, {seconds:.1f} s for {len(steps)} steps "
              f"= {jobs / len(steps):.1f} jobs, {seconds / len(steps):.2f} s per step")
    jobs = sum(j for j, _ in per_run) / len(per_run)
    seconds = sum(s for _, s in per_run) / len(per_run)
    print(f"mean per step: {jobs / len(steps):.1f} jobs, {seconds / len(steps):.2f} s")
    spark.stop()


def _all_jobs(sc) -> int:
    """Jobs the session has run so far (the highest job id + 1)."""
    tracker = sc.statusTracker()
    known = set(tracker.getJobIdsForGroup(None)) | set(tracker.getActiveJobsIds())
    return max(known, default=-1) + 1


if __name__ == "__main__":
    main()
