"""Near-duplicate collapse before ranking, so the top of a list is not one passage twenty times.

Reads the ``samples`` rows it is given; writes no table (``candidates.py`` stores
``cluster_id``, ``cluster_size`` and ``is_representative``).

Each sample's set of ``rank.shingle_tokens``-token shingles of its generated token ids is
summarised by a datasketch ``MinHash`` (``rank.minhash_num_perm`` permutations).  Samples
are candidates for being near-duplicates when they agree on a whole band of the signature,
with the band layout (b bands of r rows) that datasketch's ``MinHashLSH`` picks for
``rank.minhash_threshold``.  ``MinHashLSH`` keeps its hash tables in one process, so the
same bucketing is done here as a Spark group-by on (band, band hash): it scales with the
run.  As with ``MinHashLSH.query``, bucket sharing alone makes two samples candidates.
Clusters are the connected components of "shares a bucket", found by min-label
propagation; the representative of a cluster is its smallest ``sample_id`` (deterministic).
Samples shorter than one shingle are their own cluster.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Iterator, Sequence

import numpy as np

from ..hashing import HashConfig, hash_concatenated

log = logging.getLogger(__name__)

MAX_PROPAGATION_ROUNDS = 64
_MINHASH_SEED = 1


def lsh_bands(threshold: float, num_perm: int) -> list[tuple[int, int]]:
    """(start, end) of each band, as datasketch's MinHashLSH chooses them for the threshold."""
    from datasketch import MinHashLSH

    return list(MinHashLSH(threshold=threshold, num_perm=num_perm).hashranges)


def minhash_signatures(token_lists: Sequence[np.ndarray], *, num_perm: int,
                       shingle_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """datasketch MinHash signatures of each sequence's token shingles.

    Shingles are hashed for the whole batch at once with the project's n-gram hash (low 32
    bits, what datasketch's default ``affine32`` scheme takes), then handed to datasketch.
    Returns ``(signatures uint32 (n, num_perm), has_shingles bool (n,))``; a sequence
    shorter than one shingle has an empty signature and ``has_shingles`` False.
    """
    from datasketch import MinHash

    lengths = np.array([len(t) for t in token_lists], dtype=np.int64)
    if not len(token_lists):
        return np.empty((0, num_perm), dtype=np.uint32), np.empty(0, dtype=bool)
    flat = np.concatenate([np.asarray(t, dtype=np.int64) for t in token_lists])
    hashes, seq, _ = hash_concatenated(flat, lengths, HashConfig(n=shingle_tokens))
    low32 = (hashes.view(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    bounds = np.searchsorted(seq, np.arange(len(token_lists) + 1))
    per_seq = (low32[bounds[i]:bounds[i + 1]].tolist() for i in range(len(token_lists)))
    signatures = np.stack([m.hashvalues for m in MinHash.generator(
        per_seq, num_perm=num_perm, seed=_MINHASH_SEED, hashfunc=int)])
    return signatures.astype(np.uint32), lengths >= shingle_tokens


def band_keys(signatures: np.ndarray, bands: Sequence[tuple[int, int]]) -> np.ndarray:
    """One int64 key per (sequence, band): the n-gram hash of ``[band index, band values...]``."""
    n = signatures.shape[0]
    if n == 0:
        return np.empty((0, len(bands)), dtype=np.int64)
    width = bands[0][1] - bands[0][0]
    if any(e - s != width for s, e in bands):
        raise ValueError("bands must have equal width")
    rows = np.concatenate([
        np.concatenate([np.full((n, 1), b, dtype=np.int64), signatures[:, s:e].astype(np.int64)], axis=1)
        for b, (s, e) in enumerate(bands)
    ])  # band-major: rows b*n .. (b+1)*n-1 belong to band b
    keys, _, _ = hash_concatenated(rows.ravel(), np.full(len(rows), width + 1), HashConfig(n=width + 1))
    return keys.reshape(len(bands), n).T.copy()


def _band_keys_batches(batches: Iterator, *, num_perm: int, shingle_tokens: int, bands: list[tuple[int, int]]):
    import pandas as pd

    for pdf in batches:
        tokens = [np.asarray(t if t is not None else [], dtype=np.int64) for t in pdf["token_ids"]]
        sig, ok = minhash_signatures(tokens, num_perm=num_perm, shingle_tokens=shingle_tokens)
        keys = band_keys(sig, bands)
        yield pd.DataFrame({
            "sample_id": pdf["sample_id"].to_numpy()[ok],
            "band_keys": list(keys[ok]),
        })


def near_duplicate_clusters(samples, *, threshold: float, num_perm: int, shingle_tokens: int):
    """Cluster one run's samples (columns ``sample_id``, ``token_ids``).

    Returns ``(DataFrame[sample_id, cluster_id, cluster_size, is_representative], stats)``
    with one row per input sample; ``cluster_id`` is the smallest sample_id of the cluster.
    """
    from pyspark.sql import functions as F

    bands = lsh_bands(threshold, num_perm)
    keyed = samples.select("sample_id", "token_ids").mapInPandas(
        partial(_band_keys_batches, num_perm=num_perm, shingle_tokens=shingle_tokens, bands=bands),
        "sample_id BIGINT, band_keys ARRAY<BIGINT>",
    )
    membership = keyed.select("sample_id", F.explode("band_keys").alias("bucket"))
    shared = membership.groupBy("bucket").agg(F.count("*").alias("members")).where("members > 1").select("bucket")
    edges = membership.join(shared, "bucket").localCheckpoint()

    labels = edges.groupBy("bucket").agg(F.min("sample_id").alias("label")) \
        .join(edges, "bucket").groupBy("sample_id").agg(F.min("label").alias("label")).localCheckpoint()
    rounds, changed = 1, 0
    has_edges = not edges.isEmpty()  # no shared bucket at all: every sample is its own cluster
    while has_edges and rounds < MAX_PROPAGATION_ROUNDS:
        bucket_label = edges.join(labels, "sample_id").groupBy("bucket").agg(F.min("label").alias("label"))
        new = edges.join(bucket_label, "bucket").groupBy("sample_id") \
            .agg(F.min("label").alias("label")).localCheckpoint()
        changed = new.alias("n").join(labels.alias("o"), "sample_id") \
            .where(F.col("n.label") < F.col("o.label")).count()
        labels = new
        rounds += 1
        if changed == 0:
            break
    if changed:
        log.warning("near-duplicate clustering stopped after %d rounds with %d labels still changing",
                    rounds, changed)

    clustered = samples.select("sample_id").join(labels, "sample_id", "left") \
        .withColumn("cluster_id", F.coalesce("label", "sample_id")).drop("label")
    sizes = clustered.groupBy("cluster_id").agg(F.count("*").cast("int").alias("cluster_size"))
    result = clustered.join(sizes, "cluster_id").withColumn(
        "is_representative", F.col("sample_id") == F.col("cluster_id"))
    stats = {"lsh_bands": len(bands), "lsh_rows_per_band": bands[0][1] - bands[0][0],
             "propagation_rounds": rounds, "converged": changed == 0}
    return result.select("sample_id", "cluster_id", "cluster_size", "is_representative"), stats
