"""A class-data-sharing (CDS) archive of the local Spark driver's classes.

Every CLI process of a laptop or CI run starts its own JVM, and before its first Delta
query that JVM loads and verifies some 20,000 classes: 4-6 s of each process's fixed cost
(measured: session up and a one-row Delta read in 14.0 s without the archive, 10.2 s with
it, mean of 3 alternating runs).  The first local session of a machine runs with ``-XX:ArchiveClassesAtExit`` on a
private temporary file; when that JVM exits cleanly (exit code 0, after the Python process
closed its stdin) the file is renamed into place, atomically, under a name keyed by the
Java runtime and the classpath.  Later sessions start with ``-XX:SharedArchiveFile``.

Never a correctness risk: a JVM that finds the archive unusable (another JDK, other jars)
logs a warning to Spark's log and loads classes as usual; a killed first process leaves
only a temporary file, removed by a later start.  ``spark.class_archive: false`` turns it
off; clusters never see it (only ``spark._local_session`` calls this module).
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shutil
import time
from pathlib import Path

log = logging.getLogger(__name__)

_STALE_SECONDS = 3600


def _java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str((Path(java_home) / "bin" / "java").resolve())
    found = shutil.which("java")
    return str(Path(found).resolve()) if found else "java"


def archive_path(cache_root: Path, jars: list[str]) -> Path:
    """The archive's file, keyed by everything that decides whether a JVM can use it."""
    import pyspark

    jars_dir = Path(pyspark.__file__).parent / "jars"
    listing = sorted(p.name for p in jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    java = _java_binary()
    try:
        java_stamp = str(os.stat(java).st_mtime_ns)
    except OSError:
        java_stamp = ""
    key = "\n".join([java, java_stamp, pyspark.__version__, str(jars_dir), *listing, *jars])
    return cache_root / f"spark-driver-{hashlib.sha1(key.encode()).hexdigest()[:16]}.jsa"


def _marker(final: Path) -> Path:
    """Held (O_EXCL) by the one process recording ``final``."""
    return final.with_name(final.name + ".recording")


def java_options(cache_root: Path, jars: list[str]) -> list[str]:
    """JVM options for a new local driver: use the archive; or, in the one process that
    holds the recording marker, record it at exit; or (another process records) none."""
    final = archive_path(cache_root, jars)
    _remove_stale(final)
    if final.exists() and final.stat().st_size > 0:
        return [f"-XX:SharedArchiveFile={final}"]
    final.parent.mkdir(parents=True, exist_ok=True)
    marker = _marker(final)
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return []  # another process is recording it; this one starts as before
    with os.fdopen(fd, "w") as handle:
        handle.write(str(os.getpid()))
    tmp = final.with_name(f"{final.name}.{os.getpid()}.tmp")
    atexit.register(_promote_after_clean_exit, tmp, final, marker)
    log.info("recording the Spark driver's classes for faster later starts (first run only): %s", final)
    # The dump warns once per class it skips (generated and signed-jar classes): thousands
    # of lines, harmless, kept off the console when spark.log_file is null.
    return [f"-XX:ArchiveClassesAtExit={tmp}", "-Xlog:cds=off,cds+dynamic=off"]


def prepare(cache_root: Path, cached_jars) -> bool:
    """Resolve the Delta jars and record the archive now, each in a short child process
    (a session, a Delta write, MERGE and read), so that every later JVM of the machine
    starts from it (test suites, image builds).  Serialised by a lock; True if it exists."""
    import fcntl
    import subprocess
    import sys

    cache_root.mkdir(parents=True, exist_ok=True)
    with (cache_root / "class-archive.lock").open("a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        for _ in range(2):  # the first child may only resolve the jars (the archive's key)
            jars = cached_jars()
            if jars and archive_path(cache_root, jars).exists():
                return True
            subprocess.run([sys.executable, "-m", "extraction_audit.jvm_archive"], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
        jars = cached_jars()
        return bool(jars) and archive_path(cache_root, jars).exists()


def _remove_stale(final: Path) -> None:
    """Temporary files and recording markers of processes killed before they finished."""
    for path in [*final.parent.glob(f"{final.name}.*.tmp"), _marker(final)]:
        try:
            if time.time() - path.stat().st_mtime > _STALE_SECONDS:
                path.unlink()
        except OSError:
            pass


def _promote_after_clean_exit(tmp: Path, final: Path, marker: Path) -> None:
    """At interpreter exit: stop Spark, let the JVM exit (it dumps the archive), and keep
    the file only if the JVM exited with 0."""
    from pyspark import SparkContext

    gateway = getattr(SparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    try:
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()  # the gateway exits on EOF (System.exit(0)) and dumps
            proc.wait(timeout=300)
        if proc is not None and proc.returncode == 0 and tmp.exists() and tmp.stat().st_size > 0:
            os.replace(tmp, final)
    except Exception as err:  # noqa: BLE001 - an optimisation must never fail a finished run
        log.debug("class archive not kept: %s", err)
    for path in (tmp, marker):
        try:
            path.unlink()
        except OSError:
            pass


def _exercise_delta() -> None:
    """The child of ``prepare``: load the classes of a typical run, then exit cleanly."""
    import tempfile

    from .config import AuditConfig
    from .spark import get_spark

    with tempfile.TemporaryDirectory(prefix="ea-class-archive-") as tmp:
        cfg = AuditConfig()
        cfg.storage.warehouse = str(Path(tmp) / "warehouse")
        cfg.spark.log_file = str(Path(tmp) / "spark.log")
        cfg.spark.master = "local[1]"
        spark = get_spark(cfg)
        from delta.tables import DeltaTable

        path = str(Path(tmp) / "t")
        spark.range(10).selectExpr("id", "cast(id as string) AS v").write.format("delta").save(path)
        table = DeltaTable.forPath(spark, path)
        (table.alias("t").merge(spark.range(5, 15).selectExpr("id", "'x' AS v").alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        spark.read.format("delta").load(path).groupBy("v").count().collect()
        spark.stop()


if __name__ == "__main__":
    _exercise_delta()
