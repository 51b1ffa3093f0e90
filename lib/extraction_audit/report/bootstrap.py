"""Bootstrap confidence intervals over samples for the report's rates and counts.

The unit of resampling is the sample: an audit draws samples independently at the run's
settings, so re-drawing sample ids with replacement mimics re-running the audit at the
same budget.  Statistics recomputed on each replicate: share extracted, extracted
tokens, distinct (rare) passages, distinct PII values (in the corpus).

Two implementations of the same estimator:

* ``SampleSummaries`` (pandas / numpy on the driver) works on *per-sample summaries* from
  the ``PER_SAMPLE_SUMMARY`` query: one row per sample with its token count, extracted
  tokens and the hashed ids of the passages and PII values it emitted, never raw tokens.
  Its memory is bounded by the number of samples plus passage incidences (a 10 million
  sample run is ~10^7 rows), which is why the report uses it only up to
  ``report.bootstrap_max_driver_samples`` samples.
* ``poisson_bootstrap_spark`` for larger runs: each sample gets an independent Poisson(1)
  weight per replicate (derived from a hash of seed, replicate and sample id, so it is
  deterministic and needs no shuffle to draw), which approximates multinomial
  resampling for large n; replicate statistics are weighted sums and distinct counts
  over samples with positive weight, computed by Spark aggregations.  Only one row per
  replicate reaches the driver.

Interval choice: shares and token counts use the percentile interval.  A resample is a
multiset of the original samples, so its distinct-passage count can never exceed the
observed one; percentile intervals of distinct counts would sit entirely below the
estimate.  For distinct counts we report ``estimate ± z * bootstrap SE`` instead: the
spread at this budget, centred on what was observed.  (How many passages a larger budget
would find is the extrapolation's job, not the bootstrap's.)

Reads / writes no tables (its inputs come from ``queries.PER_SAMPLE_SUMMARY``).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

#: per-sample array column -> the statistic counting its distinct items
DISTINCT_SETS = {
    "passage_keys": "distinct_passages",
    "rare_passage_keys": "distinct_rare_passages",
    "pii_keys": "pii_found",
    "pii_in_corpus_keys": "pii_in_corpus",
}
#: statistics whose interval is a percentile interval; the rest use the SE interval
PERCENTILE_STATS = ("share_extracted", "extracted_tokens")
STATS = PERCENTILE_STATS + tuple(DISTINCT_SETS.values())

PERCENTILE_METHOD = "percentile bootstrap over samples"
SE_METHOD = "estimate ± z × bootstrap standard error (resampling samples)"


@dataclass(frozen=True)
class Estimate:
    """A number with its interval and the name of the method behind the interval."""

    value: float | None
    low: float | None = None
    high: float | None = None
    method: str = ""

    def to_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "method": self.method}


def z_value(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def interval(stat: str, value: float | None, replicates: np.ndarray, confidence: float) -> Estimate:
    """Interval for ``stat`` from its bootstrap replicates (see the module docstring)."""
    reps = np.asarray(replicates, dtype=float)
    reps = reps[np.isfinite(reps)]
    if value is None or not np.isfinite(value) or len(reps) < 2:
        return Estimate(value)
    if stat in PERCENTILE_STATS:
        return percentile_interval(value, reps, confidence)
    half = z_value(confidence) * float(reps.std(ddof=1))
    return Estimate(float(value), float(value - half), float(value + half), SE_METHOD)


def percentile_interval(value: float | None, replicates: np.ndarray, confidence: float,
                        method: str = PERCENTILE_METHOD) -> Estimate:
    """Percentile interval of a share from its bootstrap replicates (also used by the probes)."""
    reps = np.asarray(replicates, dtype=float)
    reps = reps[np.isfinite(reps)]
    if value is None or not np.isfinite(value) or len(reps) < 2:
        return Estimate(value)
    alpha = 1 - confidence
    low, high = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    return Estimate(float(value), float(low), float(high), method)


def difference(stat: str, value_a, reps_a, value_b, reps_b, confidence: float) -> Estimate:
    """Interval for value_a - value_b of two independent runs, from paired replicates
    (replicate i of each run is an independent resample, so their difference is a draw
    from the difference's bootstrap distribution)."""
    if value_a is None or value_b is None:
        return Estimate(None)
    n = min(len(reps_a), len(reps_b))
    diff = np.asarray(reps_a[:n], dtype=float) - np.asarray(reps_b[:n], dtype=float)
    return interval(stat, float(value_a) - float(value_b), diff, confidence)


class SampleSummaries:
    """Per-sample summaries of one run as numpy arrays, in sample_id order."""

    def __init__(self, frame: pd.DataFrame):
        frame = frame.sort_values("sample_id", kind="stable").reset_index(drop=True)
        self.sample_ids = frame["sample_id"].to_numpy(dtype=np.int64)
        self.n_tokens = frame["n_tokens"].fillna(0).to_numpy(dtype=np.float64)
        self.extracted_tokens = frame["extracted_tokens"].fillna(0).to_numpy(dtype=np.float64)
        self.incidence: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
        for column in DISTINCT_SETS:
            lists = frame[column] if column in frame else pd.Series([[]] * len(frame))
            lengths = np.fromiter((0 if v is None else len(v) for v in lists), dtype=np.int64,
                                  count=len(lists))
            keys = np.concatenate([np.asarray(v, dtype=np.int64) for v in lists if v is not None and len(v)]
                                  ) if lengths.sum() else np.zeros(0, dtype=np.int64)
            items, item_idx = np.unique(keys, return_inverse=True)
            sample_idx = np.repeat(np.arange(len(frame)), lengths)
            self.incidence[column] = (sample_idx, item_idx.astype(np.int64), len(items))

    def __len__(self) -> int:
        return len(self.sample_ids)

    def prefix_length(self, n_samples: int | None, generated_tokens: int | None) -> int | None:
        """Samples of a budget checkpoint: the first ``n_samples`` in sample_id order, if
        their tokens add up to the checkpoint's ``generated_tokens`` (else None: the
        checkpoint was cut some other way and gets no interval)."""
        if n_samples is None or generated_tokens is None or pd.isna(n_samples) or n_samples > len(self):
            return None
        n = int(n_samples)
        return n if int(self.n_tokens[:n].sum()) == int(generated_tokens) else None

    def point(self, n_first: int | None = None) -> dict[str, float]:
        """The statistics on the (first ``n_first``) samples without resampling."""
        return self._stats(np.ones(len(self) if n_first is None else n_first))

    def replicates(self, n_boot: int, seed: int, n_first: int | None = None) -> dict[str, np.ndarray]:
        """``n_boot`` bootstrap replicates of every statistic (multinomial resampling)."""
        n = len(self) if n_first is None else n_first
        rng = np.random.default_rng(seed)
        out = {s: np.empty(n_boot) for s in STATS}
        for b in range(n_boot):
            weights = np.bincount(rng.integers(0, n, n), minlength=n) if n else np.zeros(0)
            for stat, value in self._stats(weights).items():
                out[stat][b] = value
        return out

    def _stats(self, weights: np.ndarray) -> dict[str, float]:
        n = len(weights)
        generated = float(weights @ self.n_tokens[:n])
        extracted = float(weights @ self.extracted_tokens[:n])
        stats = {
            "extracted_tokens": extracted,
            "share_extracted": extracted / generated if generated else float("nan"),
        }
        chosen = weights > 0
        for column, stat in DISTINCT_SETS.items():
            sample_idx, item_idx, n_items = self.incidence[column]
            keep = sample_idx < n
            hit = item_idx[keep][chosen[sample_idx[keep]]]
            stats[stat] = float(np.count_nonzero(np.bincount(hit, minlength=n_items)))
        return stats


def _poisson1_cdf() -> tuple[float, ...]:
    """P(X <= k) for X ~ Poisson(1), k = 0..12 (1 - P(X <= 12) < 1e-10)."""
    from math import exp, factorial

    return tuple(exp(-1) * sum(1 / factorial(j) for j in range(k + 1)) for k in range(13))


def poisson_bootstrap_spark(per_sample_df, n_boot: int, seed: int) -> dict[str, np.ndarray]:
    """Poisson bootstrap of the same statistics, computed in Spark.

    ``per_sample_df`` has the ``PER_SAMPLE_SUMMARY`` columns.  Each (replicate, sample)
    pair gets weight ``w ~ Poisson(1)`` from the inverse CDF of a uniform derived from
    ``xxhash64(seed, replicate, sample_id)``; pairs with ``w = 0`` are dropped.  Returns
    one array of ``n_boot`` values per statistic (replicates with no samples are NaN)."""
    from pyspark.sql import functions as F

    spark = per_sample_df.sparkSession
    replicates = spark.range(n_boot).withColumnRenamed("id", "replicate")
    uniform = F.shiftrightunsigned(
        F.xxhash64(F.lit(seed), F.col("replicate"), F.col("sample_id")), 11) / F.lit(float(2 ** 53))
    weight = F.lit(len(_poisson1_cdf()))
    for k, cdf in reversed(list(enumerate(_poisson1_cdf()))):
        weight = F.when(F.col("u") < F.lit(cdf), F.lit(k)).otherwise(weight)
    weighted = (
        per_sample_df.crossJoin(F.broadcast(replicates))
        .withColumn("u", uniform)
        .withColumn("w", weight)
        .where(F.col("w") > 0)
        .drop("u")
    ).persist()
    try:
        sums = (
            weighted.groupBy("replicate")
            .agg(F.sum(F.col("w") * F.col("extracted_tokens")).alias("extracted_tokens"),
                 F.sum(F.col("w") * F.col("n_tokens")).alias("generated_tokens"))
            .withColumn("share_extracted", F.col("extracted_tokens") / F.col("generated_tokens"))
        )
        frames = [sums.select("replicate", "extracted_tokens", "share_extracted")]
        for column, stat in DISTINCT_SETS.items():
            frames.append(
                weighted.select("replicate", F.explode(column).alias("key"))
                .groupBy("replicate").agg(F.countDistinct("key").alias(stat))
            )
        result = spark.range(n_boot).withColumnRenamed("id", "replicate")
        for frame in frames:
            result = result.join(frame, "replicate", "left")
        rows = result.orderBy("replicate").toPandas()
    finally:
        weighted.unpersist()
    out = {}
    for stat in STATS:
        values = rows[stat].astype(float).to_numpy()
        if stat in DISTINCT_SETS.values():
            values = np.nan_to_num(values, nan=0.0)
        out[stat] = values
    return out
