"""Executor folders that local-cluster masters leave under $SPARK_HOME/work: the sweep removes
a finished application's folder and keeps one a live executor works in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from extraction_audit.local_cluster import sweep, work_dir

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="the sweep reads working directories from /proc")


def test_sweep_removes_finished_applications_and_keeps_live_ones(tmp_path):
    finished, live = tmp_path / "app-20260101000000-0000", tmp_path / "app-20260101000000-0001"
    for app in (finished, live):
        (app / "0").mkdir(parents=True)
        (app / "0" / "stderr").write_text("executor log")
    (tmp_path / "not-an-app").mkdir()
    executor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=live / "0")
    try:
        assert sweep(tmp_path) == [finished.name]
        assert not finished.exists() and (live / "0" / "stderr").exists() and (tmp_path / "not-an-app").exists()
    finally:
        executor.kill()
        executor.wait()
    assert sweep(tmp_path) == [live.name]  # its executor is gone
    assert sweep(tmp_path / "missing") == []


def test_work_dir_is_under_spark_home(monkeypatch, tmp_path):
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert work_dir() == tmp_path / "work"
