"""Production faults: real process kills mid-generation and mid-match (one of the three
processes on a real multi-executor local-cluster master), concurrent runs, and bad input
giving one clear error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from conftest import CLI_TEST_SPARK_CONF
from extraction_audit import local_cluster
from extraction_audit.audit import run_audit
from extraction_audit.config import load_config
from extraction_audit.errors import UserFacingError
from extraction_audit.tables import Tables

pytestmark = pytest.mark.slow

COMPARE = {
    "samples": ["sample_id", "prompt_token_ids", "token_ids", "seed", "n_tokens"],
    "passage_occurrences": ["sample_id", "start", "end", "passage_id"],
    "extracted_passages": ["passage_id", "token_ids", "n_samples", "doc_count", "doc_count_is_exact",
                           "example_doc_ids", "is_low_entropy"],
    "run_metrics": ["budget_tokens", "generated_tokens", "extracted_tokens", "distinct_passages",
                    "distinct_ngrams"],
}


@pytest.fixture(scope="module")
def audit_setup(spark, demo_assets, tmp_path_factory):
    root = tmp_path_factory.mktemp("audit")
    config = {
        "storage": {"warehouse": str(root / "warehouse")},
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": CLI_TEST_SPARK_CONF},
        "model": {"path": str(demo_assets.model_dir), "family": "tiny"},
        "corpus": {"id": "demo", "format": "jsonl", "path": str(demo_assets.corpus_dir)},
        "index": {"n": 20, "bucket_bits": 2},
        # A decaying temperature and public-text prompts: resuming must reproduce both exactly.
        "generation": {"budget_tokens": 800, "batch_size": 8, "samples_per_task": 8, "chunk_samples": 8,
                       "seed": 7, "sampling": {"max_new_tokens": 48, "temperature": 1.0, "top_k": 40,
                                               "temperature_start": 10.0, "temperature_decay_tokens": 20},
                       "prompts": [{"strategy": "empty", "share": 0.5},
                                   {"strategy": "public_prefix", "share": 0.5,
                                    "source": str(demo_assets.prompts_path)}]},
        "steps": ["index", "generate", "match"],
    }
    path = root / "audit.yaml"
    path.write_text(yaml.safe_dump(config))
    cfg = load_config(path)
    run_audit(spark, cfg, run_id="reference")
    return path, cfg


def run_rows(spark, cfg, table, run_id):
    return Tables(spark, cfg).read(table).where(F.col("run_id") == run_id).select(COMPARE[table])


def assert_same_findings(spark, cfg, run_id, reference="reference"):
    for table in COMPARE:
        assertDataFrameEqual(run_rows(spark, cfg, table, run_id), run_rows(spark, cfg, table, reference))


def cli(config: Path, *args: str) -> list[str]:
    """An audit process; the corpus was indexed by the reference audit, so later processes
    skip the (no-op) index step and pay only for what the test is about."""
    return [sys.executable, "-m", "extraction_audit.cli", "audit", "--config", str(config),
            "--steps", "generate,match", *args]


def kill_when(cmd: list[str], ready, timeout: float = 900) -> None:
    """Start the audit as its own process group and SIGKILL the whole group (Python,
    the Spark JVM and its Python workers) once ``ready()`` holds."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=env)
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            if ready():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return
            if proc.poll() is not None:
                pytest.fail(f"audit finished (rc={proc.returncode}) before the kill point was reached")
            time.sleep(0.5)
        pytest.fail("kill point not reached in time")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def status(spark, cfg, run_id):
    rows = Tables(spark, cfg).read("runs").where(F.col("run_id") == run_id).collect()
    return rows[0].status if rows else None


CLUSTER = ("--set", "spark.master=local-cluster[2,1,1024]")


