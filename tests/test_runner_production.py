"""The production path as an operator runs it: the Databricks bundle's tasks as separate CLI
processes with one run id (match and rank in parallel), then the run's state, the quiet
console, and a purge that leaves no copy behind.  The run id looks like SQL (but is legal):
another run's rows, planted in every run-keyed table before the tasks start, must come
through every step and the purge untouched."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from pyspark.sql import functions as F

from conftest import CLI_TEST_SPARK_CONF, seed_warehouse
from extraction_audit.cli import main
from extraction_audit.config import load_config
from extraction_audit.tables import Tables

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# Legal under the run-id pattern, but SQL if it were ever formatted into a predicate unquoted
# ("--" opens a comment) or quoted by hand ("or-1" after a stray quote).
RUN = "nightly-1-or-1--"
VICTIM = "victim"
CORPUS_TABLES = ("corpus_documents", "corpus_anchors", "corpus_doc_numbers", "corpus_index", "corpus_index_builds",
                 "pii_corpus_index", "pii_corpus_doc_values", "pii_corpus_scanned")


def bundle_task_commands(config: Path, variables: dict[str, str]) -> dict[str, tuple[list[str], list[str]]]:
    """{task: (CLI argv, depends_on)} from resources/extraction_audit.job.yml, variables filled in."""
    job = next(iter(yaml.safe_load((ROOT / "resources" / "extraction_audit.job.yml").read_text())
                    ["resources"]["jobs"].values()))

    def fill(arg: str) -> str:
        arg = re.sub(r"\$\{var\.([a-z_]+)\}", lambda m: variables[m.group(1)], arg)
        return arg.replace("{{job.parameters.run_id}}", RUN)

    tasks = {}
    for task in job["tasks"]:
        if "python_wheel_task" in task:
            argv = [fill(a) for a in task["python_wheel_task"]["parameters"]]
        else:
            step = Path(task["spark_python_task"]["python_file"]).name.removesuffix("_job.py")
            argv = [step] + [fill(a) for a in task["spark_python_task"]["parameters"]]
        tasks[task["task_key"]] = (argv, [d["task_key"] for d in task.get("depends_on", [])])
    return tasks


def _planted_rows(spark, tables: Tables, run_id: str) -> dict[str, int]:
    """One row of ``run_id`` in every table keyed by run id (type defaults in every column):
    what another run leaves in a shared warehouse.  Returns {table: rows of the run}."""
    import datetime

    from extraction_audit.tables import TABLES

    defaults = {"STRING": run_id, "INT": 0, "BIGINT": 0, "DOUBLE": 0.0, "BOOLEAN": False,
                "TIMESTAMP": datetime.datetime(2026, 1, 1), "ARRAY<INT>": [], "ARRAY<STRING>": []}
    keyed = {name: spec for name, spec in TABLES.items() if "run_id" in spec.column_names}

    def plant(name):
        spec = keyed[name]
        tables.append(name, spark.createDataFrame([tuple(defaults[t] for _, t, _ in spec.columns)], spec.schema))

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(plant, keyed))
    return dict.fromkeys(keyed, 1)


def _rows_of(tables: Tables, run_id: str, names) -> dict[str, int]:
    """{table: rows of the run}, counted in one Spark job over all the tables."""
    names = list(names)
    parts = [tables.read(t).where(F.col("run_id") == run_id).select(F.lit(t).alias("table")) for t in names]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    counted = {r["table"]: r["count"] for r in union.groupBy("table").count().collect()}
    return {t: counted.get(t, 0) for t in names}


@pytest.fixture(scope="module")
def bundle_run(spark, demo_assets, tmp_path_factory):
    """Run the bundle's task graph: each task a separate process, ready tasks in parallel."""
    from extraction_audit.demo import demo_config

    root = tmp_path_factory.mktemp("bundle")
    store = root / "ea"
    cfg = demo_config(demo_assets, budget_tokens=1200, warehouse=str(store / "warehouse"))
    data = cfg.model_dump(exclude={"base_dir"})
    data["storage"].update(cache_dir=str(store / "cache"), allow_raw_pii=True, retention_hours=0)
    data["spark"].update(master="local[2]", shuffle_partitions=2, log_file=str(store / "logs" / "spark.log"),
                         conf=CLI_TEST_SPARK_CONF)
    data["index"].update(n=20, bucket_bits=2)
    data["generation"].update(batch_size=8, samples_per_task=16, chunk_samples=32)
    data["generation"]["sampling"]["max_new_tokens"] = 48
    # No chance baseline (a second matching pass over held-out text, 17.6 s of the report
    # task, 38.1 s -> 20.5 s): test_report_build runs it through the matching stage.
    data["report"].update(output_dir=str(store / "reports"), bootstrap_samples=50, holdout_source=None)
    data["rank"].update(batch_size=16)
    # Two probes per stratum: the step runs end to end without generating for every document
    # opening (the default is 100 per stratum); the step's cost here is mostly its fixed cost.
    data["probe"].update(per_stratum=2)
    path = root / "audit.yaml"
    path.write_text(yaml.safe_dump(data))
    variables = {"config": str(path), "model_path": str(demo_assets.model_dir), "budget_tokens": "1200",
                 "corpus_table": "unused"}
    tasks = bundle_task_commands(path, variables)
    # A shared warehouse: the empty tables (as ``Tables.ensure_all`` made them) and another
    # run's rows in every table keyed by run id.
    seed_warehouse(store / "warehouse")
    planted = _planted_rows(spark, Tables(spark, load_config(path)), VICTIM)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    outputs: dict[str, subprocess.CompletedProcess] = {}

    def launch(name):
        return name, subprocess.run([sys.executable, "-m", "extraction_audit.cli", *tasks[name][0]],
                                    capture_output=True, text=True, timeout=900, env=env, cwd=root)

    # Like the Jobs scheduler: a task starts as soon as the tasks it depends on are done.
    pending = dict(tasks)
    with ThreadPoolExecutor(max_workers=2) as pool:
        running = set()
        while pending or running:
            ready = [t for t, (_, deps) in pending.items() if all(d in outputs for d in deps)]
            assert ready or running, f"bundle task graph is stuck at {sorted(pending)}"
            for name in ready:
                running.add(pool.submit(launch, name))
                pending.pop(name)
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                name, done = future.result()
                assert done.returncode == 0, f"task {name} failed:\n{done.stderr[-3000:]}"
                outputs[name] = done
    return load_config(path), path, outputs, root, planted


