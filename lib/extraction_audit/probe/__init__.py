"""Known-prefix probes: discoverable memorisation and the sampling route's recovery share.

Entry point (what the ``probe`` stage calls): ``run_probe(spark, cfg, run_id, tables, scratch)``
(``job``).  ``kernels`` holds the per-probe scores, ``draw`` the stratified draw,
``summary`` the rates, duplication curve and recovery share with bootstrap intervals.
Heavy modules (torch, transformers, Spark) are imported only when these are called.
"""

from __future__ import annotations


def run_probe(spark, cfg, run_id, tables=None, scratch=None) -> dict:
    from .job import run_probe as _run

    return _run(spark, cfg, run_id, tables=tables, scratch=scratch)


__all__ = ["run_probe"]
