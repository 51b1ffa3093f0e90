"""The metrics step: ``run_metrics`` rows at budget checkpoints (the growth curve).

Reads ``samples``, ``runs``, ``passage_occurrences``, ``extracted_passages``,
``matched_windows`` and ``pii_findings``; writes ``run_metrics`` (``replaceWhere run_id``).
It depends on match and pii, so the PII columns and the distinct n-grams are always from
the same finished steps, whichever process ran them.

A checkpoint holds the samples, in generation order (``sample_id``), whose cumulative
generated tokens fit in it.  Each sample gets the index of the first checkpoint holding
it; each distinct thing (passage, n-gram, personal-data value) gets the first checkpoint
of any sample that holds it; then every count is a cumulative sum over the (few)
checkpoints.  No step crosses all samples with all checkpoints, and no window is
unpartitioned (``ordering.py`` computes the cumulative tokens).
"""

from __future__ import annotations

import math

import pandas as pd

from .config import AuditConfig
from .ordering import ordered
from .regions import REGION_COUNT_COLUMNS, document_rollup, region_windows, regions_per_checkpoint, whole_run_regions
from .scratch import materialise
from .tables import Tables

COUNT_COLUMNS = ("generated_tokens", "n_samples", "extracted_tokens", "distinct_passages",
                 "distinct_rare_passages", "distinct_ngrams", "pii_found", "pii_in_corpus")