def test_bundle_tasks_complete_the_run_with_one_row_per_step(spark, bundle_run):
    cfg, _, outputs, _, _ = bundle_run
    assert {"match", "rank"} <= set(outputs), "the bundle runs rank beside match"
    tables = Tables(spark, cfg)
    run = tables.read("runs").where(F.col("run_id") == RUN).first()
    assert run.status == "complete" and run.finished_at is not None
    steps = tables.read("run_steps").where(F.col("run_id") == RUN).toPandas()
    assert steps["step"].is_unique
    assert set(steps["step"]) == {"index", "generate", "match", "pii", "metrics", "rank", "calibrate", "probe",
                                  "report"}
    assert (steps["status"] == "done").all() and (steps["attempt"] == 1).all()
    assert (steps["spark_jobs"] > 0).all()
    assert set(run.steps_done) == set(steps["step"])

    metrics = tables.read("run_metrics").where(F.col("run_id") == RUN).orderBy(F.desc("budget_tokens")).first()
    pii_values = tables.read("pii_findings").where(F.col("run_id") == RUN).select("value_key").distinct().count()
    assert metrics.pii_found == pii_values
    assert metrics.distinct_ngrams > 0
    # Scratch space of finished steps is gone.
    scratch = Path(cfg.storage.warehouse) / "_staging" / RUN
    assert not scratch.exists() or not any(p.is_file() for p in scratch.rglob("*"))


