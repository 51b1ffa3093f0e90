"""Scratch space: one folder per run and step, owned by the runner.

Stages put intermediate Delta folders (sample windows, verified windows, decoded passage
text) under ``ctx.scratch``.  The runner sweeps the folder before an attempt (a killed
attempt's leftovers), deletes it when the step succeeds, and ``purge`` deletes the run's
whole scratch folder, so generated text never outlives its run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .config import AuditConfig
from .errors import UserFacingError
from .ids import validate_id


def scratch_root(cfg: AuditConfig) -> str:
    base = cfg.resolve(cfg.storage.staging_dir) if cfg.storage.staging_dir else None
    if base is None:
        wh = cfg.resolve(cfg.storage.warehouse)
        if wh is None:
            raise UserFacingError("storage.staging_dir (or storage.warehouse) must be set for scratch data")
        base = f"{wh.rstrip('/')}/_staging"
    return base.rstrip("/")


def run_scratch(cfg: AuditConfig, run_id: str) -> str:
    return f"{scratch_root(cfg)}/{validate_id(run_id)}"


def step_scratch(cfg: AuditConfig, run_id: str, step: str) -> str:
    return f"{run_scratch(cfg, run_id)}/{step}"


def is_local_path(path: str) -> bool:
    """A path on this machine's file system (plain or ``file:``), not cluster storage."""
    return "://" not in path and not path.startswith("dbfs:") or path.startswith("file:")


def delete_path(spark, path: str) -> bool:
    """Delete a file or folder, local or on cluster storage (Hadoop FileSystem); True if it existed."""
    if is_local_path(path):
        local = Path(path.removeprefix("file://").removeprefix("file:"))
        if local.is_dir():
            shutil.rmtree(local, ignore_errors=True)
            return True
        if local.exists():
            local.unlink()
            return True
        return False
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return bool(fs.exists(hpath) and fs.delete(hpath, True))


def materialise(df, path: str, mode: str = "overwrite", partition_by: tuple[str, ...] = ()):
    """Write ``df`` once to a scratch folder and return the written copy, so later passes read
    data instead of recomputing a UDF pipeline (and see the same rows).  Plain Parquet: scratch
    data needs no transaction log, and a Delta table's snapshot and commit jobs would cost
    more than the write itself."""
    writer = df.write.format("parquet").mode(mode)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(path)
    return read_scratch(df.sparkSession, path, df.schema)


def materialise_counted(df, path: str, mode: str = "overwrite", partition_by: tuple[str, ...] = ()):
    """``materialise`` that also returns the number of rows written, observed by the write
    itself (a step's statistics come from what it wrote, not from a second counting job)."""
    from pyspark.sql import functions as F

    out, observed = materialise_observed(df, path, (F.count(F.lit(1)).alias("rows"),), mode, partition_by)
    return out, int(observed.get("rows") or 0)


def materialise_observed(df, path: str, aggregates, mode: str = "overwrite", partition_by: tuple[str, ...] = ()):
    """``materialise`` plus the named ``aggregates`` (Column expressions) over the written rows,
    computed by the write itself; returns (written copy, {name: value})."""
    from pyspark.sql import Observation

    observation = Observation()
    out = materialise(df.observe(observation, *aggregates), path, mode, partition_by)
    return out, dict(observation.get)


def read_scratch(spark, path: str, schema):
    return spark.read.schema(schema).parquet(path)
