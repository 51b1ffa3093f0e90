"""Index build throughput: Spark n-gram index vs a single-process numpy baseline.

    python tests/benchmarks/bench_index.py --tokens 20000000

Builds a synthetic pre-tokenized corpus (Zipf-distributed ids, some duplicated
documents), writes it as ``corpus_documents`` and runs the index's n-gram build (hash,
per-document distinct n-grams, doc/occurrence counts, postings, Delta write).  The
baseline computes the same hash counts in one process with numpy (``hash_concatenated``
+ ``np.unique``), in the same run.  Prints tokens/s per core, the ratio, index bytes per
corpus token, and projections for a 1 TB corpus on a 100-core cluster.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def synthetic_corpus(total_tokens: int, seed: int = 0, vocab: int = 50_000):
    rng = np.random.default_rng(seed)
    docs, n = [], 0
    while n < total_tokens:
        length = int(rng.integers(200, 4000))
        if docs and rng.random() < 0.03:  # exact duplicates, like mirrored pages
            toks = docs[int(rng.integers(0, len(docs)))]
        else:
            toks = (rng.zipf(1.2, size=length) % vocab).astype(np.int32)
        docs.append(toks)
        n += len(toks)
    return docs


def numpy_baseline(docs, n: int) -> tuple[float, int]:
    from extraction_audit.hashing import HashConfig, hash_concatenated

    t0 = time.perf_counter()
    lengths = np.array([len(d) for d in docs])
    hashes, seq, _ = hash_concatenated(np.concatenate(docs), lengths, HashConfig(n=n))
    uniq_pairs = np.unique(np.stack([hashes, seq]), axis=1)
    distinct, doc_count = np.unique(uniq_pairs[0], return_counts=True)
    _, occ = np.unique(hashes, return_counts=True)
    assert len(occ) == len(distinct)
    return time.perf_counter() - t0, len(distinct)


def write_pretokenized_corpus(spark, tables, docs, parts: int = 16) -> None:
    """``corpus_documents`` rows for already-tokenized documents (tokenization not measured)."""
    import pandas as pd

    from extraction_audit.tables import CORPUS_DOCUMENTS
    from extraction_audit.tokens import encode_tokens

    pdf = pd.DataFrame({
        "corpus_id": "bench", "doc_id": [f"doc{i:07d}" for i in range(len(docs))], "source": "synthetic",
        "text": None, "token_bytes": [encode_tokens(d, 2) for d in docs], "token_width": 2,
        "n_tokens": [len(d) for d in docs], "n_chars": 0, "tokenizer": "bench", "build_id": "b1",
        "ingested_at": pd.Timestamp("2026-01-01"),
    })
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "256")
    chunk = max(1, (len(pdf) + parts - 1) // parts)
    for i in range(0, len(pdf), chunk):
        tables.append("corpus_documents", spark.createDataFrame(pdf.iloc[i:i + chunk], CORPUS_DOCUMENTS.schema))


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*.parquet"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=20_000_000)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    from extraction_audit.config import parse_config
    from extraction_audit.index import IndexMeta, _merge_build_ngrams
    from extraction_audit.spark import get_spark
    from extraction_audit.tables import Tables

    work = Path(tempfile.mkdtemp(prefix="bench-index-"))
    cfg = parse_config({
        "storage": {"warehouse": str(work / "wh")},
        "spark": {"master": f"local[{args.cores}]", "shuffle_partitions": max(4, 2 * args.cores),
                  "driver_memory": "8g"},
        "index": {"n": args.n, "bucket_bits": 4},
    })
    docs = synthetic_corpus(args.tokens)
    tokens = int(sum(len(d) for d in docs))
    print(f"corpus: {len(docs)} documents, {tokens:,} tokens, n={args.n}")

    base_s, base_distinct = numpy_baseline(docs, args.n)
    print(f"numpy single-process baseline: {base_s:.1f}s, {tokens / base_s:,.0f} tokens/s, "
          f"{base_distinct:,} distinct n-grams")

    spark = get_spark(cfg)
    tables = Tables(spark, cfg)
    write_pretokenized_corpus(spark, tables, docs, parts=max(8, 4 * args.cores))
    meta = IndexMeta("bench", "bench", "bench", args.n, 64, 4, 16, 2)
    t0 = time.perf_counter()
    _merge_build_ngrams(spark, tables, meta, "b1")
    spark_s = time.perf_counter() - t0
    rows = tables.read("corpus_ngrams").count()
    size = folder_bytes(Path(tables.location("corpus_ngrams")))
    per_core = tokens / spark_s / args.cores
    print(f"spark index build: {spark_s:.1f}s on {args.cores} cores, {tokens / spark_s:,.0f} tokens/s "
          f"= {per_core:,.0f} tokens/s per core, {rows:,} rows (baseline {base_distinct:,})")
    print(f"ratio spark/numpy-baseline throughput: {base_s / spark_s:.2f}x "
          f"(per core: {base_s / spark_s / args.cores:.2f}x)")
    print(f"index size: {size:,} bytes = {size / tokens:.1f} bytes per corpus token")
    tb_tokens = 1e12 / 4  # ~4 bytes of UTF-8 text per token
    print(f"projection for 1 TB of text (~{tb_tokens:.2e} tokens) on 100 cores: "
          f"{tb_tokens / (per_core * 100) / 3600:.1f} h build, {size / tokens * tb_tokens / 1e12:.1f} TB index")
    assert rows == base_distinct, "the Spark index and the baseline disagree on distinct n-grams"
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
