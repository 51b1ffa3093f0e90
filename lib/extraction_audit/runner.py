"""The one runner: the only writer of run state, used by ``audit``, by every single-stage
subcommand, and so by the bundle tasks and spark-submit entry points.

It validates the run id and lets each step check the user's input (``Stage.check``) before
it writes anything.  For each step it creates or checks the run row, records the
attempt in ``run_steps`` (keyed MERGE), gives the stage a fresh scratch folder, counts the
Spark jobs the stage ran, records its statistics (in the same MERGE as the next step's start
when one follows in the process), deletes the scratch folder, marks steps
that consumed the step's old output ``stale``, starts derived steps whose inputs are all
done, and derives ``runs.status``: ``running:<step>``, ``failed:<step>``,
``pending:<next step>``, or ``complete`` (with ``finished_at``) once every planned step is
done, whichever process ran it.

Reads and writes ``runs``, ``run_steps`` and ``run_artifacts``; each stage reads and
writes its own tables (``stages.py``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from .config import AuditConfig
from .errors import UserFacingError
from .ids import validate_id
from .runs import RunRecord, new_run_id, now
from .scratch import delete_path, step_scratch
from .stages import STEP_ORDER, StageContext, audit_steps, get_stage, planned_steps
from .tables import Tables

log = logging.getLogger(__name__)


class Runner:
    """``before_step`` / ``after_step``: called with the step's name just before it starts
    and once it is done; a caller running two audits side by side (the demo) uses them to
    hold a step until the other audit has made its input."""

    def __init__(self, spark, cfg: AuditConfig, tables: Tables | None = None,
                 before_step: Callable[[str], None] | None = None,
                 after_step: Callable[[str], None] | None = None):
        self.spark = spark
        self.cfg = cfg
        self.tables = tables or Tables(spark, cfg)
        self.before_step = before_step
        self.after_step = after_step

    # ------------------------------------------------------------------ entry points
    def audit(self, run_id: str | None = None, steps: list[str] | None = None,
              options: dict[str, Any] | None = None) -> dict:
        """Run (or finish) every planned step of a run; completed steps are skipped."""
        run_id = validate_id(run_id) if run_id else new_run_id("audit")
        plan = planned_steps(self.cfg, steps)
        todo = audit_steps(self.cfg, steps)
        asked = set(steps if steps is not None else self.cfg.steps)
        # Derived steps the audit adds itself (metrics for ``--steps match``) wait for
        # inputs planned but not done; a step asked for by name still needs them.
        implied = {s for s in todo if get_stage(s).derived and s not in asked}
        results = self.run_steps(run_id, todo, options, plan=plan, skip_done=True,
                                 widen_plan=steps is not None, may_wait=implied)
        return {"run_id": run_id, "steps": results}

    def run_step(self, run_id: str, step: str, options: dict[str, Any] | None = None) -> dict:
        """One step, as a single subcommand runs it; returns the step's statistics."""
        return self.run_steps(validate_id(run_id), [step], options)[step]

    def run_unrecorded(self, step: str, options: dict[str, Any] | None = None) -> dict:
        """A corpus-level step with no run (``index`` without ``--run-id``)."""
        stage = get_stage(step)
        ctx = StageContext(self.spark, self.cfg, self.tables, None, {}, None, dict(options or {}))
        stats, _ = self._timed(stage, ctx, f"{step}:{uuid.uuid4().hex[:8]}")
        return stats

    def run_steps(self, run_id: str, steps: list[str], options: dict[str, Any] | None = None,
                  plan: list[str] | None = None, skip_done: bool = False,
                  widen_plan: bool = False, may_wait: set[str] | frozenset = frozenset()) -> dict[str, dict]:
        """``plan``: the steps the run must finish to be complete.  ``widen_plan`` (``audit
        --steps``, a part of an existing run): the stored plan only gains steps, so running
        match again never makes a run planned with pii and report complete without them;
        a whole audit as configured replaces the stored plan.  ``may_wait``: steps skipped
        (not failed) while a planned input is not done; they start in the process that
        finishes their last input."""
        validate_id(run_id)
        options = dict(options or {})
        for key in ("control_run_id",):
            if options.get(key):
                validate_id(options[key], key.replace("_", " "))
        for other in options.get("compare_run_ids") or ():
            validate_id(other, "compare run id")
        stages = [get_stage(s) for s in steps]
        record = RunRecord(self.tables, run_id)
        if record.minted:  # minted by this process: nothing is stored under it yet
            run, state = None, {}
        else:
            # The run's row and its steps are read side by side (in a fresh process each
            # first read costs seconds); the steps are used only when the run exists.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-steps") as pool:
                stored_steps = pool.submit(record.steps)
                run = record.get()
                state = stored_steps.result() if run is not None else {}
        # What the user passed is checked before anything is written (a missing input or
        # model folder leaves no run row); a step already done, which an audit skips, is not.
        for stage in stages:
            if stage.check and not (skip_done and state.get(stage.name, {}).get("status") == "done"):
                stage.check(self.cfg, options)
        # Only the first step to run: its preparation overlaps the run-state reads and writes
        # just before it, and no stage imports beside it.
        _prepare_in_background(self.cfg, [s for s in stages if not (
            skip_done and state.get(s.name, {}).get("status") == "done")][:1])
        created = False
        if run is None:
            if not any(s.creates_run for s in stages):
                raise UserFacingError(f"run {run_id!r} does not exist; generate or import samples first")
            imported = "import_samples" in steps
            created = record.create(self.cfg, steps_planned=plan or planned_steps(self.cfg, imported=imported),
                                    control_run_id=options.get("control_run_id"))
            run = record.get()
        elif plan is not None:
            stored = list(run.get("steps_planned") or [])
            if widen_plan:
                plan = [s for s in STEP_ORDER if s in set(stored) | set(plan)]
            if stored != plan:
                record.update(steps_planned=plan)
                run = record.get()
        if options.get("control_run_id") and run.get("control_run_id") != options["control_run_id"]:
            record.update(control_run_id=options["control_run_id"])
            run = record.get()
        if not state and not created:  # a run without steps, or created by another process first
            state = record.steps()
        results: dict[str, dict] = {}
        # Columns a finished step defines (generated tokens) and its status change are
        # written with the next step's start, one ``runs`` write per step; the last ones
        # when the loop ends, however it ends.
        pending: dict[str, Any] = {}
        fresh = True  # ``state`` is as stored after this process's last transition
        try:
            for stage in stages:
                if skip_done and state.get(stage.name, {}).get("status") == "done":
                    log.info("run %s: step %s already done, skipped", run_id, stage.name)
                    continue
                if results and self._missing_inputs(run, stage, state):
                    # Steps are not re-read after each step end (see ``_execute``): before
                    # calling an input missing, see what other processes finished since.
                    state = record.steps()
                if stage.name in may_wait and (waiting := self._missing_inputs(run, stage, state)):
                    # A part of a run (``audit --steps match`` on a run planned with pii):
                    # the derived step starts when its last input is done, in that process.
                    log.info("run %s: step %s waits for %s", run_id, stage.name, ", ".join(waiting))
                    continue
                self._require_inputs(run, stage, state)
                fresh = False
                results[stage.name], state, pending = self._execute(record, stage, options, state, pending)
                run = record.get()
                derived, state, pending = self._run_ready_derived(record, options, steps, state, pending)
                results.update(derived)
                fresh = True
            # The last step end is written alone, then the steps are read again: of two
            # processes finishing the inputs of a derived step at once, the later writer
            # sees both done (a step end held for the next start is followed by such a
            # read when that step ends).
            while record.flush():
                fresh = False
                derived, state, pending = self._run_ready_derived(record, options, steps, record.steps(), pending)
                results.update(derived)
                fresh = True
        finally:
            if record.flush():
                fresh = False
            self._refresh_status(record, extra=pending, state=state if fresh else None)
        return results

    # ------------------------------------------------------------------ one step
    def _execute(self, record: RunRecord, stage, options: dict, state: dict, pending: dict,
                 claimed: bool = False) -> tuple[dict, dict, dict]:
        """Run one step; returns its statistics, the run's steps as read after it finished,
        and the ``runs`` columns still to write."""
        run_id = record.run_id
        if self.before_step is not None:
            self.before_step(stage.name)
        run = record.get() or {}
        scratch = step_scratch(self.cfg, run_id, stage.name)
        ctx = StageContext(self.spark, self.cfg, self.tables, run_id, run, scratch, options)
        _wait_for_prepare(self.cfg, stage.name)
        fields = stage.begin(ctx) if stage.begin else {}
        delete_path(self.spark, scratch)  # a killed attempt's leftovers
        state = {**state, stage.name: {**state.get(stage.name, {}), "status": "running", "started_at": now(),
                                       "finished_at": None}}
        # The step's row (run_steps; already written for a claimed step) and the run's
        # status (runs) are separate tables, so their commits run side by side; both are in
        # before the stage starts.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-steps") as pool:
            started_row = None if claimed else pool.submit(record.step_started, stage.name)
            self._write_status(record, state, {**pending, **fields})
            if started_row is not None:
                started_row.result()
        pending.clear()
        ctx.run = record.get() or {}
        log.info("run %s: step %s started", run_id, stage.name)
        started = time.monotonic()
        group = f"extraction-audit:{run_id}:{stage.name}:{uuid.uuid4().hex[:8]}"
        try:
            stats, jobs = self._timed(stage, ctx, group)
        except BaseException as err:
            message = str(err) if isinstance(err, UserFacingError) else f"{type(err).__name__}: {err}"
            record.step_finished(stage.name, "failed", time.monotonic() - started, self._jobs(group),
                                 error=message)
            raise
        artifacts = stats.pop("artifacts", None)
        if artifacts:
            record.record_artifacts(artifacts, kind=stage.name)
        stats = _jsonable(stats)
        # Recorded done with the next step's start (one commit), or alone when none follows.
        seconds = time.monotonic() - started
        ended = record.finish_later(stage.name, "done", seconds, jobs, stats=stats)
        delete_path(self.spark, scratch)
        dependents = self._dependents(stage.name) if stage.changed(stats) else []
        if any(s in state for s in dependents):
            # A dependent has a row (done before, or run by another process): read the
            # steps as stored to mark the done ones stale.  Otherwise nothing another
            # process wrote since this process's last read changes what happens next: a
            # derived step it made ready is found by the read after the last step end.
            state = record.steps()  # with this step's end as it will be stored
        else:
            state = {**state, stage.name: {**state.get(stage.name, {}), **ended}}
        if dependents:
            stale = [s for s in dependents if state.get(s, {}).get("status") == "done"]
            if stale:
                record.mark_stale(stale)
                state = record.steps()
        log.info("run %s: step %s done in %.1f s (%s Spark jobs)", run_id, stage.name, seconds, jobs)
        if self.after_step is not None:
            self.after_step(stage.name)
        return stats, state, dict(stage.finish(stats)) if stage.finish else {}

    def _timed(self, stage, ctx: StageContext, group: str) -> tuple[dict, int | None]:
        sc = _spark_context(self.spark)
        if sc is not None:
            sc.setJobGroup(group, f"extraction-audit {stage.name}", interruptOnCancel=False)
        try:
            stats = stage.run(ctx) or {}
        finally:
            if sc is not None:
                sc.setLocalProperty("spark.jobGroup.id", None)
                sc.setLocalProperty("spark.job.description", None)
        stats = dict(stats) if isinstance(stats, dict) else {"result": str(stats)}
        return stats, self._jobs(group)

    def _jobs(self, group: str) -> int | None:
        sc = _spark_context(self.spark)
        if sc is None:
            return None
        return len(sc.statusTracker().getJobIdsForGroup(group))

    # ------------------------------------------------------------------ dependencies
    def _require_inputs(self, run: dict, stage, state: dict) -> None:
        """Inputs planned for the run (or started for it, like ``index``) must be done."""
        missing = self._missing_inputs(run, stage, state)
        if missing:
            detail = ", ".join(f"{d}: {state.get(d, {}).get('status') or 'not run'}" for d in missing)
            raise UserFacingError(f"step {stage.name} of run {run['run_id']!r} needs {', '.join(missing)} first "
                                  f"({detail})")

    @staticmethod
    def _missing_inputs(run: dict, stage, state: dict) -> list[str]:
        plan = set(run.get("steps_planned") or []) | set(state)
        return [d for d in stage.depends_on if d in plan and state.get(d, {}).get("status") != "done"]

    def _dependents(self, step: str) -> list[str]:
        """Steps that consume ``step``'s output, directly or through other steps."""
        out: list[str] = []
        frontier = {step}
        while frontier:
            nxt = {s for s in STEP_ORDER if s not in out and s != step
                   and frontier & set(get_stage(s).depends_on)}
            out.extend(sorted(nxt - set(out)))
            frontier = nxt
        return out

    def _run_ready_derived(self, record: RunRecord, options: dict, exclude, state: dict,
                           pending: dict) -> tuple[dict[str, dict], dict, dict]:
        results: dict[str, dict] = {}
        while True:
            plan = list((record.get() or {}).get("steps_planned") or [])
            ready = [s for s in plan if get_stage(s).derived and s not in exclude
                     and state.get(s, {}).get("status") != "done"
                     and all(state.get(d, {}).get("status") == "done" for d in get_stage(s).depends_on if d in plan)]
            if not ready:
                return results, state, pending
            step = ready[0]
            if not record.claim_step(step):
                # Another process (the bundle runs rank beside match and pii) finished the
                # last input at the same moment and runs this step.
                log.info("run %s: step %s is run by another process", record.run_id, step)
                exclude = [*exclude, step]
                continue
            results[step], state, pending = self._execute(record, get_stage(step), options, state, pending,
                                                          claimed=True)

    # ------------------------------------------------------------------ status
    def _write_status(self, record: RunRecord, state: dict, extra: dict | None = None) -> dict:
        """Write the status derived from ``state`` (with ``extra`` columns) when it changed."""
        run = record.get() or {}
        fields = {**derive_run_fields(list(run.get("steps_planned") or []), state, run), **(extra or {})}
        changed = {k: v for k, v in fields.items() if not _same(run.get(k), v)}
        if changed:
            record.update(**changed)
        return changed

    def _refresh_status(self, record: RunRecord, extra: dict | None = None, state: dict | None = None) -> None:
        """Derive the run's status from run_steps as stored (``state``: as read after this
        process's last transition) and write it when it changed; re-check, since a process
        running another step may have recorded a transition in between (each process's last
        refresh sees every transition before it)."""
        state = record.steps() if state is None else state
        extra = dict(extra or {})
        for _ in range(3):
            if not self._write_status(record, state, extra):
                return
            extra = {}
            latest = record.steps()
            if latest == state:
                return
            state = latest


