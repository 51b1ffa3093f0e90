"""Sample generation: prompts, seeded sampling, backends, the Spark job, and imports.

Entry points (what the CLI, ``audit`` and ``demo`` call):

- ``run_generation(spark, cfg, run_id, budget_tokens=None, tables=None, scratch=None) -> dict`` (``job``)
- ``import_samples(spark, cfg, run_id, path, fmt=None) -> dict`` (``external_samples``)

Heavy modules (torch, transformers) are imported only when these are called.
"""

from __future__ import annotations


def run_generation(spark, cfg, run_id, budget_tokens=None, tables=None, scratch=None) -> dict:
    from .job import run_generation as _run

    return _run(spark, cfg, run_id, budget_tokens=budget_tokens, tables=tables, scratch=scratch)


def import_samples(spark, cfg, run_id, path, fmt=None, tables=None) -> dict:
    from .external_samples import import_samples as _import

    return _import(spark, cfg, run_id, path, fmt=fmt, tables=tables)


__all__ = ["run_generation", "import_samples"]