def budget_checkpoints(budget: int) -> list[int]:
    """1%, 10% and 100% of the budget and every power of ten in between."""
    budget = max(int(budget), 1)
    points = {max(1, budget // 100), max(1, budget // 10), budget}
    lo = budget / 100
    k = math.ceil(math.log10(max(lo, 1)))
    while 10 ** k < budget:
        if 10 ** k > lo:
            points.add(10 ** k)
        k += 1
    return sorted(points)


def compute_run_metrics(spark, cfg: AuditConfig, run_id: str, tables: Tables, run: dict | None = None,
                        scratch: str | None = None) -> list[dict]:
    """Write and return the run's ``run_metrics`` rows, smallest checkpoint first."""
    from pyspark.sql import functions as F

    run = run or {}
    samples = tables.read("samples").where(F.col("run_id") == run_id).select("sample_id", "n_tokens")
    sums: dict = {}
    cum = ordered(samples, [F.col("sample_id").asc()], running_sums={"cum_tokens": F.col("n_tokens")},
                  scratch=scratch, totals=sums)
    total = int(sums["cum_tokens"] or 0)
    budget = int(run.get("budget_tokens") or total or 1)
    # The whole run is always a row: a run that stopped short of its budget, or overshot it
    # (the last chunk crosses the budget), still has one row holding every sample.
    points = sorted(set(budget_checkpoints(budget)) | ({total} if total > 0 else set()))
    whole = total if total > 0 else points[-1]
    first_cp = None
    for i in reversed(range(len(points))):
        first_cp = F.when(F.col("cum_tokens") <= points[i], F.lit(i)).otherwise(
            first_cp if first_cp is not None else F.lit(None))
    per_sample = cum.select("sample_id", "n_tokens", first_cp.alias("cp")).where(F.col("cp").isNotNull())
    # Written once: the aggregations below join it five times, and each join would otherwise
    # recompute the running sums (a window and a broadcast of the range offsets).
    per_sample = (materialise(per_sample, f"{scratch}/per_sample_checkpoints") if scratch
                  else per_sample.localCheckpoint(eager=True))

    rare = cfg.match.rare_doc_count
    passages = (tables.read("extracted_passages").where(F.col("run_id") == run_id)
                .where(~F.col("is_low_entropy") & ~F.coalesce(F.col("is_prompt_copy"), F.lit(False)))
                .select("passage_id", "doc_count"))
    occ = (tables.read("passage_occurrences").where(F.col("run_id") == run_id)
           .select("sample_id", "start", "end", "passage_id").join(passages, "passage_id")
           .join(per_sample.select("sample_id", "cp"), "sample_id"))
    windows = (tables.read("matched_windows").where(F.col("run_id") == run_id)
               .select("sample_id", "pos", "ngram_hash", "doc_id", "doc_pos")
               .join(per_sample.select("sample_id", "cp"), "sample_id"))
    pii = (tables.read("pii_findings").where(F.col("run_id") == run_id).select("sample_id", "value_key", "in_corpus")
           .join(per_sample.select("sample_id", "cp"), "sample_id"))

    first_seen = {
        "distinct_passages": occ.groupBy("passage_id").agg(F.min("cp").alias("cp")),
        "distinct_rare_passages": occ.where(F.col("doc_count").between(1, rare))
        .groupBy("passage_id").agg(F.min("cp").alias("cp")),
        "distinct_ngrams": windows.groupBy("ngram_hash").agg(F.min("cp").alias("cp")),
        "pii_found": pii.groupBy("value_key").agg(F.min("cp").alias("cp")),
        "pii_in_corpus": pii.where(F.col("in_corpus")).groupBy("value_key").agg(F.min("cp").alias("cp")),
    }
    per_cp = [
        per_sample.groupBy("cp").agg(F.sum("n_tokens").alias("generated_tokens"),
                                     F.count(F.lit(1)).alias("n_samples")),
        occ.groupBy("cp").agg(F.sum(F.col("end") - F.col("start")).alias("extracted_tokens")),
        *[df.groupBy("cp").agg(F.count(F.lit(1)).alias(name)) for name, df in first_seen.items()],
    ]
    union = None
    for df in per_cp:  # one small row per checkpoint and measure, gathered in one job
        long = df.select("cp", F.explode(F.create_map(*[x for c in df.columns if c != "cp"
                                                       for x in (F.lit(c), F.col(c).cast("long"))])))
        union = long if union is None else union.unionByName(long)
    rows = union.toPandas()
    table = _cumulative(rows, points)

    counts = _write_regions(spark, tables, run, run_id, windows, occ, rare, len(points), scratch,
                            any_passage=int(table["distinct_passages"].iloc[-1]) > 0)
    for c in REGION_COUNT_COLUMNS:
        table[c] = [int(counts[c].get(i, 0)) if len(counts) else 0 for i in range(len(points))]

    table["run_id"] = run_id
    table["is_whole_run"] = table["budget_tokens"] == whole
    table["share_extracted"] = [e / g if g > 0 else 0.0 for e, g in zip(table["extracted_tokens"],
                                                                       table["generated_tokens"])]
    metrics = spark.createDataFrame(table)
    tables.replace_run("run_metrics", metrics, run_id)
    return table.sort_values("budget_tokens").to_dict(orient="records")


def _write_regions(spark, tables: Tables, run: dict, run_id: str, windows, occ, rare: int, checkpoints: int,
                   scratch: str | None, any_passage: bool) -> pd.DataFrame:
    """Write ``extracted_regions`` and ``extracted_documents`` and return the per-checkpoint
    region counts (indexed by checkpoint).  A run without counted passages has no regions:
    its (empty) slices are written without computing anything."""
    from pyspark.sql import functions as F

    from .tables import TABLES

    if not any_passage:
        for name in ("extracted_regions", "extracted_documents"):
            tables.replace_run(name, spark.createDataFrame([], TABLES[name].schema), run_id)
        return pd.DataFrame(columns=list(REGION_COUNT_COLUMNS))
    n = _match_n(tables, run)
    rw = (materialise(region_windows(windows, occ, rare), f"{scratch}/region_windows") if scratch
          else region_windows(windows, occ, rare).cache())
    counts = regions_per_checkpoint(rw, n, checkpoints).toPandas().set_index("cp")
    tables.replace_run("extracted_regions", whole_run_regions(rw, n).withColumn("run_id", F.lit(run_id)), run_id)
    tables.replace_run("extracted_documents",
                       document_rollup(tables, tables.read("extracted_regions").where(F.col("run_id") == run_id),
                                       rw, run_id, run.get("corpus_id")), run_id)
    if not scratch:
        rw.unpersist()
    return counts


def _match_n(tables: Tables, run: dict) -> int:
    """The n the run was matched with (its config), else the configured index's."""
    import json

    try:
        return int(json.loads(run.get("config_json") or "{}")["index"]["n"])
    except (KeyError, TypeError, ValueError):
        return int(tables.cfg.index.n)


def _cumulative(rows: pd.DataFrame, points: list[int]) -> pd.DataFrame:
    """Per-checkpoint increments (long form: cp, key, value) -> cumulative counts per checkpoint."""
    wide = (rows.pivot_table(index="cp", columns="key", values="value", aggfunc="sum")
            if len(rows) else pd.DataFrame())
    wide = wide.reindex(index=range(len(points)), columns=list(COUNT_COLUMNS)).fillna(0).astype("int64").cumsum()
    wide.insert(0, "budget_tokens", [int(p) for p in points])
    return wide.reset_index(drop=True)
