"""The README's main command, end to end on the tiny model (smaller budget than the default)."""

from __future__ import annotations

from pathlib import Path

import json
import re

import pytest
from pyspark.sql import functions as F

from conftest import make_config
from extraction_audit.cli import main
from extraction_audit.demo import HEADLINE_LINES, run_demo
from extraction_audit.report import fmt
from extraction_audit.tables import Tables

pytestmark = pytest.mark.slow


def test_demo_audits_target_and_control_and_writes_the_report(spark, demo_assets, tmp_path, capsys, monkeypatch):
    # A few known-prefix probes per stratum, generated in one chunk per mode.
    base = make_config(tmp_path, probe={"per_stratum": 3, "chunk_probes": 4096})
    summary = run_demo(spark, demo_dir=str(demo_assets.root), budget_tokens=1000, base=base)
    out = capsys.readouterr().out
    assert "extraction-audit demo: summary" in out and "top rare passages" in out

    tables = Tables(spark, base)
    runs = {r.run_id: r for r in tables.read("runs").collect()}
    assert runs[summary["run_id"]].status == "complete"
    assert runs[summary["control_run_id"]].status == "complete"
    assert runs[summary["run_id"]].control_run_id == summary["control_run_id"]
    # The two audits ran side by side, each step the target needs from the control after it.
    steps = {(r.run_id, r.step): r for r in tables.read("run_steps").collect()}
    target_id, control_id = summary["run_id"], summary["control_run_id"]
    control_steps = [r for (run, _), r in steps.items() if run == control_id]
    assert steps[(target_id, "index")].started_at >= steps[(control_id, "index")].finished_at
    assert steps[(target_id, "pii")].started_at >= steps[(control_id, "generate")].finished_at
    assert steps[(target_id, "report")].started_at >= max(r.finished_at for r in control_steps)
    assert steps[(target_id, "generate")].started_at < max(r.finished_at for r in control_steps)

    target = summary["metrics"][summary["run_id"]]
    assert [m["budget_tokens"] for m in target if not m["is_whole_run"]] == [10, 100, 1000]
    assert target[-1]["is_whole_run"] and target[-1]["scope"] == "whole run"
    assert target[-1]["generated_tokens"] >= 1000 * 0.9
    # The tiny model memorised its planted rare passages: the audit must find some of them,
    # with exact document counts of one or two.
    assert target[-1]["distinct_rare_passages"] >= 1
    rare_docs = {d for p in demo_assets.rare_passages() for d in p["doc_ids"]}
    found = (tables.read("extracted_passages").where(F.col("run_id") == summary["run_id"])
             .where("doc_count BETWEEN 1 AND 2 AND doc_count_is_exact").collect())
    assert any(set(p.example_doc_ids) & rare_docs for p in found)

    html = Path(summary["report"]["html"])
    assert html.is_file() and summary["control_run_id"] in html.read_text(encoding="utf-8")

    # One set of numbers: the console's whole-run block, report.json's headline and the model
    # card's results table print the same figures (parsed from each, compared as printed).
    report = json.loads(Path(summary["report"]["json"]).read_text(encoding="utf-8"))
    headline = report["runs"][summary["run_id"]]["headline"]
    card = Path(summary["report"]["markdown"]).read_text(encoding="utf-8")
    assert str(html.parent) in out and summary["report"]["markdown"] in out  # where report and card are
    console = out[out.index(f"target  run {summary['run_id']}"):]
    card_rows = {m.group(1).strip(): m.group(2).split(" (")[0].strip()
                 for m in re.finditer(r"^\| ([^|]+) \| ([^|]+) \|$", card, re.M)}
    in_card = {"share_extracted": "Share of generated tokens extracted",
               "distinct_passages": "Distinct extracted passages",
               "distinct_rare_passages": "Distinct rare passages (1–2 documents)",
               "distinct_regions": "Distinct source regions (overlapping passages of one document merged)",
               "corpus_tokens_extracted": "Corpus tokens extracted (union of matched corpus spans)"}
    for label, col, share in HEADLINE_LINES:
        printed = re.search(rf"^    {re.escape(label)}\s+(\S+)$", console, re.M).group(1)
        assert printed == fmt.number(headline[col], share), col
        if col in in_card:
            assert card_rows[in_card[col]] == printed, col
    whole = target[-1]
    assert (whole["distinct_passages"], whole["distinct_rare_passages"], whole["distinct_regions"],
            whole["corpus_tokens_extracted"]) == (headline["distinct_passages"], headline["distinct_rare_passages"],
                                                  headline["distinct_regions"], headline["corpus_tokens_extracted"])
    assert headline["distinct_regions"] <= headline["distinct_passages"]
    assert "Figures are for the whole run" in card
    # Stitched passages are never listed as rare findings.
    assert all(p["doc_count"] >= 1 for p in summary["top_rare_passages"])

    # Analyst access: every table and view the README names answers after register_views(),
    # and the sql subcommand answers a query with the demo's config file.
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Tables"):readme.index("## Design notes")]
    named = {n for row in re.findall(r"^\| (`[^|]+) \|", section, re.M) for n in re.findall(r"`(\w+)`", row)}
    named |= set(re.findall(r"`(\w+_redacted)`", readme))
    assert {"extracted_regions", "extracted_documents", "pii_findings_redacted"} <= named
    registered = tables.register_views()
    for name in sorted(named):
        assert name in registered, name
        spark.sql(f"SELECT * FROM {name} LIMIT 1").collect()
    assert main(["sql", "--config", summary["config_path"], "--csv",
                 "SELECT doc_id, regions, tokens_extracted FROM extracted_documents "
                 f"WHERE run_id = '{summary['run_id']}' ORDER BY tokens_extracted DESC, doc_id"]) == 0
    csv = capsys.readouterr().out.strip().splitlines()
    assert csv[0] == "doc_id,regions,tokens_extracted" and len(csv) - 1 == len(
        tables.read("extracted_documents").where(F.col("run_id") == summary["run_id"]).collect())
    _check_probes(spark, demo_assets, base, tables, summary, html, monkeypatch)


