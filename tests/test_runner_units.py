"""Small pieces of the runner: id validation, status derivation, planned steps, and the
partitioned global order that replaces single-partition windows."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from conftest import at_once, make_config
from extraction_audit.errors import UserFacingError
from extraction_audit.ids import id_predicate, is_valid_id, validate_id
from extraction_audit.ordering import ordered
from extraction_audit.runner import derive_run_fields
from extraction_audit.stages import STAGES, STEP_ORDER, audit_steps, planned_steps
from extraction_audit.tables import Tables, with_conflict_retries


@pytest.mark.parametrize("good", ["a", "audit-123", "nightly:2026-11-30.1", "A_b.c:d-e", "1-or-1--", "x" * 128])
def test_legal_ids(good):
    assert validate_id(good) == good and is_valid_id(good)


@pytest.mark.parametrize("bad", ["", "-a", ".a", "a'b", "a\\b", "a b", "a;b", "a/b", "a\nb", "x" * 129, None, 7])
def test_illegal_ids_raise_one_line(bad):
    with pytest.raises(UserFacingError) as err:
        validate_id(bad)
    assert "\n" not in str(err.value)


def test_id_predicate_only_takes_validated_values_and_plain_columns():
    assert id_predicate("t.run_id", "r-1") == "t.run_id = 'r-1'"
    with pytest.raises(UserFacingError):
        id_predicate("run_id", "x' OR '1'='1")
    with pytest.raises(ValueError):
        id_predicate("run_id = 'a' OR run_id", "a")


def _state(**steps):
    t = datetime(2026, 1, 1)
    return {name: {"status": status, "started_at": t, "finished_at": t if status != "running" else None,
                   "stats": "{}", "error": "boom" if status == "failed" else None}
            for name, status in steps.items()}


def test_status_follows_the_steps():
    plan = ["generate", "match", "metrics"]
    assert derive_run_fields(plan, {}, {})["status"] == "created"
    assert derive_run_fields(plan, _state(generate="running"), {})["status"] == "running:generate"
    assert derive_run_fields(plan, _state(generate="done"), {})["status"] == "pending:match"
    failed = derive_run_fields(plan, _state(generate="done", match="failed"), {})
    assert failed["status"] == "failed:match" and failed["error"] == "boom"
    stale = derive_run_fields(plan, _state(generate="done", match="stale", metrics="done"), {})
    assert stale["status"] == "pending:match" and stale["finished_at"] is None
    done = derive_run_fields(plan, _state(index="done", generate="done", match="done", metrics="done"), {})
    assert done["status"] == "complete" and done["finished_at"] is not None
    assert done["steps_done"] == ["index", "generate", "match", "metrics"]


def test_planned_steps_add_derived_steps_and_leave_index_to_the_corpus(tmp_path):
    cfg = make_config(tmp_path)
    assert planned_steps(cfg) == ["generate", "match", "pii", "metrics", "rank", "calibrate", "report"]
    assert planned_steps(cfg, imported=True)[0] == "import_samples"
    assert planned_steps(cfg, ["generate", "rank"]) == ["generate", "rank"]
    assert audit_steps(cfg, ["index", "generate", "match"]) == ["index", "generate", "match", "metrics"]
    for stage in STAGES.values():  # every dependency is a known step that comes earlier
        assert all(STEP_ORDER.index(d) < STEP_ORDER.index(stage.name) for d in stage.depends_on)


def test_ordered_equals_a_global_sort_across_many_ranges(spark, tmp_path):
    rng = np.random.default_rng(3)
    n = 2000
    pdf = pd.DataFrame({"group": rng.choice(["a", "b", "c"], n), "key": rng.integers(0, 50, n).astype(float),
                        "sample_id": np.arange(n, dtype=np.int64), "tokens": rng.integers(1, 9, n)})
    df = spark.createDataFrame(pdf)
    out = ordered(df, [F.col("key").desc(), F.col("sample_id").asc()], partition_by=["group"],
                  row_number="rn", running_sums={"cum": F.col("tokens")}, parts=7,
                  scratch=str(tmp_path / "scratch")).toPandas()
    expect = pdf.sort_values(["group", "key", "sample_id"], ascending=[True, False, True]).copy()
    expect["rn"] = expect.groupby("group").cumcount() + 1
    expect["cum"] = expect.groupby("group")["tokens"].cumsum()
    got = out.set_index("sample_id").loc[expect["sample_id"]]
    assert (got["rn"].to_numpy() == expect["rn"].to_numpy()).all()
    assert (got["cum"].to_numpy() == expect["cum"].to_numpy()).all()
    # Without a scratch folder (local checkpoint) and without groups.
    plain = ordered(df, [F.col("sample_id").asc()], row_number="rn", parts=5).toPandas().sort_values("sample_id")
    assert (plain["rn"].to_numpy() == np.arange(1, n + 1)).all()
    # No rows at all (a run with no samples yet): an empty result with the new columns.
    empty = ordered(df.limit(0), [F.col("sample_id").asc()], partition_by=["group"], row_number="rn",
                    running_sums={"cum": F.col("tokens")}, parts=3)
    assert empty.count() == 0 and {"rn", "cum"} <= set(empty.columns)


def test_a_derived_step_claimed_by_two_processes_at_once_runs_once(spark, tmp_path):
    """Two runners finishing the last input of a derived step at the same moment (the bundle
    runs rank beside match and pii): exactly one claims it; a failed or stale step can be
    claimed again, a running or done one cannot."""
    from extraction_audit.runs import RunRecord

    tables = Tables(spark, make_config(tmp_path))
    record = RunRecord(tables, "claim-run")
    wins = []
    errors = at_once(lambda: wins.append(RunRecord(tables, "claim-run").claim_step("calibrate")))
    assert not errors, errors
    assert sorted(wins) == [False, True]
    assert record.steps()["calibrate"]["attempt"] == 1
    assert record.claim_step("calibrate") is False          # running elsewhere
    record.step_finished("calibrate", "failed", 1.0, 1, error="boom")
    assert record.claim_step("calibrate") is True           # a failed step is claimed again
    assert record.steps()["calibrate"]["attempt"] == 2
    record.step_finished("calibrate", "done", 1.0, 1, stats={})
    assert record.claim_step("calibrate") is False          # done


def test_a_commit_conflict_is_retried_and_other_errors_are_not():
    """Delta reports a table another writer created first as ``ProtocolChangedException``."""
    class ProtocolChangedException(Exception):
        pass

    calls = []

    def create():
        calls.append(1)
        if len(calls) == 1:
            raise ProtocolChangedException("[DELTA_PROTOCOL_CHANGED] The protocol version of the Delta table has "
                                           "been changed by a concurrent update.")
        return "created"

    assert with_conflict_retries(create, "create runs") == "created" and len(calls) == 2

    def broken():
        calls.append(1)
        raise ValueError("[DELTA_MISSING_COLUMN] not a conflict")

    calls.clear()
    with pytest.raises(ValueError):
        with_conflict_retries(broken, "write")
    assert len(calls) == 1


def test_two_threads_create_the_run_tables_of_a_fresh_warehouse_at_once(spark, tmp_path):
    """The demo's two audits start together on an empty warehouse: both create ``runs``."""
    cfg = make_config(tmp_path, seed_tables=False)
    names = ("runs", "run_steps", "run_artifacts")

    def create():
        tables = Tables(spark, cfg)
        for name in names:
            tables.ensure(name)

    errors = at_once(create)
    assert not errors, errors
    tables = Tables(spark, cfg)
    assert all(tables.exists(name) for name in names)


