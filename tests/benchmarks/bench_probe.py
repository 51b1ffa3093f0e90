"""Known-prefix probes per second: the Spark probe stage vs plain in-process generation.

Same model (the demo's tiny GPT-2, or ``--model`` with the demo corpus tokenized by it),
same prompts (the drawn probes' prefixes), same batch size, both modes:

- ``in_process``: ``HFBackend.generate`` batch after batch on the driver (model loaded first);
- ``stage``: ``run_probe`` end to end (draw from the index, generation through the
  ``generate`` executors, scoring, one Delta commit per chunk and mode);
  ``stage_generation`` counts only the chunks' generate + score + commit seconds.

Prints probes/s (one probe = one prefix continued in one mode) and the ratio
stage / in_process.  Not collected by pytest.  Example (2 cores, cached assets)::

    EXTRACTION_AUDIT_TEST_CACHE=/tmp/demo-assets python tests/benchmarks/bench_probe.py --per-stratum 20
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("EXTRACTION_AUDIT_PII_KEY", "bench-only-key")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--assets", default=os.environ.get("EXTRACTION_AUDIT_TEST_CACHE", "./ea-data/demo"))
    ap.add_argument("--warehouse", default=None, help="reuse an indexed warehouse (default: a temp folder)")
    ap.add_argument("--per-stratum", type=int, default=20)
    ap.add_argument("--positions", choices=["document_start", "anywhere"], default="document_start",
                    help="anywhere: probes at any offset (more strata members than the demo's 300 openings)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    import numpy as np
    from pyspark.sql import functions as F

    from conftest import make_config
    from extraction_audit.demo import demo_config
    from extraction_audit.generate.backends import BackendSpec, get_backend
    from extraction_audit.index import build_index
    from extraction_audit.probe.job import mode_sampling, run_probe
    from extraction_audit.spark import get_spark
    from extraction_audit.synthetic import ensure_demo_assets
    from extraction_audit.tables import Tables

    root = Path(args.warehouse or tempfile.mkdtemp(prefix="bench-probe-"))
    assets = ensure_demo_assets(Path(args.assets).resolve())
    base = make_config(root, seed_tables=False, probe={"per_stratum": args.per_stratum, "positions": args.positions},
                       generation={"batch_size": args.batch_size}, model={"device": args.device})
    cfg = demo_config(assets, base)
    spark = get_spark(cfg)
    tables = Tables(spark, cfg)
    build_index(spark, cfg, tables)

    run_id = f"bench-probe-{int(time.time())}"
    t0 = time.monotonic()
    stats = run_probe(spark, cfg, run_id, tables, scratch=str(root / "_scratch" / run_id))
    stage_seconds = time.monotonic() - t0
    rows = stats["rows_added"]

    plan = (tables.read("probes").where((F.col("run_id") == run_id) & (F.col("mode") == "greedy"))
            .select("prefix_token_ids", "seed").toPandas())
    prompts = [np.asarray(p, dtype=np.int64) for p in plan["prefix_token_ids"]]
    seeds = plan["seed"].to_numpy(np.int64)
    in_process = 0.0
    for mode in cfg.probe.modes:
        backend = get_backend(BackendSpec("hf", cfg.model.path, cfg.model.tokenizer_path, cfg.model.dtype,
                                          args.device, mode_sampling(cfg, mode).model_dump_json()))
        backend.generate(prompts[:2], seeds[:2], 4)  # warm-up
        t = time.monotonic()
        for i in range(0, len(prompts), args.batch_size):
            backend.generate(prompts[i:i + args.batch_size], seeds[i:i + args.batch_size], cfg.probe.suffix_tokens)
        in_process += time.monotonic() - t
    result = {
        "probes": len(prompts), "rows (probes x modes)": rows,
        "in_process_probes_per_s": round(rows / in_process, 1),
        "stage_generation_probes_per_s": stats["probes_per_second"],
        "stage_end_to_end_probes_per_s": round(rows / stage_seconds, 2),
        "ratio_generation_vs_in_process": round(stats["probes_per_second"] / (rows / in_process), 3),
        "ratio_end_to_end_vs_in_process": round((rows / stage_seconds) / (rows / in_process), 3),
        "stage_seconds": round(stage_seconds, 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
