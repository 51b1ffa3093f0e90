"""The driver's class-data archive: used when present, recorded by exactly one process,
kept only after a clean JVM exit, and stale leftovers removed (no JVM needed here; every
Spark test of the suite runs on the archive ``prepare_local_jvm`` records)."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from extraction_audit import jvm_archive


@pytest.fixture
def exits(monkeypatch):
    """Collect the at-exit handlers instead of registering them with the interpreter."""
    handlers = []
    monkeypatch.setattr(jvm_archive.atexit, "register", lambda fn, *args: handlers.append((fn, args)))
    return handlers


def fake_gateway(monkeypatch, returncode: int, tmp_written_by_jvm=None):
    from pyspark import SparkContext

    class Proc:
        stdin = SimpleNamespace(close=lambda: None)

        def wait(self, timeout):
            if tmp_written_by_jvm is not None:
                tmp_written_by_jvm.write_bytes(b"archive")
            self.returncode = returncode

    monkeypatch.setattr(SparkContext, "_gateway", SimpleNamespace(proc=Proc()), raising=False)
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)


def test_one_process_records_the_others_start_plainly_then_all_use_it(tmp_path, exits, monkeypatch):
    jars = ["/x/delta-spark.jar"]
    final = jvm_archive.archive_path(tmp_path, jars)
    first = jvm_archive.java_options(tmp_path, jars)
    assert first[0] == f"-XX:ArchiveClassesAtExit={final.with_name(f'{final.name}.{os.getpid()}.tmp')}"
    assert jvm_archive.java_options(tmp_path, jars) == [], "a second process must not record at the same time"
    (fn, args), = exits
    tmp = args[0]
    fake_gateway(monkeypatch, returncode=0, tmp_written_by_jvm=tmp)
    fn(*args)
    assert final.read_bytes() == b"archive" and not tmp.exists()
    assert not final.with_name(final.name + ".recording").exists()
    assert jvm_archive.java_options(tmp_path, jars) == [f"-XX:SharedArchiveFile={final}"]
    assert jvm_archive.archive_path(tmp_path, ["/y/other.jar"]) != final, "other jars, other archive"


def test_an_unclean_exit_keeps_nothing(tmp_path, exits, monkeypatch):
    jars = ["/x/delta-spark.jar"]
    final = jvm_archive.archive_path(tmp_path, jars)
    jvm_archive.java_options(tmp_path, jars)
    (fn, args), = exits
    fake_gateway(monkeypatch, returncode=137, tmp_written_by_jvm=args[0])
    fn(*args)
    assert not final.exists() and not args[0].exists()
    assert not final.with_name(final.name + ".recording").exists()


def test_leftovers_of_killed_processes_are_removed(tmp_path, exits):
    jars = ["/x/delta-spark.jar"]
    final = jvm_archive.archive_path(tmp_path, jars)
    stale = [final.with_name(final.name + ".123.tmp"), final.with_name(final.name + ".recording")]
    for path in stale:
        path.write_bytes(b"partial")
        old = time.time() - 2 * 3600
        os.utime(path, (old, old))
    assert jvm_archive.java_options(tmp_path, jars)[0].startswith("-XX:ArchiveClassesAtExit=")
    assert not stale[0].exists()
    assert stale[1].read_text() == str(os.getpid()), "the stale marker was replaced by this process's"


def test_the_local_driver_compiles_only_hot_code_with_c2_unless_the_user_says_otherwise(tmp_path):
    """Short local runs spend much of their CPU in the C2 compiler (README design notes):
    the local default raises its thresholds; the user's own JVM options come last and win,
    and ``spark.short_session_jit: false`` leaves HotSpot's defaults."""
    from extraction_audit.config import parse_config
    from extraction_audit.spark import SHORT_SESSION_JIT, driver_java_options

    default = driver_java_options(parse_config({}), tmp_path)
    assert SHORT_SESSION_JIT in default and "-XX:Tier4InvocationThreshold=50000" in SHORT_SESSION_JIT
    mine = parse_config({"spark": {"conf": {"spark.driver.extraJavaOptions": "-XX:Tier4InvocationThreshold=5000"}}})
    options = driver_java_options(mine, tmp_path)
    assert options.index(SHORT_SESSION_JIT) < options.index("-XX:Tier4InvocationThreshold=5000")
    plain = driver_java_options(parse_config({"spark": {"short_session_jit": False}}), tmp_path)
    assert not any("Tier4" in o for o in plain)
