"""The step runner: one ``run_id``, every configured step, crash-safe re-runs.

Reads and writes ``runs`` (status, steps done, per-step statistics); each step reads and
writes its own tables (see the step's module).

Every step is idempotent (keyed merges or ``replaceWhere run_id``), so a re-run after a
crash simply calls the unfinished steps again: a step already in ``runs.steps_done``
is skipped, the step in flight is redone from its last commit (generation resumes from
its committed chunks), and ``runs.status`` reads ``complete`` only after the last step.
Steps after ``generate`` are redone when new samples arrived since they ran.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from .config import AuditConfig
from .errors import UserFacingError
from .runs import RunRecord, new_run_id
from .tables import Tables

log = logging.getLogger(__name__)

STEP_ORDER = ("index", "generate", "match", "pii", "rank", "report")
AFTER_GENERATE = ("match", "pii", "rank", "report")


def _step_functions() -> dict[str, Callable]:
    def index(spark, cfg, run_id, tables, ctx):
        from .index import build_index

        return build_index(spark, cfg, tables)

    def generate(spark, cfg, run_id, tables, ctx):
        from .generate import run_generation

        return run_generation(spark, cfg, run_id, tables=tables)

    def match(spark, cfg, run_id, tables, ctx):
        from .match import run_match

        return run_match(spark, cfg, run_id, tables)

    def pii(spark, cfg, run_id, tables, ctx):
        from .match import compute_run_metrics
        from .pii import run_pii

        stats = run_pii(spark, cfg, run_id, control_run_id=ctx.get("control_run_id"))
        compute_run_metrics(spark, cfg, run_id, tables)  # refresh pii_found / pii_in_corpus
        return stats

    def rank(spark, cfg, run_id, tables, ctx):
        from .rank import calibrate, run_rank

        stats = run_rank(spark, cfg, run_id)
        # With the corpus route available, measure how far each score can be trusted.
        calibration = calibrate(spark, cfg, run_id)
        stats["calibration"] = calibration.to_dict(orient="records") if len(calibration) else []
        return stats

    def report(spark, cfg, run_id, tables, ctx):
        from .report import build_report

        if cfg.report.holdout_source:  # chance baseline: matches expected from held-out human text
            from .report.baseline import compute_chance_baseline

            compute_chance_baseline(spark, cfg, run_id, source=cfg.resolve(cfg.report.holdout_source))
        return build_report(spark, cfg, run_id, compare_run_ids=tuple(ctx.get("compare_run_ids", ())))

    return {"index": index, "generate": generate, "match": match, "pii": pii, "rank": rank, "report": report}


def _enabled(cfg: AuditConfig, step: str) -> bool:
    section = getattr(cfg, step, None)
    return bool(getattr(section, "enabled", True))


def run_audit(spark, cfg: AuditConfig, run_id: str | None = None, control_run_id: str | None = None,
              compare_run_ids: tuple[str, ...] = (), steps: list[str] | None = None) -> dict:
    """Run (or finish) an audit; returns ``{"run_id", "steps": {step: stats}}``."""
    from .tokenizer import check_model_location, load_tokenizer, tokenizer_fingerprint

    tables = Tables(spark, cfg)
    run_id = run_id or new_run_id("audit")
    record = RunRecord(tables, run_id)
    wanted = [s for s in STEP_ORDER if s in (steps or cfg.steps) and _enabled(cfg, s)]
    tok_path = check_model_location(cfg.resolve(cfg.model.tokenizer_path), "model.tokenizer (or model.path)")
    fingerprint = tokenizer_fingerprint(load_tokenizer(tok_path), cfg.model.tokenizer or cfg.model.path)
    fields = {"control_run_id": control_run_id} if control_run_id else {}
    record.create(cfg, tokenizer=fingerprint, **fields)
    if control_run_id:
        record.update(control_run_id=control_run_id)
    ctx = {"control_run_id": control_run_id or (record.get() or {}).get("control_run_id"),
           "compare_run_ids": compare_run_ids}
    functions = _step_functions()
    results: dict[str, dict] = {}
    for step in wanted:
        done = record.steps_done()
        samples_before = _sample_count(tables, run_id)
        if step in done and not (step in AFTER_GENERATE and _stale_after_generate(record, tables, run_id)):
            log.info("audit %s: step %s already complete, skipped", run_id, step)
            continue
        log.info("audit %s: step %s", run_id, step)
        t0 = time.time()
        record.step_started(step)
        try:
            stats = functions[step](spark, cfg, run_id, tables, ctx) or {}
        except UserFacingError as err:
            record.set_status(f"failed:{step}", error=str(err))
            raise
        except Exception as err:
            record.set_status(f"failed:{step}", error=f"{type(err).__name__}: {err}")
            raise
        stats = dict(stats) if isinstance(stats, dict) else {"result": str(stats)}
        stats.setdefault("seconds", round(time.time() - t0, 2))
        if step == "generate":
            stats["samples_after"] = _sample_count(tables, run_id)
            stats["samples_before"] = samples_before
        record.step_done(step, _jsonable(stats))
        results[step] = stats
    record.set_status("complete")
    return {"run_id": run_id, "steps": results}


def _sample_count(tables: Tables, run_id: str) -> int:
    from pyspark.sql import functions as F

    return tables.read("samples").where(F.col("run_id") == run_id).count()


def _stale_after_generate(record: RunRecord, tables: Tables, run_id: str) -> bool:
    """A later step is stale when generation committed samples after it ran."""
    import json

    row = record.get() or {}
    stats = json.loads(row.get("step_stats") or "{}")
    matched = (stats.get("match") or {}).get("samples")
    return matched is not None and matched != _sample_count(tables, run_id)


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