def test_a_run_created_here_is_kept_as_stored_and_one_created_elsewhere_is_read(spark, tmp_path):
    """``create`` keeps the row it inserted instead of reading it back: what ``get`` then
    returns must equal the stored row, column for column.  Two creators at once: one inserts,
    the other reads the winner's row."""
    from extraction_audit.runs import RunRecord

    cfg = make_config(tmp_path)
    tables = Tables(spark, cfg)
    record = RunRecord(tables, "created-here")
    assert record.create(cfg, steps_planned=["generate", "match"], control_run_id="ctl") is True
    kept = record.get()
    assert kept == RunRecord(tables, "created-here").get(refresh=True)
    assert kept["steps_planned"] == ["generate", "match"] and kept["control_run_id"] == "ctl"
    assert RunRecord(tables, "created-here").create(cfg, steps_planned=["report"]) is False  # kept the original

    results = []
    errors = at_once(lambda: results.append(RunRecord(tables, "raced").create(cfg, steps_planned=[f"x{len(results)}"])))
    assert not errors, errors
    assert sorted(results) == [False, True]
    assert tables.read("runs").where(F.col("run_id") == "raced").count() == 1


def test_the_first_step_prepares_in_the_background_and_waits_before_it_begins(spark, tmp_path, monkeypatch):
    """``Stage.prepare`` (loading the tokenizer) starts before the runner's first run-state
    reads and writes and is finished before the step's ``begin``; an error in it is the
    step's to report, not the background thread's."""
    import dataclasses
    import threading

    from extraction_audit import stages as S

    events = []
    gate = threading.Event()

    def prepare(cfg):
        events.append(("prepare started", threading.current_thread().name))
        gate.wait(10)
        events.append(("prepare done", None))
        raise RuntimeError("dropped: the stage reports its own errors")

    def begin(ctx):
        events.append(("begin", None))
        return {}

    stage = dataclasses.replace(S.STAGES["import_samples"], check=None, prepare=prepare, begin=begin,
                                run=lambda ctx: {"run_tokens": 0}, finish=None)
    monkeypatch.setitem(S.STAGES, "import_samples", stage)
    from extraction_audit.runner import Runner

    cfg = make_config(tmp_path)
    threading.Timer(1.0, gate.set).start()  # released while the runner writes run state
    Runner(spark, cfg).run_step("prepared", "import_samples")
    assert [e[0] for e in events] == ["prepare started", "prepare done", "begin"]
    assert events[0][1] == "prepare-import_samples"