def _check_probes(spark, demo_assets, base, tables, summary, html, monkeypatch):
    """Planted passages open their documents: given their first 50 tokens the target
    continues them verbatim, the control checkpoint does not; the report shows the
    duplication curve and the recovery share; an interrupted probe step resumes to the
    same rows."""
    import pandas as pd
    from transformers import AutoTokenizer

    from extraction_audit.demo import demo_config
    from extraction_audit.probe import job as probe_job

    run_id, control_id = summary["run_id"], summary["control_run_id"]
    probes = tables.read("probes").where(F.col("mode") == "greedy").toPandas()
    tok = AutoTokenizer.from_pretrained(demo_assets.tokenizer_dir)
    openings = {tuple(tok(p["text"], add_special_tokens=False)["input_ids"][:50]) for p in demo_assets.rare_passages()}
    planted = probes[[tuple(x) in openings for x in probes["prefix_token_ids"]]]
    target, control = planted[planted["run_id"] == run_id], planted[planted["run_id"] == control_id]
    assert len(target) >= 1
    by_run = {r: set(probes[probes["run_id"] == r]["probe_id"]) for r in (run_id, control_id)}
    assert by_run[run_id] == by_run[control_id]  # the draw is a function of the seed and the index
    # Every class present in the demo corpus is drawn (nothing is in 100+ of its 300 documents).
    assert set(probes["doc_count_class"]) == {"1", "2-9", "10-99"}
    assert target["exact"].all() and (target["edit_similarity"] == 1.0).all()
    assert not control["exact"].any() and (control["edit_similarity"] < 0.9).all()

    figures = summary["probes"]
    assert {r["run_id"] for r in figures["by_class"]} == {run_id, control_id}
    text = html.read_text(encoding="utf-8")
    assert "Duplication curve" in text and "Recovery share of the sampling route" in text
    recovery = [r for r in figures["recovery"] if r["run_id"] == run_id]
    rows = probes[(probes["run_id"] == run_id) & probes["exact"]]
    assert recovery[-1]["reproduced"] == len(rows)
    assert recovery[-1]["found"] == int(rows["found_by_sampling"].sum())

    # Resume: drop the target's sampled rows, fail after the first committed chunk, rerun.
    cfg = demo_config(demo_assets, base.model_copy(update={"probe": base.probe.model_copy(
        update={"chunk_probes": 14})}))
    key = ["probe_id", "mode"]
    before = (tables.read("probes").where(F.col("run_id") == run_id).drop("created_at").toPandas()
              .sort_values(key).reset_index(drop=True))
    tables.delete("probes", (F.col("run_id") == run_id) & (F.col("mode") == "sampled"))

    def fail(run, mode, chunk):
        raise RuntimeError("killed after the first committed chunk")

    monkeypatch.setattr(probe_job, "_after_commit", fail)
    with pytest.raises(RuntimeError, match="killed"):
        probe_job.run_probe(spark, cfg, run_id, tables, scratch=str(Path(base.storage.warehouse) / "_probe_resume"))
    partial = tables.read("probes").where((F.col("run_id") == run_id) & (F.col("mode") == "sampled")).count()
    assert 0 < partial < len(before) // 2
    monkeypatch.setattr(probe_job, "_after_commit", lambda *a: None)
    probe_job.run_probe(spark, cfg, run_id, tables, scratch=str(Path(base.storage.warehouse) / "_probe_resume"))
    after = (tables.read("probes").where(F.col("run_id") == run_id).drop("created_at").toPandas()
             .sort_values(key).reset_index(drop=True))
    pd.testing.assert_frame_equal(before.astype(str), after[before.columns].astype(str))


