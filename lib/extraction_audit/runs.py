"""The ``runs`` table: one row per audit run, its status and per-step statistics.

Every stage calls ``RunRecord.step_started`` / ``step_done`` so ``runs.status`` always
says where a run is, and ``step_stats`` explains what each step read, wrote and skipped.
A run is ``complete`` only after its last step finished; a crash leaves
``running:<step>`` or ``failed:<step>``, never a half-written run that looks finished.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any

from .config import AuditConfig
from .tables import RUNS, Tables


def new_run_id(prefix: str = "run") -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}-{stamp}-{uuid.uuid4().hex[:6]}"


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def prompt_strategy_label(cfg: AuditConfig) -> str:
    total = sum(p.share for p in cfg.generation.prompts) or 1.0
    return ",".join(f"{p.strategy}:{p.share / total:.3g}" for p in cfg.generation.prompts)


class RunRecord:
    """Reads and updates one run's row in ``runs``."""

    def __init__(self, tables: Tables, run_id: str):
        self.tables = tables
        self.run_id = run_id

    # -- reads ---------------------------------------------------------------
    def get(self) -> dict[str, Any] | None:
        from pyspark.sql import functions as F

        rows = self.tables.read("runs").where(F.col("run_id") == self.run_id).limit(1).collect()
        return rows[0].asDict(recursive=True) if rows else None

    def exists(self) -> bool:
        return self.get() is not None

    # -- writes --------------------------------------------------------------
    def create(self, cfg: AuditConfig, tokenizer: str | None = None, **fields: Any) -> None:
        """Insert the run row if absent (a re-run of the same run_id keeps the original)."""
        spark = self.tables.spark
        row = {
            "run_id": self.run_id,
            "status": "created",
            "started_at": _now(),
            "finished_at": None,
            "model": cfg.model.display_name,
            "model_family": cfg.model.family or cfg.model.display_name,
            "tokenizer": tokenizer,
            "corpus_id": cfg.corpus.id,
            "prompt_strategy": prompt_strategy_label(cfg),
            "sampling": cfg.generation.sampling.model_dump_json(),
            "budget_tokens": cfg.generation.budget_tokens,
            "generated_tokens": 0,
            "config_json": cfg.to_json(),
            "steps_done": [],
            "step_stats": "{}",
            "control_run_id": None,
            "error": None,
        }
        row.update(fields)
        df = spark.createDataFrame([row], schema=RUNS.schema)
        self.tables.merge("runs", df, update=False)

    def update(self, **fields: Any) -> None:
        from pyspark.sql import functions as F

        spec = {k: F.lit(v) for k, v in fields.items()}
        self.tables.update("runs", F.col("run_id") == self.run_id, spec)

    def set_status(self, status: str, error: str | None = None) -> None:
        fields: dict[str, Any] = {"status": status}
        if error is not None:
            fields["error"] = error[:4000]
        if status == "complete":
            fields["finished_at"] = _now()
        self.update(**fields)

    def step_started(self, step: str) -> None:
        self.set_status(f"running:{step}")

    def step_done(self, step: str, stats: dict[str, Any]) -> None:
        """Record a finished step and its statistics (counts, seconds)."""
        from pyspark.sql import functions as F

        row = self.get() or {}
        all_stats = json.loads(row.get("step_stats") or "{}")
        all_stats[step] = stats
        done = list(row.get("steps_done") or [])
        if step not in done:
            done.append(step)
        self.tables.update(
            "runs", F.col("run_id") == self.run_id,
            {
                "step_stats": F.lit(json.dumps(all_stats, default=str, sort_keys=True)),
                "steps_done": F.array(*[F.lit(s) for s in done]) if done else F.array().cast("array<string>"),
            },
        )

    def steps_done(self) -> list[str]:
        row = self.get() or {}
        return list(row.get("steps_done") or [])

