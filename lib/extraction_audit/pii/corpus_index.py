"""The corpus-side personal-data index, built incrementally like the n-gram index.

The sample detectors run over every corpus document once; each document's distinct values
(keyed hashes only) go to ``pii_corpus_doc_values`` and a marker to ``pii_corpus_scanned``.
A later build scans only documents without a marker for the current detector settings, then
recomputes ``pii_corpus_index`` (doc_count, occurrence_count, example_doc_ids) for just the
values those documents contain, from the per-document rows, so counts stay exact.  When
the detector settings or the HMAC key change, keys are no longer comparable: the corpus's
rows are dropped and everything is rescanned.  Documents removed from corpus_documents
are not removed from the index (the corpus is append-only, as in the n-gram index).

Reads: ``corpus_documents``.  Writes: ``pii_corpus_doc_values``, ``pii_corpus_scanned``,
``pii_corpus_index``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Iterator

import pandas as pd

from ..config import AuditConfig
from ..errors import UserFacingError
from ..tables import Tables
from .detectors import DetectionSettings, get_detector_set
from .keys import value_key

log = logging.getLogger(__name__)

DOC_VALUES_DDL = ("corpus_id STRING, doc_id STRING, entity_type STRING, value_key STRING, "
                  "occurrences INT, detector STRING")


def doc_value_batches(settings: DetectionSettings):
    """mapInPandas kernel: (corpus_id, doc_id, text) -> one row per distinct value per doc."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        detectors = get_detector_set(settings)
        for batch in batches:
            rows = []
            for corpus_id, doc_id, text in zip(batch["corpus_id"], batch["doc_id"], batch["text"]):
                counts: Counter = Counter()
                detector_of: dict = {}
                for hit in detectors.detect(text):
                    key = (hit.entity_type, value_key(settings.key, hit.entity_type, hit.normalised))
                    counts[key] += 1
                    detector_of.setdefault(key, hit.detector)
                rows.extend((corpus_id, doc_id, t, k, n, detector_of[(t, k)]) for (t, k), n in counts.items())
            yield pd.DataFrame(rows, columns=["corpus_id", "doc_id", "entity_type", "value_key",
                                              "occurrences", "detector"])

    return run


def example_doc_ids(rows_df, n: int, keys=("entity_type", "value_key")):
    """The n smallest doc_ids per value, without collecting a frequent value's whole list."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy(*keys).orderBy("doc_id")
    return (rows_df.select(*keys, "doc_id").withColumn("_rank", F.row_number().over(window))
            .where(F.col("_rank") <= n).groupBy(*keys)
            .agg(F.sort_array(F.collect_list("doc_id")).alias("example_doc_ids")))


def build_pii_corpus_index(spark, cfg: AuditConfig, tables: Tables | None = None,
                           corpus_id: str | None = None,
                           settings: DetectionSettings | None = None) -> dict:
    """Scan corpus documents not yet scanned with the current settings; return counts."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.monotonic()
    tables = tables or Tables(spark, cfg)
    corpus_id = corpus_id or cfg.corpus.id
    settings = settings or DetectionSettings.from_config(cfg)
    fingerprint = settings.fingerprint()
    for name in ("pii_corpus_doc_values", "pii_corpus_scanned", "pii_corpus_index"):
        tables.ensure(name)
    in_corpus = F.col("corpus_id") == corpus_id
    stats: dict = {"corpus_id": corpus_id, "scan_fingerprint": fingerprint, "rebuilt": False}

    docs = tables.read("corpus_documents").where(in_corpus).select("corpus_id", "doc_id", "text")
    scanned = tables.read("pii_corpus_scanned").where(in_corpus)
    stale = scanned.agg(F.count(F.when(F.col("scan_fingerprint") != fingerprint, True)).alias("n")).first()["n"]
    if stale:
        log.info("PII detector settings or key changed since the last build: rescanning corpus %s", corpus_id)
        for name in ("pii_corpus_doc_values", "pii_corpus_scanned", "pii_corpus_index"):
            tables.delete(name, in_corpus)
        stats["rebuilt"] = True
        scanned = tables.read("pii_corpus_scanned").where(in_corpus)

    # Distinct: two first scans of one corpus at once (two runs' pii steps) both append a
    # document's marker, and a document marked twice is still one document.
    seen = docs.join(scanned.select("doc_id").distinct().withColumn("_seen", F.lit(True)), "doc_id", "left")
    counts = seen.agg(F.count("*").alias("all"), F.count("_seen").alias("seen")).first()
    stats["documents_in_corpus"] = counts["all"]
    stats["documents_already_scanned"] = counts["seen"]
    stats["documents_scanned"] = counts["all"] - counts["seen"]
    if stats["documents_in_corpus"] == 0:
        raise UserFacingError(f"corpus {corpus_id!r} has no documents in corpus_documents; run "
                              f"`extraction-audit index` first (or check corpus.id)")
    if stats["documents_scanned"] == 0:
        stats.update(doc_values_added=0, values_updated=0, tagged_by_type={},
                     seconds=round(time.monotonic() - started, 3))
        return stats

    new_docs = seen.where(F.col("_seen").isNull()).drop("_seen")
    values = new_docs.mapInPandas(doc_value_batches(settings), DOC_VALUES_DDL).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        tables.merge("pii_corpus_doc_values", values, update=False)  # insert-only: rows are keyed facts
        by_type = values.groupBy("entity_type").agg(
            F.count("*").alias("rows"), F.sum("occurrences").alias("tagged"),
            F.countDistinct("value_key").alias("values")).collect()
        stats["doc_values_added"] = sum(r["rows"] for r in by_type)
        stats["values_updated"] = sum(r["values"] for r in by_type)
        stats["tagged_by_type"] = {r["entity_type"]: r["tagged"] for r in by_type}

        affected = values.select("entity_type", "value_key").distinct()
        rows = (tables.read("pii_corpus_doc_values").where(in_corpus)
                .join(affected, ["entity_type", "value_key"], "left_semi"))
        counts = rows.groupBy("entity_type", "value_key").agg(
            F.count("*").alias("doc_count"), F.sum("occurrences").cast("bigint").alias("occurrence_count"))
        index_rows = (counts.join(example_doc_ids(rows, cfg.pii.example_doc_ids), ["entity_type", "value_key"])
                      .withColumn("corpus_id", F.lit(corpus_id))
                      .withColumn("updated_at", F.current_timestamp()))
        tables.merge("pii_corpus_index", index_rows)

        per_doc = values.groupBy("doc_id").agg(F.count("*").cast("int").alias("n_values"))
        markers = (new_docs.select("corpus_id", "doc_id").join(per_doc, "doc_id", "left")
                   .fillna(0, subset=["n_values"])
                   .withColumn("scan_fingerprint", F.lit(fingerprint))
                   .withColumn("scanned_at", F.current_timestamp()))
        tables.append("pii_corpus_scanned", markers)  # written last: new documents had no marker
    finally:
        values.unpersist()
    stats["seconds"] = round(time.monotonic() - started, 3)
    return stats