def test_console_shows_progress_not_spark_noise(bundle_run):
    cfg, _, outputs, _, _ = bundle_run
    console = "\n".join(o.stdout + o.stderr for o in outputs.values())
    for noise in ("WARN", "Ivy", ":: resolving", "WindowExec", "Could not validate number of records"):
        noisy = [f"{task}: {line}" for task, o in outputs.items() for line in (o.stdout + o.stderr).splitlines()
                 if noise in line]
        assert not noisy, noisy[:5]
    assert "step match done" in console
    spark_log = Path(cfg.spark.log_file).read_text(errors="replace")
    assert "No Partition Defined for Window operation" not in spark_log


def test_sql_looking_run_id_touches_only_its_own_rows(spark, bundle_run):
    """Every step wrote the run's rows under its SQL-looking id, and another run's rows in
    every run-keyed table came through untouched."""
    cfg, _, _, _, planted = bundle_run
    tables = Tables(spark, cfg)
    assert _rows_of(tables, VICTIM, planted) == planted
    own = _rows_of(tables, RUN, ("samples", "passage_occurrences", "extracted_passages", "matched_windows",
                                  "run_metrics", "candidates", "probes", "runs"))
    assert all(own.values()), own


def _needles(spark, cfg) -> list[str]:
    tables = Tables(spark, cfg)
    texts = [r.text for r in tables.read("samples").where(F.col("run_id") == RUN).select("text").collect()]
    needles = [" ".join(t.split())[:40] for t in texts if t and len(" ".join(t.split())) >= 40]
    raw = [r.value for r in tables.read("pii_findings").where(F.col("run_id") == RUN).select("value").collect()
           if r.value and len(r.value) >= 8]
    return [n for n in needles if len(set(n)) > 8] + raw


def _files_holding(root: Path, needles: list[str]) -> dict[str, str]:
    """Every file under ``root`` outside the corpus tables whose content holds a needle
    (parquet decoded with pyarrow, everything else read as bytes)."""
    found = {}
    for path in root.rglob("*"):
        if not path.is_file() or any(part in CORPUS_TABLES for part in path.parts):
            continue
        if path.suffix == ".parquet":
            content = json.dumps(pq.read_table(path).to_pylist(), default=str)
        else:
            content = path.read_bytes().decode("utf-8", errors="replace")
        content = " ".join(content.split())
        hit = next((n for n in needles if n in content), None)
        if hit:
            found[str(path.relative_to(root))] = hit
    return found


