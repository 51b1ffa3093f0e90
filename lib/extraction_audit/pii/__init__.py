"""Personal data: detectors (registered by name), corpus PII index, lookup, findings, retention.

Public entry points:
    run_pii(spark, cfg, run_id, control_run_id=None) -> dict
    build_pii_corpus_index(spark, cfg) -> dict
    purge_run(spark, cfg, run_id, vacuum=True) -> dict
    create_redacted_views(tables) -> list[str]
"""

from __future__ import annotations

__all__ = ["run_pii", "build_pii_corpus_index", "purge_run", "create_redacted_views"]


def __getattr__(name):  # lazy: importing the package must not pull in Spark
    if name in ("run_pii", "create_redacted_views"):
        from . import findings
        return getattr(findings, name)
    if name == "build_pii_corpus_index":
        from .corpus_index import build_pii_corpus_index
        return build_pii_corpus_index
    if name == "purge_run":
        from .retention import purge_run
        return purge_run
    raise AttributeError(name)
