"""import-samples: text and token ids give the same rows; bad records counted by reason."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from conftest import make_config
from extraction_audit.errors import UserFacingError
from extraction_audit.runner import Runner
from extraction_audit.tables import Tables

OUTPUTS = [
    ("Tell me about your bank.", "Dear customer, your account ending 4411 was opened on 3 May."),
    ("Write a poem.", "The river runs beneath the old stone bridge at night."),
    (None, "The river runs beneath the old stone bridge at night."),  # same output again, no prompt
    (None, "The river runs beneath the old stone bridge at night."),  # and once more: kept as a third sample
]
COLUMNS = ["sample_id", "prompt_strategy", "prompt_text", "prompt_token_ids", "token_ids", "text", "n_tokens",
           "seed", "divergence_offset", "finish_reason"]


@pytest.fixture
def icfg(tmp_path, demo_assets):
    return make_config(tmp_path, model={"path": str(demo_assets.model_dir),
                                        "tokenizer": str(demo_assets.tokenizer_dir), "device": "cpu"})


@pytest.fixture(scope="module")
def tok(demo_assets):
    from extraction_audit.tokenizer import load_tokenizer

    return load_tokenizer(str(demo_assets.tokenizer_dir))


def import_run(spark, cfg, run_id, path):
    """import-samples as every entry point runs it: through the runner."""
    return Runner(spark, cfg).run_step(run_id, "import_samples", {"input": path})


def _write_jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) if isinstance(r, dict) else r for r in records) + "\n")
    return str(path)


def _rows(spark, cfg, run_id):
    return Tables(spark, cfg).read("samples").where(F.col("run_id") == run_id).select(*COLUMNS)


def test_text_and_token_ids_give_the_same_rows(spark, icfg, tmp_path, tok):
    as_text = [{"prompt": p, "text": t} if p else {"text": t} for p, t in OUTPUTS]
    as_ids = [{"prompt": p, "token_ids": tok(t, add_special_tokens=False)["input_ids"]} if p else
              {"token_ids": tok(t, add_special_tokens=False)["input_ids"]} for p, t in OUTPUTS]
    text_stats = import_run(spark, icfg, "from-text", _write_jsonl(tmp_path / "text.jsonl", as_text))
    pd.DataFrame(as_ids).to_parquet(tmp_path / "ids.parquet")
    ids_stats = import_run(spark, icfg, "from-ids", str(tmp_path / "ids.parquet"))
    assert text_stats["samples_imported"] == ids_stats["samples_imported"] == 4
    assert text_stats["skipped"] == {} and ids_stats["skipped"] == {}
    assertDataFrameEqual(_rows(spark, icfg, "from-text"), _rows(spark, icfg, "from-ids"))
    rows = _rows(spark, icfg, "from-text").toPandas()
    assert set(rows["prompt_strategy"]) == {"imported"} and set(rows["finish_reason"]) == {"imported"}
    assert sorted(rows["text"]) == sorted(t for _, t in OUTPUTS)
    first = rows[rows["prompt_text"] == OUTPUTS[0][0]].iloc[0]
    assert list(first["token_ids"]) == tok(OUTPUTS[0][1], add_special_tokens=False)["input_ids"]
    assert list(first["prompt_token_ids"]) == tok(OUTPUTS[0][0], add_special_tokens=False)["input_ids"]
    run = Tables(spark, icfg).read("runs").where(F.col("run_id") == "from-text").collect()[0]
    assert run["generated_tokens"] == int(rows["n_tokens"].sum())
    assert json.loads(run["step_stats"])["import_samples"]["samples_imported"] == 4


def test_reimport_is_idempotent_and_ids_are_used(spark, icfg, tmp_path):
    path = _write_jsonl(tmp_path / "a.jsonl", [{"text": t} for _, t in OUTPUTS])
    import_run(spark, icfg, "again", path)
    before = _rows(spark, icfg, "again")
    assert before.count() == 4
    import_run(spark, icfg, "again", path)
    assertDataFrameEqual(_rows(spark, icfg, "again"), before)

    with_ids = _write_jsonl(tmp_path / "b.jsonl", [{"id": "req-1", "text": "hello there"},
                                                   {"id": "req-2", "text": "hello there"},
                                                   {"sample_id": 5, "text": "x"}])
    not_integer = _write_jsonl(tmp_path / "c.jsonl", [{"sample_id": "abc", "text": "y"}])
    with pytest.raises(UserFacingError, match="sample_id"):
        import_run(spark, icfg, "ids", not_integer)
    stats = import_run(spark, icfg, "ids", with_ids)
    assert stats["samples_imported"] == 3
    ids = {r["sample_id"] for r in _rows(spark, icfg, "ids").collect()}
    assert 5 in ids and len(ids) == 3


def test_bad_records_are_counted_by_reason(spark, icfg, tmp_path, tok):
    vocab = len(tok)
    records = [
        {"text": "A fine sample of text."},
        "{not json",
        {"prompt": "only a prompt"},
        {"text": ""},
        {"token_ids": [1, 2, vocab + 5]},
        {"token_ids": []},
        {"id": "dup", "text": "first"},
        {"id": "dup", "text": "second"},
    ]
    stats = import_run(spark, icfg, "bad", _write_jsonl(tmp_path / "bad.jsonl", records))
    assert stats["records_read"] == 8 and stats["samples_imported"] == 2
    assert stats["skipped"] == {"duplicate_id": 1, "empty": 2, "malformed_record": 1, "no_content": 1,
                                "token_id_out_of_range": 1}


def test_import_errors_are_user_facing(spark, icfg, tmp_path):
    with pytest.raises(UserFacingError, match="does not exist"):
        import_run(spark, icfg, "typo", str(tmp_path / "missing.jsonl"))
    with pytest.raises(UserFacingError, match="--format"):
        import_run(spark, icfg, "typo", str(tmp_path / "file.csv"))
    # A missing file or an unknown format is refused before anything is written.
    tables = Tables(spark, icfg)
    assert tables.read("runs").where(F.col("run_id") == "typo").isEmpty()
    assert tables.read("run_steps").where(F.col("run_id") == "typo").isEmpty()
    bad_cols = _write_jsonl(tmp_path / "cols.jsonl", [{"body": "text"}])
    with pytest.raises(UserFacingError, match="'text' or a 'token_ids' column"):
        import_run(spark, icfg, "x", bad_cols)
    # A run holding generated samples (any prompt strategy but "imported"; generation's own
    # rows are tested in test_generate_job) is not mixed with imported ones.
    ok = _write_jsonl(tmp_path / "ok.jsonl", [{"text": "fine"}])
    import_run(spark, icfg, "generated", ok)
    Tables(spark, icfg).update("samples", F.col("run_id") == "generated", {"prompt_strategy": F.lit("empty")})
    with pytest.raises(UserFacingError, match="separate run"):
        import_run(spark, icfg, "generated", ok)


def test_import_samples_cli(spark, icfg, tmp_path, capsys):
    import yaml

    from extraction_audit.cli import main

    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump(icfg.model_dump(mode="json", exclude={"base_dir"})))
    path = _write_jsonl(tmp_path / "cli.jsonl", [{"text": "one sample"}, "{broken"])
    assert main(["import-samples", "--config", str(conf), "--run-id", "cli", "--input", path]) == 0
    out = capsys.readouterr().out
    assert "imported 1 of 2 records" in out and "malformed_record: 1" in out