def test_a_minted_run_is_appended_unread_and_read_once_stored(spark, tmp_path, monkeypatch):
    """An id this process minted cannot be stored yet: its ``runs`` row and first step row
    are appended without reading either table (a fresh process's first reads cost seconds,
    and appends do not conflict with other runs' writes).  Once stored, a second runner of
    the same id reads it as usual: one ``runs`` row, one step row with a second attempt."""
    import dataclasses

    from extraction_audit import stages as S
    from extraction_audit.runner import Runner
    from extraction_audit.runs import new_run_id

    reads = []
    stage = dataclasses.replace(S.STAGES["import_samples"], check=None, prepare=None, begin=None,
                                run=lambda ctx: reads.append("(the step)") or {"run_tokens": 0}, finish=None)
    monkeypatch.setitem(S.STAGES, "import_samples", stage)
    cfg = make_config(tmp_path)
    tables = Tables(spark, cfg)
    real_read = Tables.read
    monkeypatch.setattr(Tables, "read", lambda self, name: reads.append(name) or real_read(self, name))
    run_id = new_run_id("minted")

    Runner(spark, cfg, tables).run_step(run_id, "import_samples")
    assert reads[0] == "(the step)" and "runs" not in reads  # run_steps is read after the step only
    reads.clear()
    Runner(spark, cfg, tables).run_step(run_id, "import_samples")
    assert "runs" in reads
    monkeypatch.undo()
    runs = Tables(spark, cfg).read("runs").where(F.col("run_id") == run_id).collect()
    steps = Tables(spark, cfg).read("run_steps").where(F.col("run_id") == run_id).collect()
    assert len(runs) == 1 and runs[0].status == "pending:match"
    assert [(s.step, s.attempt, s.status) for s in steps] == [("import_samples", 2, "done")]


