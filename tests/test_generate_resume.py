"""A generation run killed (SIGKILL, a real subprocess with its own Spark) mid-run and
rerun ends with exactly the samples of an uninterrupted run: nothing lost, no duplicates."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest
import yaml
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from conftest import CLI_TEST_SPARK_CONF, make_config
from extraction_audit.runner import Runner
from extraction_audit.tables import Tables

COLUMNS = ["sample_id", "prompt_strategy", "prompt_text", "prompt_token_ids", "token_ids", "text", "n_tokens",
           "seed", "divergence_offset", "finish_reason"]


def _start_cli(args: list[str], cwd) -> tuple[subprocess.Popen, queue.Queue]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "extraction_audit.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # own process group: the kill takes its JVM too
    lines: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return proc, lines


def _wait_for_commits(proc, lines: queue.Queue, commits: int, timeout: float) -> list[str]:
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            continue
        if line is None:
            pytest.fail("generation subprocess ended before it could be killed:\n" + "".join(seen[-30:]))
        seen.append(line)
        if sum("committed" in s for s in seen) >= commits:
            return seen
    pytest.fail("no chunk commits seen in time:\n" + "".join(seen[-30:]))


@pytest.mark.slow
def test_killed_run_resumes_to_exactly_the_planned_samples(spark, demo_assets, tmp_path):
    cfg = make_config(
        tmp_path,
        spark={"master": "local[1]", "shuffle_partitions": 1, "conf": CLI_TEST_SPARK_CONF},
        model={"path": str(demo_assets.model_dir), "tokenizer": str(demo_assets.tokenizer_dir),
               "device": "cpu", "dtype": "float32"},
        generation={"budget_tokens": 400, "batch_size": 4, "samples_per_task": 4, "chunk_samples": 6, "seed": 11,
                    "sampling": {"max_new_tokens": 16, "top_k": 40, "temperature_start": 10.0,
                                 "temperature_decay_tokens": 20},
                    "prompts": [{"strategy": "empty", "share": 0.5},
                                {"strategy": "public_prefix", "share": 0.5, "source": str(demo_assets.prompts_path)}]},
    )
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude={"base_dir"})))

    proc, lines = _start_cli(["generate", "--config", str(conf), "--run-id", "killed"], tmp_path)
    try:
        _wait_for_commits(proc, lines, commits=2, timeout=420)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    tables = Tables(spark, cfg)
    samples = tables.read("samples").where(F.col("run_id") == "killed")
    committed = samples.count()
    committed_rows = spark.createDataFrame(samples.select(*COLUMNS).collect(), samples.select(*COLUMNS).schema)
    status = tables.read("runs").where(F.col("run_id") == "killed").collect()[0]["status"]
    assert status == "running:generate"  # the kill left no chance to finish or fail cleanly
    tokens_before = samples.agg(F.sum("n_tokens")).collect()[0][0]
    assert 12 <= committed and tokens_before < 400

    resumed = Runner(spark, cfg).run_step("killed", "generate")
    assert resumed["samples_already_present"] == committed

    reference = Runner(spark, cfg).run_step("reference", "generate")
    final = tables.read("samples").where(F.col("run_id") == "killed")
    ids = [r["sample_id"] for r in final.select("sample_id").collect()]
    assert len(ids) == len(set(ids)) == reference["samples"]
    assertDataFrameEqual(final.select(*COLUMNS),
                         tables.read("samples").where(F.col("run_id") == "reference").select(*COLUMNS))
    # Samples committed before the kill were kept as they were.
    assertDataFrameEqual(final.join(committed_rows.select("sample_id"), "sample_id", "left_semi").select(*COLUMNS),
                         committed_rows)
