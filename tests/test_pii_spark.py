"""Integration tests of the pii stage on small hand-built Delta tables (one local session)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from extraction_audit.errors import UserFacingError
from extraction_audit.pii import build_pii_corpus_index, create_redacted_views, run_pii
from extraction_audit.pii.detectors import DetectionSettings
from extraction_audit.pii.keys import value_key
from extraction_audit.runner import Runner
from extraction_audit.runs import RunRecord
from extraction_audit.tables import Tables

from conftest import at_once, make_config

CUSTOM = [{"name": "customer_id", "pattern": r"\bCUST-\d{6}\b"}]

CORPUS = {
    "doc-a": "Customer Jane Smith, card 4111 1111 1111 1111, phone 020 7946 0958.",
    "doc-b": "Reminder for Jane Smith: call 020 7946 0958 today.",
    "doc-c": "Ticket ref cust-004217 raised by the branch.",  # lower case: the custom detector misses it
    "doc-d": "Write to j.doe@example.com from 81.2.69.160 any time.",
    "doc-e": "Nothing personal in this document about the weather.",
    "doc-f": "NHS number 943 476 5870 for Patient: Mary Jones.",
}
SAMPLES = {
    0: "Patient: Jane Smith paid with 4111-1111-1111-1111 yesterday.",
    1: "Your account id is CUST-004217 as requested.",
    2: "Call Jane Smith on +44 20 7946 0958 tonight.",
    3: "Contact Bob Brown at bob.brown@example.org soon.",
    4: "Mary Jones has NHS number 943 476 5871 on file.",  # checksum fails: no NHS finding
    5: "Mary Jones, NHS number 943 476 5870, was discharged.",
}
CONTROL_SAMPLES = {0: "Jane Smith used card 4111111111111111 online."}


def pii_config(tmp_path: Path, **pii_overrides):
    storage = pii_overrides.pop("storage", {})
    return make_config(tmp_path, pii={"custom": CUSTOM, **pii_overrides},
                       storage={"warehouse": str(tmp_path / "warehouse"), **storage})


def write_corpus(spark, tables: Tables, docs: dict[str, str], corpus_id: str = "demo") -> None:
    rows = [(corpus_id, doc_id, text, "test") for doc_id, text in docs.items()]
    tables.merge("corpus_documents", spark.createDataFrame(
        rows, "corpus_id STRING, doc_id STRING, text STRING, source STRING"))


def write_samples(spark, tables: Tables, run_id: str, texts: dict[int, str], token_ids=None) -> None:
    rows = [(run_id, sid, text, (token_ids or {}).get(sid), "empty") for sid, text in texts.items()]
    tables.merge("samples", spark.createDataFrame(
        rows, "run_id STRING, sample_id BIGINT, text STRING, token_ids ARRAY<INT>, prompt_strategy STRING"))


def findings_by_type(tables: Tables, run_id: str) -> dict[tuple[int, str], dict]:
    rows = tables.read("pii_findings").where(F.col("run_id") == run_id).collect()
    return {(r["sample_id"], r["entity_type"]): r.asDict() for r in rows}


def key_of(cfg, entity_type: str, normalised: str) -> str:
    return value_key(DetectionSettings.from_config(cfg).key, entity_type, normalised)


def parquet_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*.parquet") if "_delta_log" not in p.parts]


def files_holding(folder: Path, needles: list[str]) -> list[str]:
    """Data files that contain any needle, as raw bytes or in any decoded cell."""
    hits = []
    for path in parquet_files(folder):
        blob = path.read_bytes()
        cells = json.dumps(pq.read_table(path).to_pylist(), default=str)
        if any(n.encode() in blob or n in cells for n in needles):
            hits.append(str(path))
    return hits


def train_test_tokenizer(folder: Path) -> str:
    from extraction_audit.synthetic import train_tokenizer

    tok = train_tokenizer(list(CORPUS.values()) + list(SAMPLES.values()), vocab_size=300)
    tok.save_pretrained(folder)
    return str(folder)


def test_passage_spans_decode_with_the_rust_tokenizer_and_fall_back(tmp_path, monkeypatch):
    """Token offsets -> character offsets through the folder's Rust tokenizer; where it does
    not give a sample's text back, through the full tokenizer; a foreign text not at all."""
    import pandas as pd
    from transformers import AutoTokenizer

    from extraction_audit.pii import passages

    tok_dir = train_test_tokenizer(tmp_path / "tok")
    tok = AutoTokenizer.from_pretrained(tok_dir)
    ids = tok(SAMPLES[0], add_special_tokens=False)["input_ids"]
    assert passages._rust_decoder(tok_dir)(ids) == tok.decode(ids, skip_special_tokens=False) == SAMPLES[0]
    batch = pd.DataFrame({"sample_id": [0, 1], "token_ids": [ids, ids], "text": [SAMPLES[0], "another text"],
                          "start": [2, 2], "end": [5, 5], "passage_id": ["p0", "p1"]})
    expected = (len(tok.decode(ids[:2])), len(tok.decode(ids[:5])))

    def spans():
        out = next(passages._span_batches(tok_dir)(iter([batch]))).set_index("sample_id")
        assert pd.isna(out.loc[1, "p_char_start"]) and pd.isna(out.loc[1, "p_char_end"])
        return int(out.loc[0, "p_char_start"]), int(out.loc[0, "p_char_end"])

    assert spans() == expected
    rust_calls = []

    def disagreeing(path):  # a Rust decoder that does not give the text back
        rust_calls.append(path)
        return lambda token_ids: "not the text"

    monkeypatch.setattr(passages, "_rust_decoder", disagreeing)
    assert spans() == expected and rust_calls == [tok_dir]


