"""Near-duplicate collapse: datasketch MinHash signatures, LSH band keys, Spark clustering."""

from __future__ import annotations

import numpy as np
import pandas as pd
from datasketch import MinHash
from pyspark.testing import assertDataFrameEqual

from extraction_audit.rank.dedup import band_keys, lsh_bands, minhash_signatures, near_duplicate_clusters


def _variants(seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5000, 120)
    a1 = a.copy()
    a1[[30, 90]] = [4999, 4998]  # two tokens changed
    a2 = a1.copy()
    a2[[10, 60, 110]] = [4997, 4996, 4995]  # drifts further: near a1, a bit further from a
    b = rng.integers(0, 5000, 120)
    return a, a1, a2, b


def test_signatures_estimate_shingle_jaccard_and_bands_pair_near_duplicates():
    a, a1, _, b = _variants()
    short = np.array([1, 2, 3])
    sig, ok = minhash_signatures([a, a1, b, short], num_perm=128, shingle_tokens=5)
    assert ok.tolist() == [True, True, True, False]

    def shingles(x):
        return {tuple(x[i:i + 5]) for i in range(len(x) - 4)}

    true_j = len(shingles(a) & shingles(a1)) / len(shingles(a) | shingles(a1))
    est = np.mean(sig[0] == sig[1])
    assert abs(est - true_j) < 0.12 and np.mean(sig[0] == sig[2]) < 0.1
    # the signature is datasketch's own: same values as feeding it the shingle hashes one by one
    m = MinHash(num_perm=128, seed=1, hashfunc=int)
    from extraction_audit.hashing import HashConfig, hash_windows
    m.update_batch((hash_windows(a, HashConfig(n=5)).view(np.uint64) & np.uint64(0xFFFFFFFF)).tolist())
    np.testing.assert_array_equal(m.hashvalues, sig[0])

    bands = lsh_bands(0.7, 128)
    keys = band_keys(sig[:3], bands)
    assert keys.shape == (3, len(bands))
    assert len(set(keys[0]) & set(keys[1])) >= 1
    assert not set(keys[0]) & set(keys[2])
    np.testing.assert_array_equal(keys, band_keys(sig[:3], bands))  # deterministic


def test_clusters_collapse_near_duplicates_with_a_deterministic_representative(spark):
    a, a1, a2, b = _variants(seed=3)
    c = np.random.default_rng(9).integers(0, 5000, 80)
    rows = [(40, a2), (11, a), (25, a1), (7, b), (8, c), (9, np.array([5, 6])), (10, np.array([5, 6]))]
    samples = spark.createDataFrame(pd.DataFrame({"sample_id": [r[0] for r in rows],
                                                  "token_ids": [r[1].astype(np.int32).tolist() for r in rows]}),
                                    "sample_id BIGINT, token_ids ARRAY<INT>")
    clusters, stats = near_duplicate_clusters(samples, threshold=0.7, num_perm=128, shingle_tokens=5)
    expected = spark.createDataFrame(
        [(11, 11, 3, True), (25, 11, 3, False), (40, 11, 3, False), (7, 7, 1, True), (8, 8, 1, True),
         (9, 9, 1, True), (10, 10, 1, True)],  # samples shorter than a shingle stay alone
        "sample_id BIGINT, cluster_id BIGINT, cluster_size INT, is_representative BOOLEAN")
    assertDataFrameEqual(clusters, expected)
    assert stats["converged"] and stats["lsh_bands"] * stats["lsh_rows_per_band"] <= 128
