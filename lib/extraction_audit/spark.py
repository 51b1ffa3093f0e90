"""The one SparkSession factory.

On a cluster (Databricks, spark-submit on YARN) a session or a submitted SparkConf
already exists: we reuse it and never touch master, memory or Delta settings, which
belong to the cluster.  On a laptop or in CI we build a ``local[*]`` session with Delta
enabled; the Delta jars come from Maven Central through ``spark.jars.packages`` (via
``delta.configure_spark_with_delta_pip``), cached by Ivy after the first run.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from .config import AuditConfig

log = logging.getLogger(__name__)


def _submitted_conf_present() -> bool:
    """True inside spark-submit / Databricks, where the launcher already set a master."""
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return True
    from pyspark import SparkConf

    return SparkConf().contains("spark.master")


def get_spark(cfg: AuditConfig | None = None):
    """Return the active SparkSession, or build a local Delta-enabled one."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    cfg = cfg or AuditConfig()
    if _submitted_conf_present():
        spark = SparkSession.builder.appName(cfg.spark.app_name).getOrCreate()
        log.info("reusing cluster Spark configuration (master=%s)", spark.sparkContext.master)
        return spark
    return _local_session(cfg)


def _local_session(cfg: AuditConfig):
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    # Executors' Python must be this interpreter, or they miss our dependencies.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    warehouse = Path(cfg.resolve(cfg.storage.warehouse) or "./ea-data/warehouse").resolve()
    warehouse.mkdir(parents=True, exist_ok=True)
    builder = (
        SparkSession.builder.master(cfg.spark.master)
        .appName(cfg.spark.app_name)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.warehouse.dir", str(warehouse / "_catalog"))
        .config("spark.sql.shuffle.partitions", str(cfg.spark.shuffle_partitions))
        .config("spark.driver.memory", cfg.spark.driver_memory)
        .config("spark.ui.enabled", str(cfg.spark.ui_enabled).lower())
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + str(warehouse / "_derby"))
    )
    for key, value in cfg.spark.conf.items():
        builder = builder.config(key, value)
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    spark.sparkContext.setLogLevel(cfg.spark.log_level)
    return spark
