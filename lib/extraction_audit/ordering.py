"""Row numbers and running sums in a global order, without a single-partition window.

``Window.orderBy(...)`` with no ``partitionBy`` moves every row to one task (Spark warns
"No Partition Defined for Window operation"), which caps a run at what one task holds.
Here the rows are range-partitioned by the order instead; each range is numbered by a
window over that range only, and the totals of the preceding ranges (one row per range,
collected to the driver) are added.  The ranged rows are materialised once (Parquet in the
step's scratch folder, else a local checkpoint) so both passes see the same ranges.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd


def ordered(df, order: Sequence, *, partition_by: Sequence[str] = (), row_number: str | None = None,
            running_sums: dict | None = None, scratch: str | None = None, parts: int | None = None,
            totals: dict | None = None):
    """``df`` plus ``row_number`` (1-based, per ``partition_by`` group, in ``order``) and
    ``running_sums`` (``{name: column}``: inclusive prefix sums in the same order).
    ``totals``: a dict to receive each running sum's grand total, which the ranges' totals
    give without another job.

    ``order`` must be a total order within each group (end it with a unique column)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spark = df.sparkSession
    running_sums = dict(running_sums or {})
    parts = parts or int(spark.conf.get("spark.sql.shuffle.partitions", "8"))
    keys = [F.col(c) for c in partition_by] + list(order)
    summed = {f"_ord_v_{i}": expr for i, expr in enumerate(running_sums.values())}
    ranged = (df.select("*", *[expr.alias(name) for name, expr in summed.items()])
              .repartitionByRange(parts, *keys).withColumn("_ord_range", F.spark_partition_id()))
    if scratch:
        from .scratch import materialise

        ranged = materialise(ranged, f"{scratch.rstrip('/')}/_ordered_{row_number or 'sums'}")
    else:
        ranged = ranged.localCheckpoint(eager=True)

    group = ["_ord_range", *partition_by]
    per_range = ranged.groupBy(*group).agg(F.count(F.lit(1)).alias("_ord_n"),
                                           *[F.sum(name).alias(f"{name}_t") for name in summed])
    range_totals = per_range.toPandas()
    if totals is not None:
        totals.update({name: range_totals[f"{tmp}_t"].sum() for name, tmp in zip(running_sums, summed)})
    offsets = _preceding_totals(range_totals, list(partition_by), ["_ord_n", *[f"{n}_t" for n in summed]])
    # Empty input: no ranges, but the join below still needs every offset column.
    offsets_df = spark.createDataFrame(offsets) if len(offsets) else spark.createDataFrame([], per_range.schema)
    out = ranged.join(F.broadcast(offsets_df), group, "left")
    w = Window.partitionBy(*group).orderBy(*order)
    if row_number:
        out = out.withColumn(row_number, (F.coalesce("_ord_n", F.lit(0)) + F.row_number().over(w)).cast("long"))
    running = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    for (name, _), tmp in zip(running_sums.items(), summed):
        out = out.withColumn(name, F.coalesce(F.col(f"{tmp}_t"), F.lit(0)) + F.sum(tmp).over(running))
    helpers = ["_ord_range", "_ord_n", *summed, *[f"{n}_t" for n in summed]]
    return out.drop(*helpers)


def _preceding_totals(totals: pd.DataFrame, partition_by: list[str], value_columns: list[str]) -> pd.DataFrame:
    """For each (range, group): the sum of the values of the group's earlier ranges."""
    if totals.empty:
        return totals
    totals = totals.sort_values(["_ord_range"]).reset_index(drop=True)
    if partition_by:
        grouped = totals.groupby(partition_by, dropna=False, sort=False)[value_columns]
        before = grouped.cumsum() - totals[value_columns]
    else:
        before = totals[value_columns].cumsum() - totals[value_columns]
    out = totals[["_ord_range", *partition_by]].copy()
    for c in value_columns:
        out[c] = before[c].fillna(0).astype("int64") if c == "_ord_n" else before[c].fillna(0)
    return out
