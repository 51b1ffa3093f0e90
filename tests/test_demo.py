"""The README's main command, end to end on the tiny model (smaller budget than the default)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from conftest import make_config
from extraction_audit.demo import run_demo
from extraction_audit.tables import Tables

pytestmark = pytest.mark.slow


def test_demo_audits_target_and_control_and_writes_the_report(spark, demo_assets, tmp_path, capsys):
    base = make_config(tmp_path)
    summary = run_demo(spark, demo_dir=str(demo_assets.root), budget_tokens=3000, base=base)
    out = capsys.readouterr().out
    assert "extraction-audit demo: summary" in out and "top rare passages" in out

    tables = Tables(spark, base)
    runs = {r.run_id: r for r in tables.read("runs").collect()}
    assert runs[summary["run_id"]].status == "complete"
    assert runs[summary["control_run_id"]].status == "complete"
    assert runs[summary["run_id"]].control_run_id == summary["control_run_id"]

    target = summary["metrics"][summary["run_id"]]
    assert [m["budget_tokens"] for m in target] == [30, 100, 300, 1000, 3000]
    assert target[-1]["generated_tokens"] >= 3000 * 0.9
    # The tiny model memorised its planted rare passages: the audit must find some of them,
    # with exact document counts of one or two.
    assert target[-1]["distinct_rare_passages"] >= 1
    rare_docs = {d for p in demo_assets.rare_passages() for d in p["doc_ids"]}
    found = (tables.read("extracted_passages").where(F.col("run_id") == summary["run_id"])
             .where("doc_count BETWEEN 1 AND 2 AND doc_count_is_exact").collect())
    assert any(set(p.example_doc_ids) & rare_docs for p in found)

    html = Path(summary["report"]["html"])
    assert html.is_file() and summary["control_run_id"] in html.read_text(encoding="utf-8")
