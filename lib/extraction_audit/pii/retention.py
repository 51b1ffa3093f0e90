"""Retention: delete one run's samples and findings, then VACUUM so no data file keeps them.

Samples and findings are copies of whatever personal data the model leaked, so they must
be deletable on schedule.  ``purge_run`` deletes the run's rows from every table with a
``run_id`` column (samples, passage_occurrences, extracted_passages, pii_findings,
candidates, reviews, run_metrics, runs, and any table added later).  A Delta DELETE only
drops files from the current version; the old files stay on storage for time travel until
``VACUUM ... RETAIN storage.retention_hours HOURS`` removes files deleted more than that
many hours ago.  So:

- ``retention_hours: 168`` (default) keeps a week of time travel; the purged data files
  disappear at the first ``purge --vacuum`` (or scheduled VACUUM) a week later;
- ``retention_hours: 0`` removes them at once, but Delta refuses a retention under its
  safety check (168 h) unless ``spark.databricks.delta.retentionDurationCheck.enabled`` is
  false (it is in the local session; set it on the cluster when you need it) and a
  concurrent reader of an older version may fail.

Tables with deletion vectors get ``REORG TABLE ... APPLY (PURGE)`` first, since a deletion
vector only masks rows inside files that VACUUM would otherwise keep.

Limitation: the Delta log (``_delta_log``, not data files) keeps per-file column statistics,
including the first 32 characters of the min/max of string columns, until
``delta.logRetentionDuration`` (30 days by default, counted in whole days) expires and a
checkpoint cleans it.  ``pii_findings`` excludes ``value`` from statistics, but a table
such as ``samples`` keeps prefixes of ``text`` there unless its
``delta.dataSkippingStatsColumns`` leaves text columns out.

Files: the run's scratch folder (``scratch.py``), its report folder and every file listed
in ``run_artifacts`` (HTML, Markdown, JSON, review exports) are deleted first.

Reads and writes every table with a ``run_id`` column.
"""

from __future__ import annotations

import logging
import time

from ..config import AuditConfig
from ..errors import UserFacingError
from ..ids import validate_id
from ..scratch import delete_path, run_scratch
from ..tables import TABLES, Tables

log = logging.getLogger(__name__)


def run_tables() -> list[str]:
    """Tables holding per-run rows (those with a run_id column), runs last."""
    names = [name for name, spec in TABLES.items() if "run_id" in spec.column_names]
    return sorted(names, key=lambda n: n == "runs")


def _delete_run_files(spark, cfg: AuditConfig, tables: Tables, run_id: str) -> list[str]:
    """Every copy outside the tables: recorded artifacts (reports, review exports, wherever
    they were written), the default report folder, and the run's scratch folder."""
    from pyspark.sql import functions as F

    paths = []
    if tables.exists("run_artifacts"):
        paths += [r["path"] for r in tables.read("run_artifacts").where(F.col("run_id") == run_id)
                  .select("path").collect()]
    if cfg.report.output_dir:
        paths.append(f"{cfg.resolve(cfg.report.output_dir).rstrip('/')}/{run_id}")
    paths.append(run_scratch(cfg, run_id))
    return [p for p in dict.fromkeys(paths) if delete_path(spark, p)]


def _uses_deletion_vectors(tables: Tables, name: str) -> bool:
    props = tables.spark.sql(f"DESCRIBE DETAIL {tables.ref(name)}").first()["properties"] or {}
    return str(props.get("delta.enableDeletionVectors", "false")).lower() == "true"


# Tables are purged (and vacuumed) this many at a time: each DELETE or VACUUM is mostly
# waiting on storage (listing, deleting files) and the tables are independent; ``runs`` goes
# last, after every other table, so a purge that stops half way can be run again by run id.
_PURGE_THREADS = 4


def _delete_rows(spark, tables: Tables, name: str, run_id: str) -> int:
    """Delete the run's rows of one table (and purge deletion vectors); returns how many."""
    from pyspark.sql import functions as F

    of_run = F.col("run_id") == run_id
    n = tables.read(name).where(of_run).count()
    if n:
        tables.delete(name, of_run)
        if _uses_deletion_vectors(tables, name):
            spark.sql(f"REORG TABLE {tables.ref(name)} APPLY (PURGE)")
    return n


def _vacuum(spark, tables: Tables, name: str, hours: int) -> None:
    try:
        spark.sql(f"VACUUM {tables.ref(name)} RETAIN {hours} HOURS")
    except Exception as err:  # noqa: BLE001 - Delta raises a generic analysis error
        if "retentionDurationCheck" in str(err):
            raise UserFacingError(
                f"VACUUM refused storage.retention_hours={hours} (below Delta's safety check); set "
                f"spark.databricks.delta.retentionDurationCheck.enabled=false on the cluster or "
                f"raise storage.retention_hours") from None
        raise


def purge_run(spark, cfg: AuditConfig, run_id: str, vacuum: bool = True, tables: Tables | None = None) -> dict:
    """Delete every row of ``run_id``; with ``vacuum``, VACUUM the touched tables with
    ``storage.retention_hours``.  Returns rows deleted per table and tables vacuumed."""
    from concurrent.futures import ThreadPoolExecutor

    validate_id(run_id)
    started = time.monotonic()
    tables = tables or Tables(spark, cfg)
    hours = cfg.storage.retention_hours
    stats: dict = {"run_id": run_id, "rows_deleted": {}, "vacuumed": [], "retention_hours": hours if vacuum else None,
                   "files_deleted": _delete_run_files(spark, cfg, tables, run_id)}
    names = [name for name in run_tables() if tables.exists(name)]
    first = [name for name in names if name != "runs"]
    with ThreadPoolExecutor(max_workers=_PURGE_THREADS, thread_name_prefix="purge") as pool:
        deleted = dict(zip(first, pool.map(lambda name: _delete_rows(spark, tables, name, run_id), first)))
        if "runs" in names:  # once every other table is done
            deleted["runs"] = _delete_rows(spark, tables, "runs", run_id)
        stats["rows_deleted"] = deleted
        touched = [name for name in names if deleted[name]]
        if vacuum:
            list(pool.map(lambda name: _vacuum(spark, tables, name, hours), touched))
            stats["vacuumed"] = touched
    stats["rows_deleted_total"] = sum(stats["rows_deleted"].values())
    stats["seconds"] = round(time.monotonic() - started, 3)
    log.info("purged run %s: %s", run_id, stats["rows_deleted"])
    return stats
