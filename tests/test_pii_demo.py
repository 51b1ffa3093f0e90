"""The pii stage on the synthetic demo corpus: every planted value emitted by a "model"
(here: samples that repeat the planted passages) is found with its true document count."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from conftest import make_config
from extraction_audit.pii import run_pii
from extraction_audit.pii.detectors import DetectionSettings, DetectorSet
from extraction_audit.pii.keys import value_key
from extraction_audit.tables import Tables

pytestmark = pytest.mark.slow


def test_planted_personal_data_found_with_document_counts(spark, tmp_path, demo_assets):
    cfg = make_config(tmp_path, corpus={"id": "demo", "path": str(demo_assets.corpus_dir)})
    tables = Tables(spark, cfg)
    docs = (spark.read.json(str(demo_assets.corpus_dir))
            .select(F.lit("demo").alias("corpus_id"), F.col("id").alias("doc_id"), "text", "source"))
    tables.merge("corpus_documents", docs)

    rare = [p for p in demo_assets.planted if p["kind"] == "rare"]
    samples = [(i, p["text"]) for i, p in enumerate(rare)]
    samples.append((len(samples), "Nobody wrote to zz.unknown@example.net from 203.0.113.9 before."))
    tables.merge("samples", spark.createDataFrame(
        [("demo-run", i, t) for i, t in samples], "run_id STRING, sample_id BIGINT, text STRING"))

    stats = run_pii(spark, cfg, "demo-run")
    print(json.dumps({k: stats[k] for k in ("findings", "findings_by_type", "findings_by_lookup")}, indent=1))
    findings = {(r["entity_type"], r["value_key"]): r for r in
                tables.read("pii_findings").where("run_id = 'demo-run'").collect()}

    settings = DetectionSettings.from_config(cfg)
    detectors = DetectorSet(settings)
    planted = [p for p in demo_assets.planted_pii if p["in_rare_passage"]]
    missed, wrong_count = [], []
    for p in planted:
        hits = [d for d in detectors.detect(p["text"]) if d.entity_type == p["entity_type"]]
        key = value_key(settings.key, p["entity_type"], hits[0].normalised) if hits else None
        row = findings.get((p["entity_type"], key))
        if row is None:
            missed.append((p["entity_type"], p["passage_id"]))
        elif row["corpus_doc_count"] != len(p["doc_ids"]) or not row["in_corpus"]:
            wrong_count.append((p["entity_type"], row["corpus_doc_count"], len(p["doc_ids"])))
    print(f"planted values in rare passages: {len(planted)}, found {len(planted) - len(missed)}, "
          f"missed {missed}")
    assert wrong_count == []
    assert len(missed) <= len(planted) // 10
    assert {p["entity_type"] for p in planted} - {t for t, _ in missed} >= {
        "email", "phone", "card", "iban", "uk_bank_account", "us_ssn", "nhs_number", "uk_nino",
        "date_of_birth", "ip_address", "person_name"}

    # Only the planted absent values: "Nobody" opening the sentence is not a name.
    absent = [r for (t, _), r in findings.items() if r["sample_id"] == len(samples) - 1]
    assert {r["entity_type"] for r in absent} == {"email", "ip_address"}
    assert all(r["in_corpus"] is False and r["corpus_doc_count"] == 0 for r in absent)