def test_two_runs_writing_their_run_state_at_once_never_conflict(spark, tmp_path, caplog):
    """The demo's target and control, or two nightly audits of one warehouse, write their run
    state at the same moments.  The run-keyed tables are partitioned by run id and every write
    names its run, so neither commit reads a file the other wrote: Delta has nothing to
    reject and nothing is retried (with the tables unpartitioned, most of these writes were)."""
    import logging
    import threading

    from extraction_audit.runs import RunRecord

    cfg = make_config(tmp_path)
    tables = Tables(spark, cfg)
    runs = ["left", "right"]
    for run_id in runs:
        RunRecord(tables, run_id).create(cfg, steps_planned=["generate", "match"])
    together = threading.Barrier(len(runs), timeout=120)
    names = iter(runs)

    def run_state_writes():
        run_id = next(names)
        record = RunRecord(tables, run_id)
        metrics = spark.createDataFrame([(run_id, 100, 10)], "run_id STRING, budget_tokens BIGINT, generated_tokens BIGINT")
        writes = [lambda: record.step_started("generate"),
                  lambda: record.update(status="running:generate"),
                  lambda: record.finish_later("generate", "done", 1.0, 1, stats={}),
                  lambda: record.step_started("match"),  # the end of generate in the same commit
                  lambda: record.step_finished("match", "done", 1.0, 1, stats={}),
                  lambda: record.record_artifacts([f"/reports/{run_id}/report.html"], "report"),
                  lambda: tables.replace_run("run_metrics", metrics, run_id)]
        for write in writes:
            together.wait()
            write()

    caplog.set_level(logging.INFO, logger="extraction_audit.tables")
    errors = at_once(run_state_writes)
    assert not errors, errors
    retried = [r.getMessage() for r in caplog.records if "concurrent Delta commit" in r.getMessage()]
    assert retried == []
    for run_id in runs:
        steps = RunRecord(tables, run_id).steps()
        assert {s: (v["status"], v["attempt"]) for s, v in steps.items()} == {"generate": ("done", 1),
                                                                               "match": ("done", 1)}
        assert tables.read("runs").where(F.col("run_id") == run_id).first().status == "running:generate"
        assert tables.read("run_artifacts").where(F.col("run_id") == run_id).count() == 1
        assert tables.read("run_metrics").where(F.col("run_id") == run_id).count() == 1


def test_run_tables_of_an_earlier_unpartitioned_warehouse_keep_working(spark, tmp_path, monkeypatch):
    """Warehouses created before the run-state tables were partitioned by run id keep them as
    they are (Delta cannot repartition in place): every write still names its run, which
    there is a filter rather than a partition, and the run's state comes out the same."""
    import dataclasses

    from extraction_audit import stages as S
    from extraction_audit.runner import Runner
    from extraction_audit.tables import TABLES

    stage = dataclasses.replace(S.STAGES["import_samples"], check=None, prepare=None, begin=None,
                                run=lambda ctx: {"run_tokens": 0}, finish=None)
    monkeypatch.setitem(S.STAGES, "import_samples", stage)
    cfg = make_config(tmp_path, seed_tables=False)
    tables = Tables(spark, cfg)
    for name in ("runs", "run_steps"):
        spark.sql(f"CREATE TABLE {tables.ref(name)} ({TABLES[name].ddl}) USING DELTA")
    for _ in range(2):
        Runner(spark, cfg, tables).run_step("old-warehouse", "import_samples")
    for name in ("runs", "run_steps"):
        assert spark.sql(f"DESCRIBE DETAIL {tables.ref(name)}").first().partitionColumns == []
    runs = tables.read("runs").collect()
    steps = tables.read("run_steps").collect()
    assert [(r.run_id, r.status) for r in runs] == [("old-warehouse", "pending:match")]
    assert [(s.step, s.attempt, s.status) for s in steps] == [("import_samples", 2, "done")]
