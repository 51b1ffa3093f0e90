"""Fixed cost per stage: Spark jobs and seconds of every step of one audit, as the runner
records them in ``run_steps`` (``spark_jobs`` counts the jobs of the step's job group).

Runs the demo configuration (synthetic corpus, tiny GPT-2) through ``audit`` at a small
budget, so the numbers are the per-stage overhead that dominates small nightly runs, not
throughput.  With ``--landed-src DIR`` (a checkout of an earlier commit's ``lib/``) it
first runs the same audit with that code in a subprocess, wrapping its step functions in
job groups, and prints the ratio new/old per step::

    git worktree add /tmp/landed <commit>
    python tests/benchmarks/bench_stage_jobs.py --budget-tokens 3000 --landed-src /tmp/landed/lib

The old code grouped steps differently: its ``pii`` step also refreshed ``run_metrics`` and
its ``rank`` step also calibrated, so those rows are compared with ``pii + metrics`` and
``rank + calibrate``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

_LANDED = r'''
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from extraction_audit import audit as A
from extraction_audit.demo import demo_config
from extraction_audit.synthetic import ensure_demo_assets
from extraction_audit.spark import get_spark
cfg = demo_config(ensure_demo_assets(Path(sys.argv[4])), budget_tokens=int(sys.argv[2]), warehouse=sys.argv[3])
spark = get_spark(cfg)
sc = spark.sparkContext
out = {}
orig = A._step_functions
def wrapped():
    def wrap(name, fn):
        def run(*a, **k):
            sc.setJobGroup("landed-" + name, name)
            t = time.time()
            r = fn(*a, **k)
            out[name] = {"spark_jobs": len(sc.statusTracker().getJobIdsForGroup("landed-" + name)),
                         "seconds": round(time.time() - t, 1)}
            return r
        return run
    return {k: wrap(k, f) for k, f in orig().items()}
A._step_functions = wrapped
A.run_audit(spark, cfg, run_id="landed")
print("RESULT " + json.dumps(out))
'''

MERGED = {"pii": ("pii", "metrics"), "rank": ("rank", "calibrate")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-tokens", type=int, default=3000)
    parser.add_argument("--demo-dir", default=None, help="demo assets folder (default: a temporary one)")
    parser.add_argument("--landed-src", default=None, help="lib/ folder of an earlier checkout to compare with")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-stage-jobs-"))
    demo_dir = Path(args.demo_dir or work / "demo")
    from extraction_audit.synthetic import ensure_demo_assets

    ensure_demo_assets(demo_dir)
    landed = None
    if args.landed_src:
        done = subprocess.run([sys.executable, "-c", _LANDED, args.landed_src, str(args.budget_tokens),
                               str(work / "landed-warehouse"), str(demo_dir)],
                              capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=args.landed_src))
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            sys.exit(f"landed run failed:\n{done.stderr[-3000:]}")
        landed = json.loads(line[len("RESULT "):])

    from pyspark.sql import functions as F

    from extraction_audit.audit import run_audit
    from extraction_audit.demo import demo_config
    from extraction_audit.spark import get_spark
    from extraction_audit.tables import Tables

    cfg = demo_config(ensure_demo_assets(demo_dir), budget_tokens=args.budget_tokens,
                      warehouse=str(work / "warehouse"))
    t0 = time.time()
    spark = get_spark(cfg)
    session = time.time() - t0
    t0 = time.time()
    run_audit(spark, cfg, run_id="bench")
    total = time.time() - t0
    rows = {r["step"]: r for r in Tables(spark, cfg).read("run_steps").where(F.col("run_id") == "bench").collect()}
    print(f"session start {session:.1f} s; audit {total:.1f} s at a budget of {args.budget_tokens:,} tokens")
    print(f"{'step':<12} {'jobs':>6} {'seconds':>8}" + (f" {'landed jobs':>12} {'landed s':>9} {'jobs ratio':>10}"
                                                         if landed else ""))
    for step, row in rows.items():
        line = f"{step:<12} {row['spark_jobs']:>6} {row['seconds']:>8.1f}"
        if landed and step in landed:
            parts = MERGED.get(step, (step,))
            jobs = sum(rows[p]["spark_jobs"] for p in parts if p in rows)
            old = landed[step]
            line += f" {old['spark_jobs']:>12} {old['seconds']:>9.1f} {jobs / max(old['spark_jobs'], 1):>10.2f}"
            if len(parts) > 1:
                line += f"  (new: {' + '.join(parts)})"
        print(line)


if __name__ == "__main__":
    main()