#: Background ``Stage.prepare`` work of this process, by (config, step name).
_PREPARING: dict[tuple[int, str], threading.Thread] = {}
_PREPARE_LOCK = threading.Lock()


def _prepare_in_background(cfg: AuditConfig, stages) -> None:
    """Start each stage's process-local preparation (loading the tokenizer) on a daemon
    thread, so that it runs while the runner's first Delta reads and writes wait on the JVM.
    Its errors are dropped here: the stage meets them again, and reports them, when it
    does the same work itself."""
    for stage in stages:
        if stage.prepare is None:
            continue

        def work(prepare=stage.prepare):
            try:
                prepare(cfg)
            except Exception:  # noqa: BLE001 - see above
                log.debug("background preparation failed", exc_info=True)

        thread = threading.Thread(target=work, name=f"prepare-{stage.name}", daemon=True)
        with _PREPARE_LOCK:
            _PREPARING[(id(cfg), stage.name)] = thread
        thread.start()


def _wait_for_prepare(cfg: AuditConfig, step: str) -> None:
    with _PREPARE_LOCK:
        thread = _PREPARING.pop((id(cfg), step), None)
    if thread is not None:
        thread.join()


def _same(stored, derived) -> bool:
    if isinstance(derived, list):
        return list(stored or []) == derived
    return stored == derived


def derive_run_fields(plan: list[str], state: dict[str, dict], run: dict) -> dict[str, Any]:
    order = [s for s in STEP_ORDER if s in state]
    done = [s for s in order if state[s]["status"] == "done"]
    running = [s for s in order if state[s]["status"] == "running"]
    failed = [s for s in order if state[s]["status"] == "failed"]
    missing = [s for s in plan if s not in done]
    if running:
        status = f"running:{max(running, key=lambda s: state[s]['started_at'])}"
    elif failed:
        status = f"failed:{failed[0]}"
    elif not missing and plan:
        status = "complete"
    elif not state:
        status = "created"
    else:
        status = f"pending:{missing[0]}" if missing else "pending"
    finished = None
    if status == "complete":
        finished = max((state[s]["finished_at"] for s in plan if state[s].get("finished_at")), default=now())
    stats = {s: json.loads(state[s]["stats"]) for s in done if state[s].get("stats")}
    error = state[failed[0]].get("error") if failed else None
    return {"status": status, "finished_at": finished, "steps_done": done,
            "step_stats": json.dumps(stats, sort_keys=True, default=str), "error": error}


def _spark_context(spark):
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return None


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):
        return _jsonable(value.item())
    return str(value)