def test_pii_stage_end_to_end(spark, tmp_path):
    """Lookups (index and second chance), linkage, passages, control, no raw values on
    disk, idempotent re-run, redacted view, and the search limit."""
    from transformers import AutoTokenizer

    tok_dir = train_test_tokenizer(tmp_path / "tok")
    cfg = make_config(tmp_path, pii={"custom": CUSTOM}, model={"tokenizer": tok_dir})
    tables = Tables(spark, cfg)
    write_corpus(spark, tables, CORPUS)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    enc = tok(SAMPLES[0], add_special_tokens=False, return_offsets_mapping=True)
    write_samples(spark, tables, "r1", SAMPLES, {0: enc["input_ids"]})
    write_samples(spark, tables, "rc", CONTROL_SAMPLES)
    card_start = SAMPLES[0].index("4111")
    first_card_token = next(i for i, (_, e) in enumerate(enc["offset_mapping"]) if e > card_start)
    occurrences = [("r1", 0, first_card_token, len(enc["input_ids"]), "passage-card"),
                   ("r1", 0, 0, 2, "passage-head")]
    tables.merge("passage_occurrences", spark.createDataFrame(
        occurrences, "run_id STRING, sample_id BIGINT, start INT, `end` INT, passage_id STRING"))

    RunRecord(tables, "r1").create(cfg)
    stats = Runner(spark, cfg).run_step("r1", "pii", {"control_run_id": "rc"})
    found = findings_by_type(tables, "r1")
    print(json.dumps(stats, indent=1, default=str))
    run_row = RunRecord(tables, "r1").get()
    assert "pii" in run_row["steps_done"] and run_row["control_run_id"] == "rc"
    assert json.loads(run_row["step_stats"])["pii"]["findings"] == stats["findings"]

    card = found[(0, "card")]
    assert (card["in_corpus"], card["corpus_doc_count"], card["corpus_lookup"]) == (True, 1, "search")
    assert card["example_doc_ids"] == ["doc-a"]
    assert card["value_redacted"] == "**** **** **** 1111" and card["value"] is None
    assert card["value_key"] == key_of(cfg, "card", "4111111111111111")
    # the card sits next to "Jane Smith", and both occur in doc-a
    assert card["linked_name_key"] == key_of(cfg, "person_name", "jane smith")
    assert (card["linked_in_same_doc"], card["linked_doc_count"]) == (True, 1)
    assert card["in_control"] is True and card["control_run_id"] == "rc"
    assert card["passage_id"] == "passage-card"

    name = found[(0, "person_name")]
    assert (name["corpus_doc_count"], name["example_doc_ids"]) == (2, ["doc-a", "doc-b"])
    assert name["in_control"] is True
    assert name["passage_id"] is None  # "Jane Smith" lies between the two passages

    # a value the corpus-side detector misses (lower-case id in doc-c) is found by the text search
    custom = found[(1, "customer_id")]
    assert (custom["in_corpus"], custom["corpus_doc_count"], custom["corpus_lookup"]) == (True, 1, "search")
    assert custom["example_doc_ids"] == ["doc-c"] and custom["detector"] == "custom:customer_id"

    phone = found[(2, "phone")]
    assert (phone["corpus_doc_count"], phone["linked_doc_count"], phone["in_control"]) == (2, 2, False)
    assert phone["value_key"] == key_of(cfg, "phone", "+442079460958")

    email = found[(3, "email")]
    assert (email["in_corpus"], email["corpus_doc_count"], email["corpus_lookup"]) == (False, 0, "not_found")
    assert (email["linked_in_same_doc"], email["linked_doc_count"]) == (False, 0)

    assert (4, "nhs_number") not in found  # failed mod-11 check
    assert found[(5, "nhs_number")]["corpus_doc_count"] == 1
    assert found[(5, "nhs_number")]["linked_in_same_doc"] is True  # Mary Jones + NHS number in doc-f

    assert stats["samples_read"] == 6 and stats["findings"] == len(found)
    assert stats["lookup"]["searched"] == stats["lookup"]["distinct_values"] == len({r["value_key"] for r in found.values()})
    assert stats["in_control"] == 3  # the card and both "Jane Smith" findings
    assert stats["in_extracted_passage"] == 1 and stats["passages"]["samples_offsets_mismatch"] == 0
    # The step's counts are those of the rows it wrote.
    rows = list(found.values())
    keys = lambda where: len({r["value_key"] for r in rows if where(r)})  # noqa: E731
    assert {k: stats[k] for k in ("distinct_values", "distinct_values_in_corpus", "distinct_values_found_by_search",
                                  "linked_in_same_doc", "findings_by_type", "findings_by_lookup")} == {
        "distinct_values": keys(lambda r: True), "distinct_values_in_corpus": keys(lambda r: r["in_corpus"]),
        "distinct_values_found_by_search": keys(lambda r: r["corpus_lookup"] == "search"),
        "linked_in_same_doc": sum(bool(r["linked_in_same_doc"]) for r in rows),
        "findings_by_type": dict(Counter(r["entity_type"] for r in rows)),
        "findings_by_lookup": dict(Counter(r["corpus_lookup"] for r in rows))}

    # raw values are nowhere in the data files, nor in the Delta log's statistics
    warehouse = Path(tables.warehouse)
    pii_dirs = [warehouse / n for n in ("pii_findings", "pii_corpus_index", "pii_corpus_doc_values",
                                         "pii_corpus_scanned")]
    assert [f for d in pii_dirs for f in files_holding(d, RAW_NEEDLES)] == []
    assert not any(n in log_text(warehouse / "pii_findings") for n in RAW_NEEDLES)

    create_redacted_views(tables)
    view = spark.table("pii_findings_redacted")
    assert "value" not in view.columns and "value_key" in view.columns
    assert view.where("run_id = 'r1'").count() == len(found)

    # Re-run (idempotent: the run's rows are replaced, the corpus index has nothing new to
    # scan) with no search budget: a value's corpus presence is then unknown, not "absent".
    cfg.pii.corpus_search_limit = 0
    again = run_pii(spark, cfg, "r1")
    assert again["corpus_index"]["documents_scanned"] == 0 and again["findings"] == stats["findings"]
    assert tables.read("pii_findings").where("run_id = 'r1'").count() == len(found)
    found = findings_by_type(tables, "r1")
    assert (found[(1, "customer_id")]["corpus_lookup"], found[(1, "customer_id")]["in_corpus"]) == ("not_searched", None)
    assert found[(3, "email")]["in_corpus"] is None and found[(3, "email")]["linked_in_same_doc"] is None
    assert (found[(0, "card")]["in_corpus"], found[(0, "card")]["corpus_lookup"]) == (True, "index_only")
    assert found[(0, "card")]["in_control"] is True  # the control recorded on the run is reused
    assert again["lookup"]["not_searched"] == 3


