"""Matching throughput: sample tokens checked per second against an index of >= 20M corpus
tokens, vs a single-process baseline (sorted numpy array of corpus hashes + searchsorted),
measured in the same run; plus bytes shuffled per sample token from Spark's metrics.

    python tests/benchmarks/bench_match.py --corpus-tokens 20000000 --sample-tokens 2000000

Samples are random token sequences with corpus passages planted in a fraction of them,
so both the join and the verification/passage stages do real work.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def shuffle_bytes(spark) -> int:
    """Total shuffle bytes written by all stages so far, from the Spark UI's REST API."""
    url = spark.sparkContext.uiWebUrl
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/stages") as resp:
        stages = json.load(resp)
    return int(sum(s.get("shuffleWriteBytes", 0) for s in stages))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus-tokens", type=int, default=20_000_000)
    parser.add_argument("--sample-tokens", type=int, default=2_000_000)
    parser.add_argument("--sample-length", type=int, default=256)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    import pandas as pd

    from bench_index import synthetic_corpus, write_pretokenized_corpus
    from extraction_audit.config import parse_config
    from extraction_audit.hashing import HashConfig, hash_concatenated
    from extraction_audit.index import IndexMeta, _merge_build_ngrams, _write_meta
    from extraction_audit.match import match_sequences
    from extraction_audit.spark import get_spark
    from extraction_audit.tables import Tables

    work = Path(tempfile.mkdtemp(prefix="bench-match-"))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from conftest import build_word_tokenizer  # ids w0..w49999: passages decode without a real model

    tokenizer = build_word_tokenizer(work / "tokenizer", vocab=50_000)
    cfg = parse_config({
        "model": {"path": str(tokenizer)},
        "storage": {"warehouse": str(work / "wh")},
        "spark": {"master": f"local[{args.cores}]", "shuffle_partitions": max(4, 2 * args.cores),
                  "driver_memory": "8g", "ui_enabled": True},
        "corpus": {"id": "bench", "path": str(work)},
        "index": {"n": args.n, "bucket_bits": 4},
    })
    docs = synthetic_corpus(args.corpus_tokens)
    rng = np.random.default_rng(1)
    samples = []
    for _ in range(args.sample_tokens // args.sample_length):
        s = (rng.zipf(1.2, size=args.sample_length) % 50_000).astype(np.int32)
        if rng.random() < 0.1:  # plant a 60-150 token corpus passage
            d = docs[int(rng.integers(0, len(docs)))]
            length = int(rng.integers(60, 150))
            a = int(rng.integers(0, max(1, len(d) - length)))
            piece = d[a:a + length]
            b = int(rng.integers(0, args.sample_length - len(piece)))
            s[b:b + len(piece)] = piece
        samples.append(s)
    sample_tokens = sum(len(s) for s in samples)
    print(f"corpus {sum(len(d) for d in docs):,} tokens; samples {len(samples):,} x {args.sample_length} "
          f"= {sample_tokens:,} tokens")

    # ---- baseline: one process, sorted corpus hash array, searchsorted + exact compare
    t0 = time.perf_counter()
    h_cfg = HashConfig(n=args.n)
    corpus_hashes, _, _ = hash_concatenated(np.concatenate(docs), np.array([len(d) for d in docs]), h_cfg)
    corpus_sorted = np.unique(corpus_hashes)
    index_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sample_hashes, _, _ = hash_concatenated(np.concatenate(samples), np.array([len(s) for s in samples]), h_cfg)
    idx = np.searchsorted(corpus_sorted, sample_hashes).clip(0, len(corpus_sorted) - 1)
    base_hits = int((corpus_sorted[idx] == sample_hashes).sum())
    base_s = time.perf_counter() - t0
    print(f"baseline (in-memory sorted array): index {index_s:.1f}s, lookup {base_s:.2f}s = "
          f"{sample_tokens / base_s:,.0f} sample tokens/s, {base_hits:,} window hits")

    # ---- Spark: index (not timed here; see bench_index.py), then the full matcher
    spark = get_spark(cfg)
    tables = Tables(spark, cfg)
    write_pretokenized_corpus(spark, tables, docs)
    meta = IndexMeta("bench", "bench", "bench", args.n, 64, 4, 16, 2)
    _merge_build_ngrams(spark, tables, meta, "b1")
    _write_meta(spark, tables, meta)
    seq = spark.createDataFrame(pd.DataFrame({"sample_id": np.arange(len(samples)),
                                              "token_ids": [s.tolist() for s in samples]}),
                                "sample_id BIGINT, token_ids ARRAY<INT>")
    seq_path = str(work / "seq")
    seq.write.format("delta").save(seq_path)
    seq = spark.read.format("delta").load(seq_path)
    before = shuffle_bytes(spark)
    t0 = time.perf_counter()
    occ, passages, verified, stats = match_sequences(spark, cfg, seq, str(work / "staging"), tables)
    n_occ = occ.count()
    spark_s = time.perf_counter() - t0
    shuffled = shuffle_bytes(spark) - before
    print(f"spark matcher: {spark_s:.1f}s on {args.cores} cores = {sample_tokens / spark_s:,.0f} sample tokens/s "
          f"({sample_tokens / spark_s / args.cores:,.0f} per core); {stats['candidate_windows']:,} candidate "
          f"windows, {stats['verified_windows']:,} verified, {n_occ:,} occurrences, {passages.count():,} passages")
    print(f"ratio spark/baseline throughput: {base_s / spark_s:.3f}x (baseline does hash lookup only; "
          f"spark also verifies, builds passages and counts documents)")
    print(f"shuffle bytes: {shuffled:,} = {shuffled / sample_tokens:.1f} bytes per sample token")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
