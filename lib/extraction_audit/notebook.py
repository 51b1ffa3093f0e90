"""What the analyst notebooks run first: find the project's findings tables from wherever the
notebook was started (project root, ``notebooks/``, a Databricks workspace) and show them as
SQL views.  It never creates a warehouse: a notebook pointed at an empty folder would show
empty tables and look like a clean audit.

Reads every findings table (as views); writes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from .config import AuditConfig, load_config
from .errors import UserFacingError

WAREHOUSE_ENV = "EXTRACTION_AUDIT_WAREHOUSE"
CONFIG_ENV = "EXTRACTION_AUDIT_CONFIG"


def _has_runs(folder: Path) -> bool:
    return (folder / "runs" / "_delta_log").is_dir()


def find_warehouse(configured: str, start: Path | None = None) -> str:
    """The folder holding the ``runs`` table: ``configured`` as given when absolute or a URL,
    else resolved against ``start`` (the working folder) and then each of its parents, so
    ``./ea-data/warehouse`` is found from ``notebooks/`` as from the project root."""
    if "://" in configured or configured.startswith("dbfs:"):
        return configured
    path = Path(configured).expanduser()
    if path.is_absolute():
        candidates = [path]
    else:
        here = (start or Path.cwd()).resolve()
        candidates = [folder / path for folder in (here, *here.parents)]
    for candidate in candidates:
        if _has_runs(candidate):
            return str(candidate)
    raise UserFacingError(
        f"no extraction-audit tables found: looked for {configured} (a folder holding the runs table) in "
        f"{candidates[0].parent if len(candidates) == 1 else (start or Path.cwd())} and its parent folders. "
        f"Run the demo or an audit first, or set {WAREHOUSE_ENV} (or {CONFIG_ENV}) to the project's warehouse "
        "or config.")


def notebook_config(start: Path | None = None) -> AuditConfig:
    """The config named by ``EXTRACTION_AUDIT_CONFIG`` (default: the built-in local one) with
    ``storage.warehouse`` set to the warehouse found (``EXTRACTION_AUDIT_WAREHOUSE`` first).
    Catalog mode (``storage.database``, e.g. Databricks) needs no folder."""
    cfg = load_config(os.environ.get(CONFIG_ENV) or None)
    if cfg.storage.database:
        return cfg
    configured = os.environ.get(WAREHOUSE_ENV) or cfg.storage.warehouse
    if not configured:
        raise UserFacingError(f"storage.warehouse is not set: set {WAREHOUSE_ENV} or storage.database")
    if not Path(configured).is_absolute() and os.environ.get(CONFIG_ENV) and os.environ.get(WAREHOUSE_ENV) is None:
        start = start or Path(os.environ[CONFIG_ENV]).resolve().parent  # relative to the config file's folder
    cfg.storage.warehouse = find_warehouse(configured, start)
    return cfg


def open_findings(start: Path | None = None):
    """``(cfg, spark, missing)``: the session (the cluster's own on Databricks) with every
    findings table as a view named like the table; ``missing`` lists tables not written yet."""
    from .report.queries import use_tables
    from .spark import get_spark

    cfg = notebook_config(start)
    spark = get_spark(cfg)
    missing = use_tables(spark, cfg)
    where = f"database {cfg.storage.database}" if cfg.storage.database else cfg.storage.warehouse
    print(f"findings tables: {where}")
    return cfg, spark, missing
