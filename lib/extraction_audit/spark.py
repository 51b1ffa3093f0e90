"""The one SparkSession factory.

On a cluster (Databricks, spark-submit on YARN) a session or a submitted SparkConf
already exists: we reuse it and never touch master, memory or Delta settings, which
belong to the cluster.  On a laptop or in CI we build a ``local[*]`` session with Delta
enabled.  The Delta jars come from Maven Central through ``spark.jars.packages`` (via
``delta.configure_spark_with_delta_pip``) the first time only, under a file lock (two
processes resolving at once corrupt Ivy's cache); the resolved jar paths are kept in
``~/.cache/extraction-audit`` and later sessions pass them as ``spark.jars``, with no
dependency resolution at all.  Once the jars are local, the driver JVM also uses a
class-data-sharing archive of Spark's classes (``jvm_archive``): 4-6 s less per process.

The local JVM is started with its standard output and error sent to ``spark.log_file``:
Spark's log, the launcher's resolution report and the Python workers' stderr go there,
and the console keeps our progress lines.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sys
from pathlib import Path

from .config import AuditConfig

log = logging.getLogger(__name__)


#: A local session lives minutes and is CPU-bound on a small machine; by default HotSpot's
#: C2 compiler optimises every method called ~5,000 times, and on the README demo (2 cores)
#: its threads used about a third of the driver's CPU.  Compiling with C2 only code ten times
#: hotter (C1 still compiles the rest) took the demo from 187.8 / 172.3 s to 168.7 / 152.5 s
#: (alternating runs, one warehouse state); C1 alone was slower (README design notes).
SHORT_SESSION_JIT = ("-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=20000 "
                     "-XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=400000")


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
        # File listings (Delta VACUUM among them) default to 10,000 tasks: minutes on a laptop.
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", str(4 * (os.cpu_count() or 2)))
    )
    java_opts = driver_java_options(cfg, warehouse)
    for key, value in cfg.spark.conf.items():
        if key != "spark.driver.extraJavaOptions":
            builder = builder.config(key, value)
    log_file = cfg.resolve(cfg.spark.log_file) if cfg.spark.log_file else None
    with _jar_cache_lock():
        jars = _cached_delta_jars()
        if jars and cfg.spark.class_archive:
            from .jvm_archive import java_options

            java_opts = java_options(_jar_cache().parent, jars) + java_opts
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(java_opts))
        if jars:
            builder = builder.config("spark.jars", ",".join(jars))
        else:
            from delta import configure_spark_with_delta_pip

            log.info("resolving the Delta Lake jars from Maven Central (first run only)")
            builder = configure_spark_with_delta_pip(builder)
        local_cluster = cfg.spark.master.startswith("local-cluster")
        if local_cluster:
            from . import local_cluster as leftovers

            leftovers.sweep()  # folders of earlier (killed) local-cluster processes
        with _jvm_output_to(log_file):
            spark = builder.getOrCreate()
        if local_cluster:
            leftovers.sweep_after(spark)
        if not jars:
            _remember_delta_jars(spark.sparkContext.getConf().get("spark.jars", ""))
    spark.sparkContext.setLogLevel(cfg.spark.log_level)
    if log_file:
        log.info("Spark session up (%s); Spark's own log: %s", spark.sparkContext.master, log_file)
    return spark


def driver_java_options(cfg: AuditConfig, warehouse: Path) -> list[str]:
    """The local driver's JVM options (the class archive's are added in front): the user's
    ``spark.conf`` options come last, so a flag they set overrides ours."""
    options = ["-Dderby.system.home=" + str(warehouse / "_derby")]
    if cfg.spark.short_session_jit:
        options.append(SHORT_SESSION_JIT)
    if cfg.spark.conf.get("spark.driver.extraJavaOptions"):
        options.append(cfg.spark.conf["spark.driver.extraJavaOptions"])
    return options


def prepare_local_jvm() -> bool:
    """Resolve the Delta jars and record the driver's class archive before the first real
    session (see ``jvm_archive.prepare``); True when later local sessions will use it."""
    from .jvm_archive import prepare

    return prepare(_jar_cache().parent, _cached_delta_jars)


def _jar_cache() -> Path:
    import delta

    version = getattr(delta, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("delta-spark")
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "extraction-audit"
    return root / f"delta-{version}-jars.txt"


def _cached_delta_jars() -> list[str] | None:
    path = _jar_cache()
    try:
        jars = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError:
        return None
    local = [j.removeprefix("file://").removeprefix("file:") for j in jars]
    return jars if jars and all(Path(j).exists() for j in local) else None


def _remember_delta_jars(spark_jars: str) -> None:
    jars = [j for j in spark_jars.split(",") if j.strip()]
    if not jars:
        return
    path = _jar_cache()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text("\n".join(jars) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@contextlib.contextmanager
def _jar_cache_lock():
    path = _jar_cache().with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def _jvm_output_to(log_file: str | None):
    """Start the JVM with stdout/stderr on ``log_file``: the child inherits file
    descriptors 1 and 2 at launch, ours are restored right after."""
    if not log_file:
        yield
        return
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    target = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)
