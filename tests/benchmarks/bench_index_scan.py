"""Scan rates of the two corpus reads a match makes, and the nightly-run projection built on them.

    python tests/benchmarks/bench_match.py --sample-tokens 128000,1000000 --work /tmp/bm --keep
    python tests/benchmarks/bench_index_scan.py --warehouse /tmp/bm/wh/match \\
        --sample-seconds-per-m 10.3

A match reads the corpus twice, whatever the number of samples (see ``match.py``): the anchor
table (bucket, anchor_hash, doc_number, offset), joined with a broadcast of the distinct
sample anchors, and the token column of the document table, joined with a broadcast of the
candidate document ids.  Neither is shuffled, so at scale their cost is bytes scanned per
core.  This script measures both on copies of an existing index (``bench_match.py --keep``
leaves one) made ``--copies`` times larger: each copy's hashes are remapped, so only the
first copy holds the probed anchors, as in a corpus that is mostly not in the samples.  Each
scan is timed warm (the best of ``--repeat`` runs after one untimed run), in one local
session on ``--cores``.

Prints rows/s and bytes/s per core of each scan, and the projection of one nightly run of
``--project-sample-tokens`` (100 M) sample tokens against a ``--project-corpus-tokens``
(1 T) token corpus on ``--project-cores`` (100) cores: bytes read, bytes shuffled and hours,
from the measured rates, this index's bytes per corpus token, and the sample side's
measured cost per million sample tokens (``--sample-seconds-per-m``: core-seconds per M
sample tokens, the difference of two ``bench_match.py`` sizes times its cores).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

WINDOW_BYTES = 28  # a staged sample window: sample_id 8, pos 4, bucket 4, anchor_hash 8, anchor_rel 4


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.parquet"))


def best_of(repeat: int, run) -> float:
    run()  # untimed: JIT and file cache
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warehouse", required=True, help="a warehouse holding one built corpus index")
    p.add_argument("--copies", type=int, default=20, help="times the index is replicated for the scans")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--probe-anchors", type=int, default=54_058,
                   help="distinct sample anchors broadcast (a 1 M-token run had 54,058)")
    p.add_argument("--sample-seconds-per-m", type=float, required=True,
                   help="core-seconds per M sample tokens of the sample side (from bench_match.py)")
    p.add_argument("--project-sample-tokens", type=float, default=1e8)
    p.add_argument("--project-corpus-tokens", type=float, default=1e12)
    p.add_argument("--project-cores", type=int, default=100)
    p.add_argument("--work", default=None, help="folder for the copies (default: a temp folder, removed)")
    args = p.parse_args()

    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from extraction_audit.config import parse_config
    from extraction_audit.spark import get_spark

    cfg = parse_config({"spark": {"master": f"local[{args.cores}]", "shuffle_partitions": 2 * args.cores}})
    spark = get_spark(cfg)
    wh = Path(args.warehouse)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-index-scan-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        anchors = DeltaTable.forPath(spark, str(wh / "corpus_anchors")).toDF()
        documents = DeltaTable.forPath(spark, str(wh / "corpus_documents")).toDF()
        corpus_tokens = documents.agg(F.sum("n_tokens")).first()[0]
        copies = spark.range(args.copies).withColumnRenamed("id", "copy")
        remap = F.when(F.col("copy") == 0, F.lit(0).cast("long")).otherwise(F.xxhash64("copy"))
        (anchors.select("bucket", "anchor_hash", "doc_number", "offset").crossJoin(copies)
         .withColumn("anchor_hash", F.col("anchor_hash").bitwiseXOR(remap)).drop("copy")
         .repartition(4 * args.cores, "bucket").sortWithinPartitions("bucket", "anchor_hash")
         .write.option("compression", "zstd").mode("overwrite").parquet(str(work / "anchors")))
        (documents.select("doc_id", "token_bytes", "token_width").crossJoin(copies)
         .withColumn("doc_id", F.concat_ws("#", F.col("copy").cast("string"), "doc_id")).drop("copy")
         .repartition(4 * args.cores)
         .write.option("compression", "zstd").mode("overwrite").parquet(str(work / "documents")))
        big_anchors = spark.read.parquet(str(work / "anchors"))
        big_docs = spark.read.parquet(str(work / "documents"))
        anchor_rows, doc_rows = big_anchors.count(), big_docs.count()
        anchor_bytes, doc_bytes = folder_bytes(work / "anchors"), folder_bytes(work / "documents")

        probes = (anchors.select("bucket", "anchor_hash").distinct()
                  .orderBy(F.xxhash64("anchor_hash")).limit(args.probe_anchors).cache())
        probes.count()
        wanted = (documents.select("doc_id").orderBy(F.xxhash64("doc_id")).limit(2_000)
                  .withColumn("doc_id", F.concat_ws("#", F.lit("0"), "doc_id")).cache())
        wanted.count()

        def scan_anchors():
            (big_anchors.join(F.broadcast(probes), ["bucket", "anchor_hash"])
             .agg(F.count(F.lit(1)), F.sum("doc_number"), F.sum("offset")).collect())

        def scan_documents():
            (big_docs.join(F.broadcast(wanted), "doc_id")
             .agg(F.count(F.lit(1)), F.sum(F.length("token_bytes"))).collect())

        t_anchor = best_of(args.repeat, scan_anchors)
        t_docs = best_of(args.repeat, scan_documents)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)

    c = args.cores
    index_tokens = corpus_tokens * args.copies
    a_bps, d_bps = anchor_bytes / t_anchor / c, doc_bytes / t_docs / c
    print("=" * 100)
    print(f"Corpus scans of a match, {args.copies} copies of {wh} ({corpus_tokens:,} tokens each), "
          f"local[{c}], best of {args.repeat} warm runs")
    print(f"  anchor scan + broadcast join ({args.probe_anchors:,} anchors): {anchor_rows:,} rows, "
          f"{anchor_bytes / 1e6:,.1f} MB in {t_anchor:.2f} s = {anchor_rows / t_anchor / c:,.0f} rows/s/core, "
          f"{a_bps / 1e6:,.1f} MB/s/core")
    print(f"  token-store scan + broadcast join (2,000 ids): {doc_rows:,} documents, {doc_bytes / 1e6:,.1f} MB "
          f"in {t_docs:.2f} s = {d_bps / 1e6:,.1f} MB/s/core")
    a_per_tok, d_per_tok = anchor_bytes / index_tokens, doc_bytes / index_tokens
    print(f"  bytes per corpus token: anchors {a_per_tok:.3f}, token store (ids + token bytes) {d_per_tok:.3f}")

    T, S, cores = args.project_corpus_tokens, args.project_sample_tokens, args.project_cores
    read_a, read_d = a_per_tok * T, d_per_tok * T
    core_s = read_a / a_bps + read_d / d_bps + args.sample_seconds_per_m * S / 1e6
    shuffled = S * WINDOW_BYTES
    print()
    print(f"PROJECTION: one run of {S:.0e} sample tokens against a {T:.0e}-token corpus on {cores} cores "
          f"(linear scaling of the measured per-core rates)")
    print(f"  bytes read: anchors {read_a / 1e12:.2f} TB + token store {read_d / 1e12:.2f} TB "
          f"(both scanned once, never shuffled)")
    print(f"  bytes shuffled: sample windows staged by bucket once, {shuffled / 1e9:.1f} GB "
          f"({WINDOW_BYTES} B a window); candidate and verified rows are proportional to the matches")
    print(f"  core-hours: anchors {read_a / a_bps / 3600:.1f} + token store {read_d / d_bps / 3600:.1f} + sample side "
          f"{args.sample_seconds_per_m * S / 1e6 / 3600:.1f} = {core_s / 3600:.1f}; "
          f"wall on {cores} cores: {core_s / cores / 3600:.2f} h")


if __name__ == "__main__":
    main()
