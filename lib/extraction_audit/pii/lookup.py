"""Look sample values up in the corpus: index first, then a bounded second-chance search.

For every distinct (entity_type, value_key) tagged in a run:
  1. ``pii_corpus_index`` gives doc_count and example documents when a corpus-side
     detector tagged the value (``corpus_lookup = 'index'``);
  2. otherwise, up to ``pii.corpus_search_limit`` values (checksummed identifiers first,
     names last, then by value_key) are searched for as text in the corpus
     (``search.py``): ``'search'`` when found, ``'not_found'`` when not;
  3. values beyond the limit are ``'not_searched'`` with ``in_corpus`` NULL, counted in
     the stats, never reported as absent.

Linkage: for an identifier emitted next to a name, the documents holding each are joined on
doc_id; ``linked_doc_count`` is the number of documents holding both.

Reads: ``pii_corpus_index``, ``pii_corpus_doc_values``, ``corpus_documents``.
"""

from __future__ import annotations

import logging
import time

from ..tables import Tables
from .corpus_index import example_doc_ids
from .detectors import PRIORITY
from .search import SEARCH_HITS_DDL, search_corpus

log = logging.getLogger(__name__)

KEYS = ["entity_type", "value_key"]


def _search_priority():
    """Checksummed identifiers first, then formats, then free-text names last."""
    from pyspark.sql import functions as F

    expr = F.lit(0)  # custom types (not in PRIORITY) first: the user asked for them
    for i, name in enumerate(PRIORITY):
        expr = F.when(F.col("entity_type") == name, F.lit(i)).otherwise(expr)
    return expr


def corpus_lookup(spark, tables: Tables, corpus_id: str, detections, search_limit: int,
                  n_examples: int):
    """Returns (lookup_df keyed by KEYS, doc_hits_df (entity_type, value_key, doc_id),
    search_hits_df (persisted: the caller unpersists it after writing), stats).

    ``detections`` needs entity_type, value_key and search_requirements.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.monotonic()
    in_corpus = F.col("corpus_id") == corpus_id
    keys = detections.select(*KEYS).distinct()
    index = tables.read("pii_corpus_index").where(in_corpus).select(*KEYS, "doc_count", "example_doc_ids")
    indexed = keys.join(index, KEYS, "inner")
    missing = keys.join(index.select(*KEYS), KEYS, "left_anti")

    counts = (keys.join(index.select(*KEYS).withColumn("_indexed", F.lit(True)), KEYS, "left")
              .agg(F.count("*").alias("all"), F.count("_indexed").alias("indexed")).first())
    stats = {"distinct_values": counts["all"], "found_in_index": counts["indexed"],
             "missing_from_index": counts["all"] - counts["indexed"]}

    to_search = []
    if search_limit > 0 and stats["missing_from_index"]:
        chosen = (detections.join(missing, KEYS, "left_semi")
                  .groupBy(*KEYS).agg(F.first("search_requirements").alias("search_requirements"))
                  .withColumn("_priority", _search_priority())
                  .orderBy("_priority", "value_key").limit(search_limit))
        to_search = [(r["entity_type"], r["value_key"], [list(v) for v in r["search_requirements"]])
                     for r in chosen.collect()]
    stats["searched"] = len(to_search)
    stats["not_searched"] = stats["missing_from_index"] - len(to_search)
    if stats["not_searched"]:
        log.warning("%d values missing from pii_corpus_index were not searched (pii.corpus_search_limit=%d); "
                    "their in_corpus is NULL", stats["not_searched"], search_limit)

    if to_search:
        docs = tables.read("corpus_documents").where(in_corpus)
        search_hits = search_corpus(docs, to_search).persist(StorageLevel.MEMORY_AND_DISK)
    else:
        search_hits = spark.createDataFrame([], SEARCH_HITS_DDL)
    searched = spark.createDataFrame([(e, k) for e, k, _ in to_search], "entity_type STRING, value_key STRING")

    search_counts = (search_hits.groupBy(*KEYS).agg(F.count("*").alias("search_doc_count"))
                     .join(example_doc_ids(search_hits, n_examples).withColumnRenamed(
                         "example_doc_ids", "search_examples"), KEYS))
    lookup = (keys.join(indexed, KEYS, "left")
              .join(search_counts, KEYS, "left")
              .join(searched.withColumn("_searched", F.lit(True)), KEYS, "left"))
    status = (F.when(F.col("doc_count").isNotNull(), F.lit("index"))
              .when(F.col("search_doc_count").isNotNull(), F.lit("search"))
              .when(F.col("_searched"), F.lit("not_found"))
              .otherwise(F.lit("not_searched")))
    lookup = lookup.select(
        *KEYS,
        status.alias("corpus_lookup"),
        F.when(status.isin("index", "search"), F.lit(True))
         .when(status == "not_found", F.lit(False)).alias("in_corpus"),
        F.coalesce("doc_count", "search_doc_count",
                   F.when(status == "not_found", F.lit(0)).cast("bigint")).alias("corpus_doc_count"),
        F.coalesce("example_doc_ids", "search_examples").alias("example_doc_ids"),
    )

    doc_hits = (tables.read("pii_corpus_doc_values").where(in_corpus).select(*KEYS, "doc_id")
                .join(indexed.select(*KEYS), KEYS, "left_semi")
                .unionByName(search_hits.select(*KEYS, "doc_id")))
    stats["seconds"] = round(time.monotonic() - started, 3)
    return lookup, doc_hits, search_hits, stats


def name_linkage(pairs, doc_hits, lookup):
    """(entity_type, value_key, linked_name_key) -> linked_doc_count and linked_in_same_doc.

    NULL when either value's corpus presence is unknown (not searched)."""
    from pyspark.sql import functions as F

    names = doc_hits.where(F.col("entity_type") == "person_name").select(
        F.col("value_key").alias("linked_name_key"), "doc_id")
    both = (pairs.join(doc_hits, KEYS).join(names, ["linked_name_key", "doc_id"])
            .groupBy(*KEYS, "linked_name_key").agg(F.countDistinct("doc_id").alias("_both")))
    id_status = lookup.select(*KEYS, F.col("corpus_lookup").alias("_id_status"))
    name_status = lookup.where(F.col("entity_type") == "person_name").select(
        F.col("value_key").alias("linked_name_key"), F.col("corpus_lookup").alias("_name_status"))
    unknown = (F.col("_id_status") == "not_searched") | (F.col("_name_status") == "not_searched")
    count = F.coalesce(F.col("_both"), F.lit(0)).cast("bigint")
    return (pairs.join(both, [*KEYS, "linked_name_key"], "left")
            .join(id_status, KEYS, "left").join(name_status, "linked_name_key", "left")
            .select(*KEYS, "linked_name_key",
                    F.when(unknown, F.lit(None)).otherwise(count).alias("linked_doc_count"),
                    F.when(unknown, F.lit(None)).otherwise(count > 0).alias("linked_in_same_doc")))
