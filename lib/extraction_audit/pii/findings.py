"""The ``pii`` stage: tag personal data in a run's samples and write ``pii_findings``.

Steps: update the corpus PII index (incremental), detect values in the samples, count each
value's corpus documents by searching for it in all its surface forms (``lookup.py``; the
index is kept beside the count as ``index_doc_count``), check name/identifier linkage, link
findings to extracted passages, mark values the control run also emitted, and replace
the run's findings atomically (re-running the stage leaves one set of findings).

Raw values are written only when ``storage.allow_raw_pii`` is true; otherwise ``value`` is
NULL and only the keyed hash and a redacted hint are stored.  ``value`` is also kept out
of the Delta log's column statistics (``delta.dataSkippingStatsColumns``), which would
otherwise copy min/max values into ``_delta_log`` where VACUUM never removes them.

Reads: ``samples``, ``corpus_documents``, ``pii_corpus_*``, ``passage_occurrences``,
``runs``, and the control run's ``samples`` / ``pii_findings``.
Writes: ``pii_findings``, ``pii_corpus_*`` (run state is the runner's).
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

import pandas as pd

from ..config import AuditConfig
from ..errors import UserFacingError
from ..ids import validate_id
from ..tables import TABLES, Tables, with_conflict_retries
from . import normalise as norm
from .corpus_index import build_pii_corpus_index
from .detectors import DetectionSettings, get_detector_set
from .keys import value_key
from .lookup import corpus_lookup, name_linkage
from .passages import passage_links

log = logging.getLogger(__name__)

DETECTIONS_DDL = ("sample_id BIGINT, entity_type STRING, char_start INT, char_end INT, detector STRING, "
                  "value STRING, value_key STRING, value_redacted STRING, "
                  "search_requirements ARRAY<ARRAY<STRING>>, linked_name_key STRING")
REDACTED_VIEW = "pii_findings_redacted"
_REDACTED_COLUMNS = [c for c in TABLES["pii_findings"].column_names if c != "value"]
# Delta statistics: scalar columns only, never the raw value nor the partition column.
_STATS_COLUMNS = TABLES["pii_findings"].stats_columns  # every column but the raw value, comma-separated


def sample_detection_batches(settings: DetectionSettings, keep_raw: bool):
    """mapInPandas kernel: (sample_id, text) -> one row per finding, with its key, hint,
    search forms and the key of the nearest person name (the linkage candidate).
    ``value`` is the raw text only when ``keep_raw`` (storage.allow_raw_pii)."""
    window = settings.link_window_chars

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        detectors = get_detector_set(settings)
        for batch in batches:
            rows = []
            for sample_id, text in zip(batch["sample_id"], batch["text"]):
                hits = detectors.detect(text)
                keys = [value_key(settings.key, h.entity_type, h.normalised) for h in hits]
                names = [(h, k) for h, k in zip(hits, keys) if h.entity_type == "person_name"]
                for hit, key in zip(hits, keys):
                    linked = None
                    if hit.entity_type != "person_name" and names:
                        gap, name_key = min((max(n.start - hit.end, hit.start - n.end, 0), k) for n, k in names)
                        linked = name_key if gap <= window else None
                    rows.append((int(sample_id), hit.entity_type, hit.start, hit.end, hit.detector,
                                 hit.surface if keep_raw else None,
                                 key, norm.redact(hit.entity_type, hit.normalised),
                                 norm.search_requirements(hit.entity_type, hit.normalised, hit.surface,
                                                          settings.date_day_first),
                                 linked))
            yield pd.DataFrame(rows, columns=[c.split()[0] for c in DETECTIONS_DDL.split(", ")])

    return run


def detect_samples(samples, settings: DetectionSettings, keep_raw: bool = False):
    return samples.select("sample_id", "text").mapInPandas(sample_detection_batches(settings, keep_raw),
                                                           DETECTIONS_DDL)


def create_redacted_views(tables: Tables) -> list[str]:
    """``pii_findings_redacted``: every findings column except the raw ``value``.

    Catalog mode creates a permanent view in ``storage.database`` (grant analysts this view,
    not the table); local mode a temporary view of the session."""
    tables.ensure("pii_findings")
    columns = ", ".join(f"`{c}`" for c in _REDACTED_COLUMNS)
    select = f"SELECT {columns} FROM {tables.ref('pii_findings')}"
    if tables.database:
        tables.spark.sql(f"CREATE OR REPLACE VIEW `{tables.database}`.`{REDACTED_VIEW}` "
                         f"COMMENT 'pii_findings without raw values: the view to share with analysts' AS {select}")
    else:
        tables.spark.sql(f"CREATE OR REPLACE TEMP VIEW `{REDACTED_VIEW}` AS {select}")
    return [REDACTED_VIEW]


def ensure_findings_table(tables: Tables) -> None:
    """pii_findings with ``value`` excluded from Delta's per-file statistics.

    A table ``Tables.ensure`` creates has the property from its first commit; one an earlier
    version created without it gets it here.  Two runs doing so at once (the demo's target
    and control) conflict on the table's metadata: the later one retries and then finds the
    property set."""
    tables.ensure("pii_findings")
    ref = tables.ref("pii_findings")

    def set_property() -> None:
        props = tables.spark.sql(f"DESCRIBE DETAIL {ref}").first()["properties"] or {}
        if props.get("delta.dataSkippingStatsColumns") != _STATS_COLUMNS:
            tables.spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES "
                             f"('delta.dataSkippingStatsColumns' = '{_STATS_COLUMNS}')")

    with_conflict_retries(set_property, "exclude pii_findings.value from statistics")


def _control_keys(tables: Tables, settings: DetectionSettings, control_run_id: str, stats: dict):
    """Distinct value_keys the control run emitted: detected afresh from its samples (same
    settings and key, so keys compare), or from its stored findings if samples were purged."""
    from pyspark.sql import functions as F

    control_samples = tables.read("samples").where(F.col("run_id") == control_run_id)
    if control_samples.limit(1).count():
        stats["control_source"] = "samples"
        return detect_samples(control_samples, settings).select("value_key").distinct()
    stored = tables.read("pii_findings").where(F.col("run_id") == control_run_id)
    if stored.limit(1).count():
        stats["control_source"] = "pii_findings"
        return stored.select("value_key").distinct()
    raise UserFacingError(f"--control-run-id: run {control_run_id!r} has no samples and no pii_findings")


def run_pii(spark, cfg: AuditConfig, run_id: str, control_run_id: str | None = None,
            tables: Tables | None = None, run_row: dict | None = None) -> dict:
    """Tag, look up and write the run's personal-data findings; returns the step stats (the
    runner records them)."""
    tables = tables or Tables(spark, cfg)
    validate_id(run_id)
    if not cfg.pii.enabled:
        log.info("pii.enabled is false: personal data step skipped for run %s", run_id)
        return {"run_id": run_id, "skipped": "pii.enabled is false"}
    settings = DetectionSettings.from_config(cfg)
    if run_row is None:
        run_row = _run_row(tables, run_id)
    return _run_pii(spark, cfg, tables, settings, run_id, control_run_id, run_row or {})


def _run_row(tables: Tables, run_id: str) -> dict:
    from pyspark.sql import functions as F

    if not tables.exists("runs"):
        return {}
    rows = tables.read("runs").where(F.col("run_id") == run_id).limit(1).collect()
    return rows[0].asDict(recursive=True) if rows else {}


def _run_pii(spark, cfg: AuditConfig, tables: Tables, settings: DetectionSettings, run_id: str,
             control_run_id: str | None, run_row: dict) -> dict:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.monotonic()
    control_run_id = control_run_id or run_row.get("control_run_id")
    if control_run_id:
        validate_id(control_run_id, "control run id")
    corpus_id = run_row.get("corpus_id") or cfg.corpus.id

    samples = tables.read("samples").where(F.col("run_id") == run_id)
    stats: dict = {"run_id": run_id, "corpus_id": corpus_id, "control_run_id": control_run_id,
                   "raw_values_stored": cfg.storage.allow_raw_pii}
    counts = samples.agg(F.count("*").alias("n"), F.count(F.when(F.col("text").isNull(), True)).alias("null")).first()
    stats["samples_read"] = counts["n"]
    if stats["samples_read"] == 0:
        raise UserFacingError(f"run {run_id!r} has no samples; run `extraction-audit generate` first")
    stats["samples_skipped"] = {"null_text": counts["null"]}

    stats["corpus_index"] = build_pii_corpus_index(spark, cfg, tables, corpus_id, settings)

    # Raw surface forms live only in executor memory (and its spill) while the stage runs.
    detections = detect_samples(samples, settings, keep_raw=cfg.storage.allow_raw_pii).persist(
        StorageLevel.MEMORY_AND_DISK)
    cached = []
    try:
        lookup, doc_hits, cached, stats["lookup"] = corpus_lookup(
            spark, tables, corpus_id, detections, cfg.pii.corpus_search_limit, cfg.pii.example_doc_ids)
        pairs = detections.where(F.col("linked_name_key").isNotNull()).select(
            "entity_type", "value_key", "linked_name_key").distinct()
        linkage = name_linkage(pairs, doc_hits, lookup)

        findings = (detections.drop("search_requirements")
                    .join(lookup, ["entity_type", "value_key"], "left")
                    .join(linkage, ["entity_type", "value_key", "linked_name_key"], "left"))

        links, stats["passages"] = passage_links(tables, cfg, run_id, samples, detections)
        if links is not None:
            findings = findings.join(links, ["sample_id", "char_start"], "left")

        if control_run_id:
            control = _control_keys(tables, settings, control_run_id, stats).withColumn("in_control", F.lit(True))
            findings = (findings.join(control, "value_key", "left")
                        .withColumn("in_control", F.coalesce("in_control", F.lit(False)))
                        .withColumn("control_run_id", F.lit(control_run_id)))

        findings = findings.withColumn("run_id", F.lit(run_id)).withColumn("created_at", F.current_timestamp())
        ensure_findings_table(tables)
        tables.replace_run("pii_findings", findings, run_id)
    finally:
        for frame in [detections, *cached]:
            frame.unpersist()

    stats.update(_summary(tables, run_id))
    create_redacted_views(tables)
    stats["seconds"] = round(time.monotonic() - started, 3)
    return stats


def _summary(tables: Tables, run_id: str) -> dict:
    """Counts read back from the written findings (one run's partition), in one grouped query:
    a value's key is keyed by its entity type and its corpus lookup is one per value, so each
    value falls in exactly one (entity_type, corpus_lookup) group and the groups' distinct
    counts add up."""
    from pyspark.sql import functions as F

    written = tables.read("pii_findings").where(F.col("run_id") == run_id)
    groups = written.groupBy("entity_type", "corpus_lookup").agg(
        F.count("*").alias("findings"),
        F.countDistinct("value_key").alias("distinct_values"),
        F.countDistinct(F.when(F.col("in_corpus"), F.col("value_key"))).alias("distinct_values_in_corpus"),
        F.count(F.when(F.col("linked_in_same_doc"), True)).alias("linked_in_same_doc"),
        F.count(F.when(F.col("passage_id").isNotNull(), True)).alias("in_extracted_passage"),
        F.count(F.when(F.col("in_control"), True)).alias("in_control"),
    ).collect()
    totals = ("findings", "distinct_values", "distinct_values_in_corpus", "linked_in_same_doc",
              "in_extracted_passage", "in_control")
    row: dict = {k: sum(int(g[k]) for g in groups) for k in totals}
    row["distinct_values_found_by_search"] = sum(int(g["distinct_values"]) for g in groups
                                                 if g["corpus_lookup"] == "search")
    row["findings_by_type"] = {}
    row["findings_by_lookup"] = {}
    for g in groups:
        row["findings_by_type"][g["entity_type"]] = row["findings_by_type"].get(g["entity_type"], 0) + g["findings"]
        row["findings_by_lookup"][g["corpus_lookup"]] = (row["findings_by_lookup"].get(g["corpus_lookup"], 0)
                                                         + g["findings"])
    return row