def _side_by_side_with_a_missing_model(spark, demo_assets, tmp_path, broken: str) -> Tables:
    """Run ``audit_side_by_side`` (runs ``<broken>-control`` and ``<broken>-target``) with the
    ``broken`` side's model folder missing; its error must be the demo's."""
    from extraction_audit.demo import audit_side_by_side, demo_config
    from extraction_audit.errors import UserFacingError

    cfg = demo_config(demo_assets, make_config(tmp_path), 1000)
    control_cfg = cfg.model_copy(deep=True)
    missing = tmp_path / f"no-such-{broken}-model"
    (control_cfg if broken == "control" else cfg).model.path = str(missing)
    with pytest.raises(UserFacingError, match=missing.name):
        audit_side_by_side(spark, control_cfg, cfg, f"{broken}-control", f"{broken}-target")
    return Tables(spark, cfg)


def test_a_failed_control_audit_stops_the_target_with_its_error(spark, demo_assets, tmp_path):
    """The demo audits the control beside the target: a control that cannot start must
    surface as the demo's error, and the target must not run a step that needs the control
    (here: index, the control's corpus build)."""
    tables = _side_by_side_with_a_missing_model(spark, demo_assets, tmp_path, "control")
    assert tables.read("runs").where(F.col("run_id") == "control-control").count() == 0
    target = tables.read("runs").where(F.col("run_id") == "control-target").first()
    assert target is not None and target.status != "complete"
    assert tables.read("run_steps").where(F.col("run_id") == "control-target").count() == 0


def test_a_failed_target_audit_stops_the_control(spark, demo_assets, tmp_path):
    """The other way round: the target cannot start; its error is the demo's, and the
    control stops instead of auditing on for minutes (it never generates)."""
    tables = _side_by_side_with_a_missing_model(spark, demo_assets, tmp_path, "target")
    assert tables.read("runs").where(F.col("run_id") == "target-target").count() == 0
    control = tables.read("runs").where(F.col("run_id") == "target-control").first()
    assert control is None or control.status != "complete"
    assert tables.read("run_steps").where((F.col("run_id") == "target-control") & (F.col("step") == "generate")
                                          ).count() == 0