RAW_NEEDLES = ["4111-1111-1111-1111", "4111111111111111", "bob.brown@example.org", "CUST-004217",
               "Jane Smith", "jane smith", "+442079460958", "9434765870"]


def log_text(table_dir: Path) -> str:
    return "".join(p.read_text() for p in (table_dir / "_delta_log").glob("*.json"))


def test_corpus_index_is_incremental_and_exact(spark, tmp_path):
    cfg = pii_config(tmp_path / "inc")
    tables = Tables(spark, cfg)
    docs = dict(CORPUS)
    late = {"doc-g": "Jane Smith again, card 4111111111111111.", "doc-h": "Call +44 20 7946 0958."}
    write_corpus(spark, tables, docs)
    first = build_pii_corpus_index(spark, cfg)
    assert (first["documents_scanned"], first["rebuilt"]) == (len(docs), False)
    write_corpus(spark, tables, late)
    second = build_pii_corpus_index(spark, cfg)
    assert (second["documents_scanned"], second["documents_already_scanned"]) == (2, len(docs))
    # Two first scans of one corpus at once (two runs' pii steps) both append markers: a
    # document marked twice is still one document.
    tables.append("pii_corpus_scanned", tables.read("pii_corpus_scanned").where(F.col("doc_id") == "doc-g"))
    third = build_pii_corpus_index(spark, cfg)
    assert (third["documents_in_corpus"], third["documents_already_scanned"], third["documents_scanned"]) == (
        len(docs) + len(late), len(docs) + len(late), 0)

    full_cfg = pii_config(tmp_path / "full")
    full_tables = Tables(spark, full_cfg)
    write_corpus(spark, full_tables, {**docs, **late})
    build_pii_corpus_index(spark, full_cfg)
    columns = ["entity_type", "value_key", "doc_count", "occurrence_count", "example_doc_ids"]
    incremental = tables.read("pii_corpus_index").select(columns)
    assertDataFrameEqual(incremental, full_tables.read("pii_corpus_index").select(columns))
    counts = {r["value_key"]: r["doc_count"] for r in incremental.collect()}
    assert counts[key_of(cfg, "person_name", "jane smith")] == 3
    assert counts[key_of(cfg, "phone", "+442079460958")] == 3
    assert counts[key_of(cfg, "card", "4111111111111111")] == 2

    cfg.pii.hmac_key = "a-different-key"  # keys no longer compare: everything is rescanned
    rebuilt = build_pii_corpus_index(spark, cfg)
    assert rebuilt["rebuilt"] and rebuilt["documents_scanned"] == len(docs) + len(late)
    assert tables.read("pii_corpus_index").count() == len(counts)
    assert key_of(cfg, "card", "4111111111111111") in {
        r["value_key"] for r in tables.read("pii_corpus_index").collect()}


