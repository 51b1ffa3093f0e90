"""Calibration: how well each membership score finds the samples the corpus route verified.

Reads ``candidates``, ``passage_occurrences`` and ``extracted_passages`` of one run; writes
``rank_calibration`` (that run's rows replaced atomically).

Only meaningful on a run that also went through the corpus route: a ranked sample
(near-duplicate representative with a non-NULL score) is *positive* when it has at least
one passage occurrence whose passage is not flagged ``is_low_entropy``.  For each score:

* ``precision_at_k`` = positives among ranks 1..k / k, for k in (10, 100, 1000), with k
  capped at ``n_ranked`` (``k`` holds the capped value, ``k_requested`` the asked-for one);
* ``auc`` = ROC AUC by the rank-sum (Mann-Whitney U) formula
  ``(R_pos - n_pos (n_pos + 1) / 2) / (n_pos n_neg)``, where ``R_pos`` sums the ascending
  ranks of the positives by suspiciousness (score value, negated for scores where lower
  is more suspicious) with tied values given their average rank - equal to the share of
  (positive, negative) pairs the score orders correctly, ties counted half.  NULL when
  either class is empty.

Everything is aggregated in Spark; only one row per (score, k) reaches the driver.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime, timezone

import pandas as pd

from ..config import AuditConfig
from ..tables import Tables
from .scores import SCORES

log = logging.getLogger(__name__)

K_VALUES = (10, 100, 1000)
RESULT_COLUMNS = ["run_id", "score", "k", "k_requested", "precision_at_k", "auc", "n_positive", "n_ranked"]


def auc_from_rank_sum(positive_rank_sum: float, n_positive: int, n_negative: int) -> float | None:
    """Mann-Whitney AUC from the sum of the positives' (average) ranks, 1 = least suspicious."""
    if n_positive == 0 or n_negative == 0:
        return None
    return (positive_rank_sum - n_positive * (n_positive + 1) / 2.0) / (n_positive * n_negative)


def positive_samples(tables: Tables, run_id: str):
    """Samples with a non-low-entropy passage occurrence, or None when the run has no
    passage_occurrences at all (the corpus route has not run on it)."""
    from pyspark.sql import functions as F

    occ = tables.read("passage_occurrences").where(F.col("run_id") == run_id)
    if occ.limit(1).count() == 0:
        return None
    passages = tables.read("extracted_passages").where(F.col("run_id") == run_id) \
        .where(~F.coalesce(F.col("is_low_entropy"), F.lit(False))).select("passage_id")
    return occ.join(passages, "passage_id").select("sample_id").distinct().withColumn("label", F.lit(1))


def calibration_frame(candidates, positives, score_names: list[str], ks=K_VALUES, scratch: str | None = None
                      ) -> pd.DataFrame:
    """The per-(score, k) numbers from one run's candidates and its positive sample ids."""
    from pyspark.sql import functions as F

    from ..ordering import ordered

    reps = candidates.where(F.col("is_representative")).join(positives, "sample_id", "left") \
        .withColumn("label", F.coalesce("label", F.lit(0)))
    per_score = F.explode(F.array(*[
        F.struct(F.lit(name).alias("score"),
                 (-F.col(name) if SCORES[name].ascending else F.col(name)).alias("suspicion"),
                 F.col(SCORES[name].rank_column).alias("rank"))
        for name in score_names])).alias("s")
    long = reps.select("sample_id", "label", per_score).select("sample_id", "label", "s.*") \
        .where(F.col("rank").isNotNull())  # one scan, one row per (sample, score) ranked
    # Average rank of tied suspicion values (rank-sum AUC): the first row number of the tie
    # group plus half its size, from range-partitioned row numbers and a keyed aggregate.
    numbered = ordered(long, [F.col("suspicion").asc(), F.col("sample_id").asc()], partition_by=["score"],
                       row_number="_row", scratch=scratch)
    ties = numbered.groupBy("score", "suspicion").agg(F.min("_row").alias("first_rank"),
                                                      F.count(F.lit(1)).alias("ties"))
    long = numbered.join(ties, ["score", "suspicion"]).withColumn(
        "avg_rank", F.col("first_rank") + (F.col("ties") - 1) / 2.0)
    sums = long.groupBy("score").agg(
        F.count("*").alias("n_ranked"),
        F.sum("label").alias("n_positive"),
        F.sum(F.when(F.col("label") == 1, F.col("avg_rank")).otherwise(0.0)).alias("rank_sum"),
        *[F.sum(F.when(F.col("rank") <= k, F.col("label")).otherwise(0)).alias(f"hits_{k}") for k in ks],
    ).collect()
    records = []
    for row in sorted(sums, key=lambda r: score_names.index(r["score"])):
        n_ranked, n_pos = int(row["n_ranked"]), int(row["n_positive"] or 0)
        auc = auc_from_rank_sum(float(row["rank_sum"] or 0.0), n_pos, n_ranked - n_pos)
        for k in ks:
            k_eff = min(k, n_ranked)
            records.append({"score": row["score"], "k": k_eff, "k_requested": k,
                            "precision_at_k": int(row[f"hits_{k}"] or 0) / k_eff if k_eff else math.nan,
                            "auc": auc, "n_positive": n_pos, "n_ranked": n_ranked})
    return pd.DataFrame.from_records(records, columns=RESULT_COLUMNS[1:])


def calibrate(spark, cfg: AuditConfig, run_id: str, ks=K_VALUES, tables: Tables | None = None,
              scratch: str | None = None) -> pd.DataFrame:
    """Per score precision@k and AUC against the corpus route; stored in ``rank_calibration``.

    Returns an empty frame (and writes nothing) when the run has no passage_occurrences."""
    from pyspark.sql import functions as F

    tables = tables or Tables(spark, cfg)
    positives = positive_samples(tables, run_id)
    if positives is None:
        log.info("run %s has no passage_occurrences: calibration needs the corpus route on the same run", run_id)
        return pd.DataFrame(columns=RESULT_COLUMNS)
    candidates = tables.read("candidates").where(F.col("run_id") == run_id)
    result = calibration_frame(candidates, positives, list(cfg.rank.scores), ks, scratch=scratch)
    result.insert(0, "run_id", run_id)
    if not result.empty:
        stored = result.assign(computed_at=datetime.now(timezone.utc).replace(tzinfo=None))
        stored = stored.astype({"k": "int32", "k_requested": "int32", "n_positive": "int64", "n_ranked": "int64"})
        stored["auc"] = stored["auc"].astype("float64")
        df = spark.createDataFrame(stored).withColumn(  # a missing AUC is NULL, not NaN
            "auc", F.when(F.isnan("auc"), None).otherwise(F.col("auc")))
        tables.replace_run("rank_calibration", df, run_id)
    return result
