"""Count each sample value's corpus documents by searching for the value itself.

For every distinct (entity_type, value_key) tagged in a run, up to ``pii.corpus_search_limit``
values (checksummed identifiers first, names last, then by value_key) are searched for in
the corpus text in all their surface forms (``search.py``): one scan of the corpus per run,
with the run's value set travelling to every task.  The hits give ``corpus_doc_count`` and
``example_doc_ids`` (``corpus_lookup = 'search'``, or ``'not_found'`` with a count of 0).

``pii_corpus_index`` (the corpus-side detectors) never decides a count: it is recorded
beside it as ``index_doc_count`` (what re-detection alone would have said; the stats count
the values it under-counts), and for values beyond the limit it can only say that the value
is present (``'index_only'``: ``in_corpus`` true, ``corpus_doc_count`` NULL).  Values beyond
the limit that the index does not hold are ``'not_searched'`` with ``in_corpus`` NULL,
counted in the stats, never reported as absent.

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
COUNTED = ("search", "not_found")  # corpus_lookup values whose corpus_doc_count is exact


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
    the persisted frames (the caller unpersists them after writing), stats).

    ``lookup`` and ``doc_hits`` are persisted: the findings query uses each several times
    (findings, name linkage, index-only document hits), and recomputing them there put six
    copies of the lookup's joins (about forty broadcast jobs) into one write.

    ``detections`` needs entity_type, value_key and search_requirements.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.monotonic()
    in_corpus = F.col("corpus_id") == corpus_id
    index = (tables.read("pii_corpus_index").where(in_corpus)
             .select(*KEYS, F.col("doc_count").alias("index_doc_count"),
                     F.col("example_doc_ids").alias("index_examples")))
    # The run's distinct values with their forms: small (one run), collected once.
    values = (detections.groupBy(*KEYS).agg(F.first("search_requirements").alias("search_requirements"))
              .withColumn("_priority", _search_priority())
              .orderBy("_priority", "value_key"))
    chosen = values.limit(search_limit).collect() if search_limit > 0 else []
    to_search = [(r["entity_type"], r["value_key"], [list(v) for v in r["search_requirements"]])
                 for r in chosen]
    keys = detections.select(*KEYS).distinct()

    if to_search:
        docs = tables.read("corpus_documents").where(in_corpus)
        search_hits = search_corpus(docs, to_search).persist(StorageLevel.MEMORY_AND_DISK)
    else:
        search_hits = spark.createDataFrame([], SEARCH_HITS_DDL)
    searched = spark.createDataFrame([(e, k) for e, k, _ in to_search], "entity_type STRING, value_key STRING")

    search_counts = (search_hits.groupBy(*KEYS).agg(F.count("*").alias("search_doc_count"))
                     .join(example_doc_ids(search_hits, n_examples).withColumnRenamed(
                         "example_doc_ids", "search_examples"), KEYS))
    joined = (keys.join(index, KEYS, "left")
              .join(search_counts, KEYS, "left")
              .join(searched.withColumn("_searched", F.lit(True)), KEYS, "left"))
    status = (F.when(F.col("_searched") & F.col("search_doc_count").isNotNull(), F.lit("search"))
              .when(F.col("_searched"), F.lit("not_found"))
              .when(F.col("index_doc_count").isNotNull(), F.lit("index_only"))
              .otherwise(F.lit("not_searched")))
    lookup = joined.select(
        *KEYS,
        status.alias("corpus_lookup"),
        F.when(status.isin("search", "index_only"), F.lit(True))
         .when(status == "not_found", F.lit(False)).alias("in_corpus"),
        F.when(status == "search", F.col("search_doc_count"))
         .when(status == "not_found", F.lit(0)).cast("bigint").alias("corpus_doc_count"),
        F.when(status == "search", F.col("search_examples"))
         .when(status == "index_only", F.col("index_examples")).alias("example_doc_ids"),
        F.coalesce("index_doc_count", F.lit(0)).cast("bigint").alias("index_doc_count"),
    ).persist(StorageLevel.MEMORY_AND_DISK)

    row = lookup.agg(
        F.count("*").alias("distinct_values"),
        F.count(F.when(F.col("corpus_lookup").isin(*COUNTED), True)).alias("searched"),
        F.count(F.when(F.col("corpus_lookup") == "search", True)).alias("found_by_search"),
        F.count(F.when(F.col("corpus_lookup") == "index_only", True)).alias("index_only"),
        F.count(F.when(F.col("corpus_lookup") == "not_searched", True)).alias("not_searched"),
        F.count(F.when(F.col("corpus_lookup").isin(*COUNTED) & (F.col("index_doc_count") > 0), True)
                ).alias("found_in_index"),
        F.count(F.when(F.col("corpus_lookup").isin(*COUNTED)
                       & (F.col("corpus_doc_count") > F.col("index_doc_count")), True)).alias("index_undercounted"),
        F.count(F.when(F.col("corpus_lookup").isin(*COUNTED)
                       & (F.col("corpus_doc_count") < F.col("index_doc_count")), True)).alias("search_below_index"),
        F.sum(F.when(F.col("corpus_lookup").isin(*COUNTED), F.col("corpus_doc_count"))).alias("search_doc_total"),
        F.sum(F.when(F.col("corpus_lookup").isin(*COUNTED), F.col("index_doc_count"))).alias("index_doc_total"),
    ).first().asDict()  # fills the cache: the joins run once
    stats = {k: int(v or 0) for k, v in row.items()}
    if stats["not_searched"] or stats["index_only"]:
        log.warning("%d values were not searched (pii.corpus_search_limit=%d): %d have only the corpus index's "
                    "presence (corpus_doc_count NULL), %d have in_corpus NULL",
                    stats["not_searched"] + stats["index_only"], search_limit, stats["index_only"],
                    stats["not_searched"])
    if stats["search_below_index"]:
        log.warning("%d values were found in fewer documents by the text search than by the corpus detectors: "
                    "a surface form is missing from normalise.search_requirements", stats["search_below_index"])

    index_docs = (tables.read("pii_corpus_doc_values").where(in_corpus).select(*KEYS, "doc_id")
                  .join(lookup.where(F.col("corpus_lookup") == "index_only").select(*KEYS), KEYS, "left_semi"))
    doc_hits = search_hits.select(*KEYS, "doc_id").unionByName(index_docs).persist(StorageLevel.MEMORY_AND_DISK)
    stats["seconds"] = round(time.monotonic() - started, 3)
    return lookup, doc_hits, [search_hits, lookup, doc_hits], stats


def name_linkage(pairs, doc_hits, lookup):
    """(entity_type, value_key, linked_name_key) -> linked_doc_count and linked_in_same_doc.

    NULL when either value was not searched (``linked_in_same_doc`` is still true when the
    corpus index shows both in one document)."""
    from pyspark.sql import functions as F

    names = doc_hits.where(F.col("entity_type") == "person_name").select(
        F.col("value_key").alias("linked_name_key"), "doc_id")
    both = (pairs.join(doc_hits, KEYS).join(names, ["linked_name_key", "doc_id"])
            .groupBy(*KEYS, "linked_name_key").agg(F.countDistinct("doc_id").alias("_both")))
    id_status = lookup.select(*KEYS, F.col("corpus_lookup").alias("_id_status"))
    name_status = lookup.where(F.col("entity_type") == "person_name").select(
        F.col("value_key").alias("linked_name_key"), F.col("corpus_lookup").alias("_name_status"))
    # exact only when both values were searched; the index alone can prove a link, not its absence
    unknown = (~F.coalesce(F.col("_id_status").isin(*COUNTED), F.lit(False))
               | ~F.coalesce(F.col("_name_status").isin(*COUNTED), F.lit(False)))
    count = F.coalesce(F.col("_both"), F.lit(0)).cast("bigint")
    return (pairs.join(both, [*KEYS, "linked_name_key"], "left")
            .join(id_status, KEYS, "left").join(name_status, "linked_name_key", "left")
            .select(*KEYS, "linked_name_key",
                    F.when(unknown, F.lit(None)).otherwise(count).alias("linked_doc_count"),
                    F.when(count > 0, F.lit(True)).when(unknown, F.lit(None))
                     .otherwise(F.lit(False)).alias("linked_in_same_doc")))