def test_errors_and_cli(spark, tmp_path, monkeypatch, capsys):
    import yaml

    from extraction_audit.cli import main

    cfg = pii_config(tmp_path, storage={"retention_hours": 0})
    tables = Tables(spark, cfg)
    write_corpus(spark, tables, {"doc-a": CORPUS["doc-a"]})
    write_samples(spark, tables, "r1", {0: SAMPLES[0]})
    RunRecord(tables, "missing-run").create(cfg)
    with pytest.raises(UserFacingError, match="no samples"):
        Runner(spark, cfg).run_step("missing-run", "pii")
    assert RunRecord(tables, "missing-run").get()["status"] == "failed:pii"
    with pytest.raises(UserFacingError, match="not valid"):
        run_pii(spark, cfg, "bad'id")

    config_path = tmp_path / "audit.yaml"
    config_path.write_text(yaml.safe_dump(json.loads(cfg.to_json())))
    assert main(["pii", "--config", str(config_path)]) == 2
    assert "--run-id is required" in capsys.readouterr().err
    assert main(["pii", "--config", str(config_path), "--run-id", "nope"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["purge", "--config", str(config_path), "--run-id", "r1", "--vacuum"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rows_deleted"]["samples"] == 1 and out["vacuumed"] == ["samples"]
    assert tables.read("samples").count() == 0

    monkeypatch.delenv("EXTRACTION_AUDIT_PII_KEY")
    assert main(["pii", "--config", str(config_path), "--run-id", "missing-run"]) == 2
    assert "EXTRACTION_AUDIT_PII_KEY" in capsys.readouterr().err


def test_raw_values_stay_out_of_statistics_from_the_first_commit_and_two_runs_fix_an_old_table_at_once(
        spark, tmp_path):
    """A new pii_findings has ``value`` out of its statistics from its first commit (no
    second commit for two runs to race on); a table an earlier version made without the
    property gets it from two runs starting their pii step at once, neither failing."""
    from extraction_audit.pii.findings import _STATS_COLUMNS, ensure_findings_table

    def stats_columns(tables):
        return (spark.sql(f"DESCRIBE DETAIL {tables.ref('pii_findings')}").first()["properties"] or {}).get(
            "delta.dataSkippingStatsColumns")

    fresh = Tables(spark, make_config(tmp_path / "fresh", seed_tables=False))
    fresh.ensure("pii_findings")
    assert stats_columns(fresh) == _STATS_COLUMNS and "value" not in _STATS_COLUMNS.split(",")
    ensure_findings_table(fresh)
    history = spark.sql(f"DESCRIBE HISTORY {fresh.ref('pii_findings')}").collect()
    assert [h.operation for h in history] == ["CREATE TABLE"]

    old = Tables(spark, make_config(tmp_path / "old", seed_tables=False))
    old.ensure("pii_findings")
    spark.sql(f"ALTER TABLE {old.ref('pii_findings')} UNSET TBLPROPERTIES ('delta.dataSkippingStatsColumns')")
    assert stats_columns(old) is None
    assert at_once(lambda: ensure_findings_table(Tables(spark, old.cfg)), threads=3) == []
    assert stats_columns(old) == _STATS_COLUMNS


def test_purge_leaves_no_copy_in_tables_with_deletion_vectors(spark, tmp_path):
    """With deletion vectors on (the default for new tables on recent Databricks runtimes) a
    DELETE only marks rows: the run's values stay in the data file.  Purge must rewrite such
    files so that VACUUM removes every copy: in an unpartitioned table (run_metrics as a
    warehouse of an earlier version created it, the other run's rows in the same file; fails
    without the rewrite) and in one partitioned by run (samples, whole files dropped)."""
    from extraction_audit.pii.retention import purge_run
    from extraction_audit.tables import TABLES

    cfg = make_config(tmp_path, seed_tables=False, storage={"retention_hours": 0})
    tables = Tables(spark, cfg)
    spark.sql(f"CREATE TABLE {tables.ref('run_metrics')} ({TABLES['run_metrics'].ddl}) USING DELTA")
    tables.ensure("samples")
    for name in ("run_metrics", "samples"):
        spark.sql(f"ALTER TABLE {tables.ref(name)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    tables.append("run_metrics", spark.createDataFrame(
        [(run, budget, budget * 10) for run in ("gone", "kept") for budget in (100, 1000)],
        "run_id STRING, budget_tokens BIGINT, generated_tokens BIGINT").coalesce(1))
    tables.append("samples", spark.createDataFrame(
        [(run, i, f"{run} secret text {i}") for run in ("gone", "kept") for i in range(3)],
        "run_id STRING, sample_id BIGINT, text STRING").coalesce(1))

    def copies(name: str) -> list[str]:
        files = sorted(Path(tables.location(name)).rglob("*.parquet"))
        assert files
        return [str(f) for f in files if "gone" in pq.read_table(f).column("run_id").to_pylist()]

    assert copies("run_metrics") and copies("samples")
    stats = purge_run(spark, cfg, "gone", vacuum=True)
    assert stats["rows_deleted"]["run_metrics"] == 2 and stats["rows_deleted"]["samples"] == 3
    assert copies("run_metrics") == [] and copies("samples") == []
    assert tables.read("run_metrics").where(F.col("run_id") == "kept").count() == 2
    assert sorted(r.text for r in tables.read("samples").where(F.col("run_id") == "kept").collect()) == [
        f"kept secret text {i}" for i in range(3)]
