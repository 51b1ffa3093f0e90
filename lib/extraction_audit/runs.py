"""Run state: the ``runs`` row, the ``run_steps`` rows and the ``run_artifacts`` list.

Only the runner (``runner.py``) writes ``runs`` and ``run_steps``; stages compute and
return statistics.  Every write is a keyed MERGE of one row, never a read-modify-write of a
JSON field, so two processes running different steps of one run (the bundle runs rank
beside match and pii) cannot lose each other's updates.  ``runs.status``, ``steps_done``
and ``step_stats`` are derived from ``run_steps`` after every step transition.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any, Iterable

from .config import AuditConfig
from .ids import id_predicate, validate_id
from .tables import RUN_ARTIFACTS, RUN_STEPS, RUNS, Tables, merge_row_counts, with_conflict_retries

#: Run ids this process minted (``new_run_id``): no other process knows them yet, so no
#: row of theirs can exist and their first writes need not read the tables.
_MINTED: set[str] = set()


def new_run_id(prefix: str = "run") -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    run_id = f"{prefix}-{stamp}-{uuid.uuid4().hex[:6]}"
    _MINTED.add(run_id)
    return run_id


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def prompt_strategy_label(cfg: AuditConfig) -> str:
    total = sum(p.share for p in cfg.generation.prompts) or 1.0
    return ",".join(f"{p.strategy}:{p.share / total:.3g}" for p in cfg.generation.prompts)


def readable_model_name(cfg: AuditConfig) -> str | None:
    """A name a reader recognises, beside ``runs.model`` (which may be a long local path):
    ``model.name``, else the model's own ``config.json`` (``_name_or_path`` when it is not a
    path, else ``model_type``), else the path's last part."""
    import json
    from pathlib import Path

    if cfg.model.name:
        return cfg.model.name
    path = cfg.model.path
    if not path:
        return None
    local = Path(cfg.resolve(path) or path)
    try:
        own = json.loads((local / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        own = {}
    named = str(own.get("_name_or_path") or "")
    if named and not named.startswith((".", "/", "~")) and named.count("/") <= 1:
        return named  # a hub id such as gpt2 or org/model
    base = local.name if local.name not in ("", ".") else str(path)
    return f"{base} ({own['model_type']})" if own.get("model_type") else base


def run_row_fields(cfg: AuditConfig) -> dict[str, Any]:
    """The ``runs`` columns a configuration determines (model, corpus, sampling, budget)."""
    return {
        "model": cfg.model.display_name,
        "model_name": readable_model_name(cfg),
        "model_family": cfg.model.family or cfg.model.display_name,
        "corpus_id": cfg.corpus.id,
        "prompt_strategy": prompt_strategy_label(cfg),
        "sampling": cfg.generation.sampling.model_dump_json(),
        "budget_tokens": cfg.generation.budget_tokens,
        "config_json": cfg.to_json(),
    }


class RunRecord:
    """One run's row in ``runs`` and its rows in ``run_steps``.

    The ``runs`` row is read once and then kept as this process last wrote it: every read
    of a Delta table costs a snapshot update and a job (seconds on a small machine), and
    only this record's owner writes the columns it reads back.  ``run_steps`` is always read
    fresh, since other processes write their own steps of the same run."""

    def __init__(self, tables: Tables, run_id: str):
        self.tables = tables
        self.run_id = validate_id(run_id)
        #: Minted by this process: the run's rows cannot exist before this record writes them.
        self.minted = self.run_id in _MINTED
        self._run: dict[str, Any] | None = None
        self._finished: tuple[str, dict[str, Any]] | None = None  # a step end held by ``finish_later``
        self._written_steps: set[str] = set()  # steps whose row this record wrote
        self._created = False  # this record inserted the run's row

    # -- runs ----------------------------------------------------------------
    def get(self, refresh: bool = False) -> dict[str, Any] | None:
        from pyspark.sql import functions as F

        if self._run is not None and not refresh:
            return dict(self._run)
        rows = self.tables.read("runs").where(F.col("run_id") == self.run_id).limit(1).collect()
        self._run = rows[0].asDict(recursive=True) if rows else None
        return dict(self._run) if self._run is not None else None

    def exists(self) -> bool:
        return self.get() is not None

    def create(self, cfg: AuditConfig, **fields: Any) -> bool:
        """Insert the run row if absent (a re-run of the same run_id keeps the original);
        True when this process inserted it.  A minted run's row is appended: nothing to
        match, and appends do not conflict with other runs' writes to the table."""
        row = {
            "run_id": self.run_id, "status": "created", "started_at": now(), "finished_at": None,
            "tokenizer": None, "generated_tokens": 0, "steps_done": [], "step_stats": "{}",
            "control_run_id": None, "error": None, "steps_planned": [],
            **run_row_fields(cfg),
        }
        row.update(fields)
        df = self.tables.spark.createDataFrame([row], schema=RUNS.schema)
        if self.minted:
            self.tables.append("runs", df)
            inserted = 1
            _MINTED.discard(self.run_id)  # stored now: a later record of it reads as usual
        else:
            inserted = self.tables.merge("runs", df, update=False, run_id=self.run_id)
        self._created = inserted == 1
        # Inserted by this process: stored as written, no need to read it back.  Otherwise
        # another process created it first: read what is stored.
        self._run = {c: row.get(c) for c in RUNS.column_names} if inserted == 1 else None
        return inserted == 1

    def update(self, **fields: Any) -> None:
        from pyspark.sql import functions as F

        if not fields:
            return
        types = {c: t for c, t, _ in RUNS.columns}
        spec = {k: (_string_array(v) if isinstance(v, (list, tuple)) else F.lit(v)).cast(types[k])
                for k, v in fields.items()}
        self.tables.update("runs", F.col("run_id") == self.run_id, spec)
        if self._run is not None:
            self._run.update({k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()})

    # -- run_steps -----------------------------------------------------------
    def steps(self) -> dict[str, dict[str, Any]]:
        from pyspark.sql import functions as F

        rows = self.tables.read("run_steps").where(F.col("run_id") == self.run_id).collect()
        steps = {r["step"]: r.asDict() for r in rows}
        if self._finished is not None:  # a step end held for the next commit, as it will be stored
            step, fields = self._finished
            steps[step] = {**steps.get(step, {}), **fields}
        return steps

    def step_started(self, step: str) -> None:
        """Mark ``step`` running; a retry increments ``attempt`` on the same row.  A step
        finished with ``finish_later`` is recorded done in the same commit."""
        self._merge_step(step, {"status": "running", "started_at": now(), "finished_at": None, "seconds": None,
                                "spark_jobs": None, "error": None, "attempt_id": uuid.uuid4().hex}, started=True)

    def step_finished(self, step: str, status: str, seconds: float, spark_jobs: int | None,
                      stats: dict | None = None, error: str | None = None) -> None:
        self.finish_later(step, status, seconds, spark_jobs, stats, error)
        self.flush()

    def finish_later(self, step: str, status: str, seconds: float, spark_jobs: int | None,
                     stats: dict | None = None, error: str | None = None) -> dict[str, Any]:
        """Hold ``step``'s end for the next step's start (``step_started`` / ``claim_step``),
        which records both in one MERGE: one Delta commit per step transition instead of two
        (each costs 7-12 Spark jobs and seconds on a small machine).  ``flush`` writes it
        alone when no step follows.  Returns the fields held, as they will be stored."""
        fields = {"status": status, "finished_at": now(), "seconds": round(seconds, 3), "spark_jobs": spark_jobs,
                  "error": error[:4000] if error else None}
        if stats is not None:
            fields["stats"] = json.dumps(stats, default=str, sort_keys=True)
        self.flush()
        self._finished = (step, fields)
        return dict(fields)

    def flush(self) -> bool:
        """Write a held step end on its own; True when there was one."""
        if self._finished is None:
            return False
        step, fields = self._finished
        self._update_step(step, fields)
        self._finished = None
        return True

    def claim_step(self, step: str) -> bool:
        """Mark ``step`` running unless another process is running it or has done it; True
        when this process won.  The MERGE's condition is evaluated inside Delta's optimistic
        transaction: of two processes claiming at once, one commits and the other's retry
        finds the row running, so it changes nothing and reads back another attempt_id."""
        token = uuid.uuid4().hex
        fields = {"status": "running", "started_at": now(), "finished_at": None, "seconds": None,
                  "spark_jobs": None, "error": None, "attempt_id": token}
        changed = self._merge_step(step, fields, started=True, only_if="t.status NOT IN ('running', 'done')")
        if changed is not None:
            # The MERGE's own row counts, from the attempt that committed: no read back.
            return changed == 1
        latest = self.steps().get(step) or {}
        return latest.get("attempt_id") == token

    def mark_stale(self, steps: Iterable[str]) -> None:
        """Steps whose inputs were redone: they run again before the run can be complete."""
        from pyspark.sql import functions as F

        steps = list(steps)
        if steps:  # an update rewrites the table's file: only when something is stale
            self.tables.update("run_steps", (F.col("run_id") == self.run_id) & F.col("step").isin(steps)
                               & (F.col("status") == "done"), {"status": F.lit("stale")})

    def _update_step(self, step: str, fields: dict[str, Any]) -> None:
        """Update the row the step's start (``step_started`` / ``claim_step``) inserted: a
        keyed UPDATE, half the Spark jobs of a MERGE."""
        from pyspark.sql import functions as F

        types = {c: t for c, t, _ in RUN_STEPS.columns}
        key = (F.col("run_id") == self.run_id) & (F.col("step") == step)
        self.tables.update("run_steps", key, {k: F.lit(v).cast(types[k]) for k, v in fields.items()})

    def _merge_step(self, step: str, fields: dict[str, Any], started: bool = False,
                    only_if: str | None = None) -> int | None:
        """Insert or update ``step``'s row; with a held step end, update that row too, in the
        same commit (each row by its own clause, told apart by ``_end``).  Returns how many
        rows of ``step`` the committed MERGE inserted or updated (0 or 1), None when Delta
        reports no row counts."""
        from pyspark.sql import functions as F

        if self._finished is not None and self._finished[0] == step:
            self.flush()  # the same step again: two source rows may not update one row
        rows = [{"run_id": self.run_id, "step": step, "attempt": 1, **fields}]
        ended = self._finished
        if ended is None and started and self._created and self.minted and step not in self._written_steps:
            # The first row of a run this record created under a minted id: nothing to match.
            self.tables.append("run_steps", self.tables.spark.createDataFrame(rows, schema=RUN_STEPS.schema))
            self._written_steps.add(step)
            return 1
        if ended is not None:
            rows.append({"run_id": self.run_id, "step": ended[0], **ended[1]})
        frame = self.tables.spark.createDataFrame(rows, schema=RUN_STEPS.schema)
        df = frame.withColumn("_end", F.col("step") != F.lit(step)) if ended is not None else frame
        columns = ["run_id", "step", *fields.keys(), "attempt"]
        tables = self.tables
        tables.ensure("run_steps")
        sets = {k: f"s.`{k}`" for k in fields}
        if started:
            sets["attempt"] = "coalesce(t.attempt, 0) + 1"

        # The literal run id confines the MERGE to the run's partition: another run's commits
        # in between touch other partitions, so Delta has no conflict to reject.
        on = f"t.run_id = s.run_id AND t.step = s.step AND {id_predicate('t.run_id', self.run_id)}"

        def run():
            merge = tables.delta("run_steps").alias("t").merge(df.alias("s"), on)
            start_only = None
            if ended is not None:
                merge = merge.whenMatchedUpdate(condition="s._end", set={k: f"s.`{k}`" for k in ended[1]})
                start_only = "NOT s._end"
            condition = " AND ".join(f"({c})" for c in (start_only, only_if) if c) or None
            return (merge.whenMatchedUpdate(condition=condition, set=sets)
                    .whenNotMatchedInsert(condition=start_only, values={c: f"s.`{c}`" for c in columns})
                    .execute())

        metrics = with_conflict_retries(run, f"record step {step}")
        self._finished = None
        self._written_steps.add(step)
        return _step_rows_changed(metrics, ended is not None)

    # -- run_artifacts -------------------------------------------------------
    def record_artifacts(self, paths: Iterable[str], kind: str) -> None:
        rows = [{"run_id": self.run_id, "path": str(p), "kind": kind, "written_at": now()} for p in paths]
        if rows:
            self.tables.merge("run_artifacts", self.tables.spark.createDataFrame(rows, schema=RUN_ARTIFACTS.schema),
                              run_id=self.run_id)


def _step_rows_changed(metrics, with_end: bool) -> int | None:
    """Rows of the started step a run_steps MERGE inserted or updated: its updated plus
    inserted rows, less the held step end it also updated (that row always exists: the
    step's start inserted it)."""
    counts = merge_row_counts(metrics, "num_updated_rows", "num_inserted_rows")
    return sum(counts) - (1 if with_end else 0) if counts is not None else None


def _string_array(values):
    from pyspark.sql import functions as F

    return F.array(*[F.lit(v) for v in values]) if values else F.array().cast("array<string>")
