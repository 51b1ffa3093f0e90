"""The stage contract and the registry of stages.

A stage declares its name, the tables it reads and writes and the steps it depends on, and
computes: ``run(ctx) -> stats``.  No stage writes run state (``runs``, ``run_steps``):
the runner (``runner.py``) does, whichever path started the step (``audit``, a single
subcommand, a bundle task, spark-submit).  ``check(cfg, options)`` checks what the user
passed that needs no table (an input path, the model's folder, the budget) before the runner
writes anything: a typo gives one clear error and leaves no run row behind.  ``begin(ctx)``
checks a run before anything is computed and returns the ``runs`` columns the step defines
(model, budget, tokenizer);
``finish(stats)`` returns the columns its result defines (generated tokens).

Derived stages (``metrics``, ``calibrate``) are planned whenever their inputs are, and the
runner starts them as soon as every input step of the run is done, in whichever process
finished the last input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from .config import AuditConfig
from .errors import UserFacingError

STEP_ORDER = ("index", "generate", "import_samples", "match", "pii", "metrics", "rank", "calibrate", "probe",
              "report")
SAMPLE_SOURCES = ("generate", "import_samples")


@dataclass
class StageContext:
    """What a stage gets: the session, config and tables, its run, and its own scratch folder."""

    spark: Any
    cfg: AuditConfig
    tables: Any
    run_id: str | None
    run: dict[str, Any] = field(default_factory=dict)
    scratch: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def option(self, name: str, default=None):
        value = self.options.get(name)
        return default if value is None else value


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[StageContext], dict]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    depends_on: tuple[str, ...] = ()
    derived: bool = False
    creates_run: bool = False
    check: Callable[[AuditConfig, dict], None] | None = None
    begin: Callable[[StageContext], dict] | None = None
    # Process-local work the step needs (loading the tokenizer), which the runner starts in
    # the background while it reads and writes run state, and waits for before ``begin``.
    prepare: Callable[[AuditConfig], Any] | None = None
    finish: Callable[[dict], dict] | None = None
    # Whether a finished attempt changed the step's output (False: dependents stay valid).
    changed: Callable[[dict], bool] = lambda stats: True


STAGES: dict[str, Stage] = {}


def register(stage: Stage) -> Stage:
    if stage.name in STAGES:
        raise ValueError(f"stage {stage.name!r} is registered twice")
    if stage.name not in STEP_ORDER:
        raise ValueError(f"stage {stage.name!r} has no place in STEP_ORDER")
    STAGES[stage.name] = stage
    return stage


def get_stage(name: str) -> Stage:
    try:
        return STAGES[name]
    except KeyError:
        raise UserFacingError(f"unknown step {name!r}; steps are {', '.join(STEP_ORDER)}") from None


def planned_steps(cfg: AuditConfig, steps: list[str] | None = None, imported: bool = False) -> list[str]:
    """The steps a run must finish to be complete: the configured (enabled) steps, with
    import_samples for generate when its samples are imported, plus the derived steps.

    ``index`` is corpus-level: an audit runs it first (an incremental no-op when nothing is
    new) and a run records it when run under its id, but a run whose corpus was indexed
    earlier is complete without it."""
    wanted = set(steps if steps is not None else cfg.steps)
    unknown = wanted - set(STEP_ORDER)
    if unknown:
        raise UserFacingError(f"unknown step(s) {sorted(unknown)}; steps are {', '.join(STEP_ORDER)}")
    wanted = {s for s in wanted if _enabled(cfg, s)}
    if imported and "generate" in wanted:
        wanted = (wanted - {"generate"}) | {"import_samples"}
    if "match" in wanted:
        wanted.add("metrics")
    if {"rank", "match"} <= wanted:
        wanted.add("calibrate")
    return [s for s in STEP_ORDER if s in wanted and s != "index"]


def audit_steps(cfg: AuditConfig, steps: list[str] | None = None) -> list[str]:
    """What ``audit`` runs, in order: ``index`` when configured, then the planned steps."""
    wanted = steps if steps is not None else cfg.steps
    return (["index"] if "index" in wanted and _enabled(cfg, "index") else []) + planned_steps(cfg, steps)


def _enabled(cfg: AuditConfig, step: str) -> bool:
    section = getattr(cfg, step, None)
    return bool(getattr(section, "enabled", True))


# ------------------------------------------------------------------------------ stages
def _index(ctx: StageContext) -> dict:
    from .index import build_index

    return build_index(ctx.spark, ctx.cfg, ctx.tables)


def _tokenizer_fingerprint(cfg: AuditConfig) -> str:
    from .tokenizer import check_model_location, load_tokenizer, tokenizer_fingerprint

    path = check_model_location(cfg.resolve(cfg.model.tokenizer_path), "model.tokenizer (or model.path)")
    return tokenizer_fingerprint(load_tokenizer(path), cfg.model.tokenizer or cfg.model.path)


def _budget(cfg: AuditConfig, options: dict) -> int:
    """``--budget-tokens`` when given (0 included: refused, never replaced by the config's)."""
    given = options.get("budget_tokens")
    return int(cfg.generation.budget_tokens if given is None else given)


def _check_generate(cfg: AuditConfig, options: dict) -> None:
    from .tokenizer import check_model_location

    check_model_location(cfg.resolve(cfg.model.path), "model.path")
    if _budget(cfg, options) < 1:
        raise UserFacingError("--budget-tokens must be at least 1")


def _begin_generate(ctx: StageContext) -> dict:
    from .generate.job import check_defining_settings
    from .runs import run_row_fields

    check_defining_settings(ctx.tables, ctx.run_id, ctx.run, ctx.cfg)
    return {**run_row_fields(ctx.cfg), "budget_tokens": _budget(ctx.cfg, ctx.options),
            "tokenizer": _tokenizer_fingerprint(ctx.cfg)}


def _generate(ctx: StageContext) -> dict:
    from .generate import run_generation

    return run_generation(ctx.spark, ctx.cfg, ctx.run_id, budget_tokens=ctx.run.get("budget_tokens"),
                          tables=ctx.tables, scratch=ctx.scratch)


def _check_import(cfg: AuditConfig, options: dict) -> None:
    from .generate.external_samples import check_input

    if not options.get("input"):
        raise UserFacingError("import_samples needs --input")
    check_input(cfg, options["input"], options.get("format"))


def _begin_import(ctx: StageContext) -> dict:
    from .generate.external_samples import check_import_run

    check_import_run(ctx.tables, ctx.run_id)
    return {"tokenizer": _tokenizer_fingerprint(ctx.cfg), "prompt_strategy": "imported",
            "sampling": json.dumps({"source": "imported"})}


def _import(ctx: StageContext) -> dict:
    from .generate import import_samples

    return import_samples(ctx.spark, ctx.cfg, ctx.run_id, ctx.option("input"), fmt=ctx.option("format"),
                          tables=ctx.tables)


def _match(ctx: StageContext) -> dict:
    from .match import run_match

    return run_match(ctx.spark, ctx.cfg, ctx.run_id, ctx.tables, run=ctx.run, scratch=ctx.scratch)


def _pii(ctx: StageContext) -> dict:
    from .pii import run_pii

    return run_pii(ctx.spark, ctx.cfg, ctx.run_id, control_run_id=ctx.run.get("control_run_id"),
                   tables=ctx.tables, run_row=ctx.run)


def _metrics(ctx: StageContext) -> dict:
    from .metrics import compute_run_metrics

    rows = compute_run_metrics(ctx.spark, ctx.cfg, ctx.run_id, ctx.tables, run=ctx.run, scratch=ctx.scratch)
    last = rows[-1] if rows else {}
    return {"checkpoints": len(rows), **{k: last.get(k) for k in (
        "budget_tokens", "generated_tokens", "share_extracted", "distinct_passages", "distinct_rare_passages",
        "distinct_ngrams", "pii_found", "pii_in_corpus", "distinct_regions", "distinct_rare_regions",
        "corpus_tokens_extracted")}}


def _rank(ctx: StageContext) -> dict:
    from .rank import run_rank

    return run_rank(ctx.spark, ctx.cfg, ctx.run_id, tables=ctx.tables, scratch=ctx.scratch)


def _calibrate(ctx: StageContext) -> dict:
    from .rank import calibrate

    result = calibrate(ctx.spark, ctx.cfg, ctx.run_id, tables=ctx.tables, scratch=ctx.scratch)
    return {"rows": int(len(result)), "calibration": result.drop(columns=["run_id"], errors="ignore")
            .to_dict(orient="records") if len(result) else []}


def _probe(ctx: StageContext) -> dict:
    from .probe import run_probe

    return run_probe(ctx.spark, ctx.cfg, ctx.run_id, tables=ctx.tables, scratch=ctx.scratch)


def _report(ctx: StageContext) -> dict:
    from .report import build_report

    stats: dict = {}
    holdout = ctx.option("holdout") or ctx.cfg.report.holdout_source
    if holdout and ctx.option("chance_baseline", True):
        from .report.baseline import compute_chance_baseline

        row = compute_chance_baseline(ctx.spark, ctx.cfg, ctx.run_id, source=ctx.cfg.resolve(holdout),
                                      scratch=f"{ctx.scratch}/chance_baseline")
        stats["chance_baseline"] = {k: row[k] for k in ("sequences", "generated_tokens", "share_extracted")}
    result = build_report(ctx.spark, ctx.cfg, ctx.run_id, compare_run_ids=tuple(ctx.option("compare_run_ids", ())),
                          out_dir=ctx.option("out_dir"), include_control=ctx.option("include_control", True))
    stats.update(result["stats"])
    stats["artifacts"] = [result["out_dir"]]
    stats["result"] = {k: result[k] for k in ("html", "markdown", "json", "out_dir")}
    stats["report_warnings"] = result["warnings"]
    return stats


register(Stage("index", _index, reads=("corpus source",),
               writes=("corpus_documents", "corpus_anchors", "corpus_doc_numbers", "corpus_index",
                       "corpus_index_builds"),
               creates_run=True, changed=lambda s: bool(s.get("documents_added", 1))))
register(Stage("generate", _generate, reads=("samples", "prompt sources"), writes=("samples",),
               depends_on=(), creates_run=True, check=_check_generate, begin=_begin_generate,
               prepare=_tokenizer_fingerprint,
               finish=lambda s: {"generated_tokens": s["generated_tokens"], "budget_tokens": s["budget_tokens"]},
               changed=lambda s: bool(s.get("samples_added", 1))))
register(Stage("import_samples", _import, reads=("external samples file",), writes=("samples",),
               creates_run=True, check=_check_import, begin=_begin_import, prepare=_tokenizer_fingerprint,
               finish=lambda s: {"generated_tokens": s["run_tokens"], "budget_tokens": s["run_tokens"]},
               changed=lambda s: bool(s.get("samples_imported", 1))))
register(Stage("match", _match, reads=("samples", "corpus_anchors", "corpus_doc_numbers", "corpus_documents"),
               writes=("passage_occurrences", "extracted_passages", "matched_windows"),
               depends_on=("index", *SAMPLE_SOURCES)))
register(Stage("pii", _pii, reads=("samples", "corpus_documents", "passage_occurrences"),
               writes=("pii_findings", "pii_corpus_index", "pii_corpus_doc_values", "pii_corpus_scanned"),
               depends_on=(*SAMPLE_SOURCES, "match")))
register(Stage("metrics", _metrics, reads=("samples", "passage_occurrences", "extracted_passages",
                                           "matched_windows", "pii_findings", "corpus_documents",
                                           "pii_corpus_doc_values"),
               writes=("run_metrics", "extracted_regions", "extracted_documents"), depends_on=("match", "pii"),
               derived=True))
register(Stage("rank", _rank, reads=("samples",), writes=("candidates",), depends_on=SAMPLE_SOURCES))
register(Stage("calibrate", _calibrate, reads=("candidates", "passage_occurrences", "extracted_passages"),
               writes=("rank_calibration",), depends_on=("rank", "match"), derived=True))
register(Stage("probe", _probe, reads=("corpus_documents", "samples", "matched_windows", "probes"),
               writes=("probes",), depends_on=("index", *SAMPLE_SOURCES, "match")))
register(Stage("report", _report, reads=("every findings table",), writes=("chance_baseline", "report files"),
               depends_on=("metrics", "calibrate", "probe")))
