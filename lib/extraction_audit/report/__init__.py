"""Reports people act on: growth curves across budgets, comparison at equal budgets,
bootstrap intervals, extrapolation, the chance baseline, HTML / Markdown output.

Entry point: ``build_report(spark, cfg, run_id, compare_run_ids=(), out_dir=None)``; the SQL
behind every number lives in ``queries`` (shared with ``notebooks/``)."""

from .build import build_report

__all__ = ["build_report"]
