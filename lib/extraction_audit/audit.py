"""``run_audit``: every planned step of one run, through the runner (``runner.py``).

Completed steps are skipped, the step in flight is redone from its last commit
(generation resumes from its committed chunks), steps whose inputs were redone are run
again, and ``runs.status`` reads ``complete`` only once every planned step is done.
"""

from __future__ import annotations

from .config import AuditConfig
from .runner import Runner
from .stages import STEP_ORDER  # noqa: F401 - re-exported for callers listing the steps


def run_audit(spark, cfg: AuditConfig, run_id: str | None = None, control_run_id: str | None = None,
              compare_run_ids: tuple[str, ...] = (), steps: list[str] | None = None,
              before_step=None, after_step=None) -> dict:
    """Run (or finish) an audit; returns ``{"run_id", "steps": {step: stats}}``.
    ``before_step`` / ``after_step``: see ``Runner``."""
    runner = Runner(spark, cfg, before_step=before_step, after_step=after_step)
    return runner.audit(run_id, steps, {"control_run_id": control_run_id, "compare_run_ids": tuple(compare_run_ids)})