def test_killed_mid_generation_and_mid_match_then_rerun_on_separate_executors_equals_uninterrupted(
        spark, audit_setup):
    """Three processes of one run: the first is killed once it has committed a generation
    chunk; the second, on a real multi-executor master (separate executor JVMs and Python
    workers, as on a cluster), resumes generation and is killed mid-match; the third
    finishes the match.  The findings equal the uninterrupted in-process reference, so
    generation gives the same rows on separate executors as locally, and a killed step
    resumes to the same rows: the samples committed before the kill are kept as they were,
    and the resumed step generates only the rest (its statistics count the samples already
    there).  One process of the three pays for executor JVMs (local-cluster start-up and
    warm-up is the test's largest cost)."""
    path, cfg = audit_setup
    warehouse = Path(cfg.storage.warehouse)
    run_id = "killed"
    # Killed once a chunk's commit is in the samples table's log (its data files come first).
    log = warehouse / "samples" / "_delta_log"
    kill_when(cli(path, "--run-id", run_id),
              lambda: any(f"run_id={run_id}/" in p.read_text(errors="replace") for p in log.glob("*.json")))
    assert status(spark, cfg, run_id) == "running:generate"  # the kill left no chance to finish or fail
    snapshot = run_rows(spark, cfg, "samples", run_id)
    committed = spark.createDataFrame(snapshot.collect(), snapshot.schema)
    assert 0 < committed.count() < run_rows(spark, cfg, "samples", "reference").count()

    staging = warehouse / "_staging" / run_id / "match"
    apps_before = set(local_cluster.work_dir().glob("app-*"))
    kill_when(cli(path, "--run-id", run_id, *CLUSTER), lambda: staging.exists())
    # The killed process's executors left their folders (a copy of every jar each); the
    # sweep the next local-cluster session makes removes them, as no executor works there.
    left = set(local_cluster.work_dir().glob("app-*")) - apps_before
    assert left, "a local-cluster executor folder was expected"
    deadline = time.time() + 60  # executors exit once they see their driver gone
    while any(app.exists() for app in left) and time.time() < deadline:
        local_cluster.sweep()
        time.sleep(0.5)
    assert not any(app.exists() for app in left)
    assert status(spark, cfg, run_id) == "running:match"
    assert "generate" in Tables(spark, cfg).read("runs").where(F.col("run_id") == run_id).collect()[0].steps_done
    generate = Tables(spark, cfg).read("run_steps").where((F.col("run_id") == run_id) & (F.col("step") == "generate"))
    assert json.loads(generate.first().stats)["samples_already_present"] == committed.count()

    done = subprocess.run(cli(path, "--run-id", run_id), capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert status(spark, cfg, run_id) == "complete"
    samples = Tables(spark, cfg).read("samples").where(F.col("run_id") == run_id)
    assert samples.count() == samples.select("sample_id").distinct().count()
    assert_same_findings(spark, cfg, run_id)
    # Samples committed before the kill were kept as they were.
    assertDataFrameEqual(run_rows(spark, cfg, "samples", run_id).join(committed.select("sample_id"), "sample_id",
                                                                     "left_semi"), committed)


def test_concurrent_runs_both_land(spark, audit_setup):
    path, cfg = audit_setup
    tables = Tables(spark, cfg)
    ref = tables.read("samples").where(F.col("run_id") == "reference")
    runs = tables.read("runs").where(F.col("run_id") == "reference")
    steps = tables.read("run_steps").where((F.col("run_id") == "reference") & (F.col("step") == "generate"))
    # conc_b was planned with pii as well: ``audit --steps match`` must not narrow its plan.
    wider = F.array_union(F.col("steps_planned"), F.array(F.lit("pii")))
    for run_id in ("conc_a", "conc_b"):
        tables.merge("samples", ref.withColumn("run_id", F.lit(run_id)))
        tables.merge("runs", runs.withColumn("run_id", F.lit(run_id))
                     .withColumn("steps_planned", wider if run_id == "conc_b" else F.col("steps_planned")))
        tables.merge("run_steps", steps.withColumn("run_id", F.lit(run_id)))
    errors = []

    def go(run_id):
        try:
            run_audit(spark, cfg, run_id=run_id, steps=["match"])
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=go, args=(r,)) for r in ("conc_a", "conc_b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert status(spark, cfg, "conc_a") == "complete"
    assert status(spark, cfg, "conc_b") == "pending:pii"
    planned = tables.read("runs").where(F.col("run_id") == "conc_b").first().steps_planned
    assert "pii" in planned and "match" in planned
    # conc_b's metrics wait for its pii step (metrics reads the pii findings).
    assert tables.read("run_metrics").where(F.col("run_id") == "conc_b").isEmpty()
    # Asked for by name, metrics does not wait: it needs pii first, and nothing is written.
    with pytest.raises(UserFacingError, match="needs pii first"):
        run_audit(spark, cfg, run_id="conc_b", steps=["metrics"])
    assert status(spark, cfg, "conc_b") == "pending:pii"
    assert tables.read("run_metrics").where(F.col("run_id") == "conc_b").isEmpty()
    findings = ("passage_occurrences", "extracted_passages")
    for run_id, compared in (("conc_a", (*findings, "run_metrics")), ("conc_b", findings)):
        for table in compared:
            assertDataFrameEqual(run_rows(spark, cfg, table, run_id), run_rows(spark, cfg, table, "reference"))


def test_bad_input_gives_one_clear_error_and_never_a_complete_run(spark, audit_setup, tmp_path, capsys):
    from extraction_audit.cli import main

    path, cfg = audit_setup
    code = main(["audit", "--config", str(path), "--run-id", "nomodel", "--set", f"model.path={tmp_path}/missing"])
    err = capsys.readouterr().err
    assert code == 2 and "model" in err and "does not exist" in err and "Traceback" not in err
    assert status(spark, cfg, "nomodel") is None  # refused before the run row was written

    # A run whose tokenizer differs from the index's: refused before any finding is written.
    tables = Tables(spark, cfg)
    ref = tables.read("runs").where(F.col("run_id") == "reference")
    tables.merge("runs", ref.withColumn("run_id", F.lit("othertok")).withColumn("tokenizer", F.lit("gpt2@ffff")))
    tables.merge("samples", tables.read("samples").where(F.col("run_id") == "reference")
                 .withColumn("run_id", F.lit("othertok")))
    tables.merge("run_steps", tables.read("run_steps").where((F.col("run_id") == "reference")
                                                             & F.col("step").isin("index", "generate"))
                 .withColumn("run_id", F.lit("othertok")))
    code = main(["match", "--config", str(path), "--run-id", "othertok"])
    err = capsys.readouterr().err
    assert code == 2 and "tokenizer mismatch" in err
    assert tables.read("passage_occurrences").where(F.col("run_id") == "othertok").count() == 0

    code = main(["audit", "--config", str(path), "--run-id", "othertok", "--steps", "match"])
    capsys.readouterr()
    assert code == 2
    assert status(spark, cfg, "othertok") == "failed:match"


def test_match_input_imports_and_matches_in_one_command(spark, audit_setup, tmp_path, capsys):
    """``match --input``: samples generated elsewhere are imported and matched in one process;
    the reference's generated tokens, imported as token ids, give the reference's passages."""
    from extraction_audit.cli import main

    path, cfg = audit_setup
    tables = Tables(spark, cfg)
    samples = tables.read("samples").where(F.col("run_id") == "reference").orderBy("sample_id").collect()
    jsonl = tmp_path / "elsewhere.jsonl"
    jsonl.write_text("".join(json.dumps({"id": f"s{r.sample_id}", "token_ids": list(r.token_ids)}) + "\n"
                             for r in samples) + "{broken\n")
    assert main(["match", "--config", str(path), "--run-id", "elsewhere", "--input", str(jsonl)]) == 0
    out = capsys.readouterr().out
    assert f"imported {len(samples)} of {len(samples) + 1} records" in out and "malformed_record: 1" in out
    steps = {r.step: r.status for r in tables.read("run_steps").where(F.col("run_id") == "elsewhere").collect()}
    assert steps == {"import_samples": "done", "match": "done", "metrics": "done"}
    assert status(spark, cfg, "elsewhere") == "complete"
    columns = ["token_ids", "n_samples", "doc_count", "doc_count_is_exact", "example_doc_ids", "is_low_entropy"]
    passages = tables.read("extracted_passages")
    assertDataFrameEqual(passages.where(F.col("run_id") == "elsewhere").select(columns),
                         passages.where(F.col("run_id") == "reference").select(columns))