def test_purge_with_vacuum_leaves_no_copy_of_the_run(spark, bundle_run, capsys):
    """Erasure of one run: every copy the product wrote (tables, scratch, reports, review
    exports) is gone after ``purge --vacuum``, another run's rows and files stay, raw personal
    values (stored: this config allows it) never reach a Delta log's statistics, and purging
    again is a no-op."""
    cfg, path, _, root, planted = bundle_run
    tables = Tables(spark, cfg)
    elsewhere = root / "review-queue"
    assert main(["review", "export", "--config", str(path), "--run-id", RUN, "--out", str(elsewhere),
                 "--top", "5"]) == 0
    keep_text = "Keep: Jane Smith paid with card 4111 1111 1111 1111 on the phone."
    tables.merge("samples", tables.read("samples").where(F.col("run_id") == RUN).limit(1)
                 .withColumn("run_id", F.lit("keep")).withColumn("text", F.lit(keep_text))
                 .withColumn("prompt_text", F.lit("")).withColumn("prompt_token_ids", F.array().cast("array<int>")))
    tables.merge("run_metrics", tables.read("run_metrics").where(F.col("run_id") == RUN)
                 .withColumn("run_id", F.lit("keep")))
    # One finding with a known raw value, whatever the tiny model happened to emit.
    tables.merge("pii_findings", spark.createDataFrame(
        [(RUN, 0, "email", 10_000, 10_021, "b***@example.org", "known-email", "bob.brown@example.org", "email")],
        "run_id STRING, sample_id BIGINT, entity_type STRING, char_start INT, char_end INT, "
        "value_redacted STRING, value_key STRING, value STRING, detector STRING"))
    run_rows = _rows_of(tables, RUN, ("samples", "run_metrics"))
    needles = _needles(spark, cfg)
    assert len(needles) >= 5 and "bob.brown@example.org" in needles
    raw = [r.value for r in tables.read("pii_findings").where(F.col("run_id") == RUN).collect()]
    assert all(raw), "allowed raw values are stored"
    before = _files_holding(root, needles)
    assert any(k.startswith("ea/warehouse/samples") for k in before), before  # the check sees the data
    assert any(k.startswith("ea/warehouse/pii_findings") for k in before), before
    assert any(k.startswith("ea/reports") for k in before) and any(k.startswith("review-queue") for k in before)
    # ... but no generated text or raw value is ever copied into a Delta log (column statistics).
    logs = " ".join(p.read_text(errors="replace") for p in (root / "ea" / "warehouse").glob("*/_delta_log/*.json"))
    assert not [v for v in raw + needles if v in logs]

    capsys.readouterr()
    assert main(["purge", "--config", str(path), "--run-id", RUN, "--vacuum"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["rows_deleted"]["samples"] == run_rows["samples"]
    assert stats["rows_deleted"]["run_metrics"] == run_rows["run_metrics"]
    assert stats["rows_deleted"]["runs"] == 1 and stats["rows_deleted"]["pii_findings"] == len(raw)
    assert {"samples", "pii_findings"} <= set(stats["vacuumed"])
    assert _files_holding(root, needles) == {}
    assert tables.read("runs").where(F.col("run_id") == RUN).count() == 0
    assert tables.read("run_steps").where(F.col("run_id") == RUN).count() == 0
    kept = _rows_of(tables, "keep", ("samples", "run_metrics"))
    assert kept == {"samples": 1, "run_metrics": run_rows["run_metrics"]}  # another run's rows stay
    assert _rows_of(tables, VICTIM, planted) == planted
    assert _files_holding(root, [keep_text])
    assert main(["purge", "--config", str(path), "--run-id", RUN]) == 0
    assert json.loads(capsys.readouterr().out)["rows_deleted_total"] == 0  # purging again is a no-op


def cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exit_:  # usage errors exit from argparse, as on the command line
        return int(exit_.code)


HOSTILE = ["q'or'1'='1", "a\\b", "--", "x" * 300, "", "run id", "r;DROP"]
COMMANDS = [
    ["generate"], ["import-samples", "--input", "x.jsonl"], ["match"],
    ["match", "--input", "x.jsonl"], ["pii"], ["rank"], ["report"], ["audit"],
    ["purge"], ["review", "export"], ["review", "summary"], ["index"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c))
def test_hostile_run_ids_are_refused_before_anything_is_touched(command, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"storage": {"warehouse": str(tmp_path / "wh")}}))
    for bad in HOSTILE:
        # "--" is given as its own argument: argparse reads "--run-id=--" as no value at all.
        code = cli([*command, "--config", str(config), *(["--run-id", bad] if bad == "--" else [f"--run-id={bad}"])])
        err = capsys.readouterr().err.strip()
        assert code == 2, (command, bad)
        assert len(err.splitlines()) == 1 and "run-id" in err, err
        assert ("not valid" if bad != "--" else "expected one argument") in err, err
    code = main(["audit", "--config", str(config), "--run-id", "ok", "--control-run-id", "x'y"])
    assert code == 2 and "control-run-id" in capsys.readouterr().err
    code = main(["report", "--config", str(config), "--run-id", "ok", "--compare", "a", "b'c"])
    assert code == 2 and "compare" in capsys.readouterr().err
    assert not (tmp_path / "wh").exists()


def test_hostile_corpus_id_is_a_config_error(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"corpus": {"id": "c' OR '1'='1"}}))
    assert main(["index", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "corpus.id" in err and "not a valid corpus id" in err and "Traceback" not in err
