"""Source regions: extracted text rolled up by where it sits in the corpus.

Distinct passages count distinct *token sequences*; a model that emits six overlapping
fragments of one helpdesk ticket has six passages but leaked one piece of training text.
Each verified window carries the corpus location it was verified at (``matched_windows``
``doc_id``, ``doc_pos``: chosen by the match step, one copy per window); the spans
``[doc_pos, doc_pos + n)`` of the windows inside counted passage occurrences (not filler,
not prompt copies) are merged per document where they overlap or touch, with the same
gaps-and-islands rule that turns covered sample positions into occurrences.  A merged span
is a **region**; its length counts corpus tokens extracted (the union of matched spans).

Reads ``matched_windows``, ``passage_occurrences``, ``extracted_passages`` (through the
metrics step's frames), ``corpus_documents``, ``pii_findings``, ``pii_corpus_doc_values``.
Writes ``extracted_regions`` and ``extracted_documents`` (``replaceWhere run_id``), called
by the metrics step, which also puts the per-checkpoint region counts in ``run_metrics``.
"""

from __future__ import annotations

from .tables import Tables

REGION_COUNT_COLUMNS = ("distinct_regions", "distinct_rare_regions", "corpus_tokens_extracted")


def region_windows(windows, occ, rare_doc_count: int):
    """Verified windows ``(sample_id, pos, doc_id, doc_pos, cp)`` inside counted occurrences
    ``(sample_id, start, end, passage_id, doc_count)``: one row per window with its passage,
    checkpoint and whether the passage is rare (stitched passages, doc_count 0, never are)."""
    from pyspark.sql import functions as F

    o = occ.select("sample_id", F.col("start").alias("_s"), F.col("end").alias("_e"), "passage_id", "doc_count")
    return (windows.where(F.col("doc_id").isNotNull()).join(o, "sample_id")
            .where((F.col("pos") >= F.col("_s")) & (F.col("pos") < F.col("_e")))
            .select("sample_id", "passage_id", "doc_id", "doc_pos", "cp", "doc_count",
                    F.col("doc_count").between(1, rare_doc_count).alias("is_rare")))


def with_islands(spans, n: int, keys: tuple[str, ...] = ()):
    """Add ``_island``: spans ``[doc_pos, doc_pos + n)`` of one document (and ``keys``) that
    overlap or touch share a number.  All spans have length n, so sorted by start a span
    opens a new island exactly when it starts after the previous start + n."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(*keys, "doc_id").orderBy("doc_pos")
    new = F.coalesce((F.col("doc_pos") > F.lag("doc_pos").over(w) + n).cast("int"), F.lit(1))
    return (spans.withColumn("_new", new)
            .withColumn("_island", F.sum("_new").over(w.rowsBetween(Window.unboundedPreceding, 0)))
            .drop("_new"))


def regions_per_checkpoint(rw, n: int, checkpoints: int):
    """``(cp, distinct_regions, distinct_rare_regions, corpus_tokens_extracted)`` for every
    checkpoint index.  Regions are not additive (a later sample can bridge two), so each
    matched corpus position is repeated for the checkpoints that hold it (at most a handful)
    and merged per checkpoint; the input is matches only, never all samples."""
    from pyspark.sql import functions as F

    positions = (rw.groupBy("doc_id", "doc_pos")
                 .agg(F.min("cp").alias("first_cp"),
                      F.min(F.when(F.col("is_rare"), F.col("cp"))).alias("rare_cp")))
    at = (positions.select("doc_id", "doc_pos", "rare_cp",
                           F.explode(F.sequence("first_cp", F.lit(checkpoints - 1))).alias("cp"))
          .withColumn("rare", F.coalesce(F.col("rare_cp") <= F.col("cp"), F.lit(False))))
    regions = (with_islands(at, n, ("cp",)).groupBy("cp", "doc_id", "_island")
               .agg(F.min("doc_pos").alias("s"), (F.max("doc_pos") + n).alias("e"), F.max("rare").alias("rare")))
    return regions.groupBy("cp").agg(
        F.count(F.lit(1)).alias("distinct_regions"),
        F.count_if(F.col("rare")).alias("distinct_rare_regions"),
        F.sum(F.col("e") - F.col("s")).alias("corpus_tokens_extracted"))


def whole_run_regions(rw, n: int):
    """One row per region of the whole run (the ``extracted_regions`` columns without run_id)."""
    from pyspark.sql import functions as F

    return (with_islands(rw, n).groupBy("doc_id", "_island")
            .agg(F.min("doc_pos").alias("region_start"), (F.max("doc_pos") + n).alias("region_end"),
                 F.countDistinct("passage_id").alias("n_passages"),
                 F.countDistinct("sample_id").alias("n_samples"),
                 F.min("doc_count").alias("min_doc_count"), F.max("is_rare").alias("is_rare"))
            .select("doc_id", "region_start", "region_end",
                    (F.col("region_end") - F.col("region_start")).alias("n_tokens"),
                    "n_passages", "n_samples", "min_doc_count", "is_rare"))


def document_rollup(tables: Tables, regions, rw, run_id: str, corpus_id: str | None):
    """Per-document rollup of the regions: source, length, tokens extracted, samples, and the
    personal-data types that the run's samples emitted and the corpus PII index holds for
    that document (empty when the corpus was not scanned)."""
    from pyspark.sql import functions as F

    per_doc = (regions.groupBy("doc_id")
               .agg(F.count(F.lit(1)).alias("regions"), F.count_if("is_rare").alias("rare_regions"),
                    F.sum("n_tokens").alias("tokens_extracted"))
               .join(rw.groupBy("doc_id").agg(F.countDistinct("passage_id").alias("n_passages"),
                                              F.countDistinct("sample_id").alias("n_samples")), "doc_id"))
    ids = per_doc.select("doc_id")
    docs = tables.read("corpus_documents")
    if corpus_id is not None:
        docs = docs.where(F.col("corpus_id") == corpus_id)
    docs = (docs.join(F.broadcast(ids), "doc_id")
            .groupBy("doc_id").agg(F.first("source").alias("source"), F.max("n_tokens").alias("doc_tokens")))
    pii = F.array().cast("array<string>")
    types = None
    if tables.exists("pii_findings") and tables.exists("pii_corpus_doc_values"):
        emitted = (tables.read("pii_findings").where(F.col("run_id") == run_id)
                   .select("value_key", "entity_type").distinct())
        held = tables.read("pii_corpus_doc_values")
        if corpus_id is not None:
            held = held.where(F.col("corpus_id") == corpus_id)
        types = (held.select("doc_id", "value_key", "entity_type").join(F.broadcast(ids), "doc_id")
                 .join(emitted, ["value_key", "entity_type"])
                 .groupBy("doc_id").agg(F.array_sort(F.collect_set("entity_type")).alias("pii_types")))
    out = per_doc.join(docs, "doc_id", "left")
    if types is not None:
        out = out.join(types, "doc_id", "left")
    return out.select(
        F.lit(run_id).alias("run_id"), "doc_id", "source", "doc_tokens", "regions", "rare_regions",
        "tokens_extracted",
        (F.col("tokens_extracted") / F.nullif(F.col("doc_tokens"), F.lit(0))).alias("share_of_document"),
        "n_passages", "n_samples",
        (F.coalesce("pii_types", pii) if types is not None else pii).alias("pii_types"))
