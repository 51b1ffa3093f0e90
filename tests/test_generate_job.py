"""The Spark generation job: budgets, every strategy, stored ids, reruns, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from conftest import make_config
from extraction_audit.errors import UserFacingError
from extraction_audit.runner import Runner
from extraction_audit.tables import Tables

MAX_NEW = 24
CHUNK = 16
REPEAT_MAX_NEW = 40


def _config(tmp_path, demo_assets, budget=600, seed=7, **sampling):
    prompts_file = tmp_path / "user_prompts.txt"
    prompts_file.write_text("Dear customer, thank you for\nThe discharge summary says\n")
    return make_config(
        tmp_path,
        model={"path": str(demo_assets.model_dir), "tokenizer": str(demo_assets.tokenizer_dir),
               "device": "cpu", "dtype": "float32"},
        generation={
            "budget_tokens": budget, "batch_size": 8, "samples_per_task": 8, "chunk_samples": CHUNK, "seed": seed,
            "sampling": {"max_new_tokens": MAX_NEW, "top_k": 40, "temperature_start": 10.0,
                         "temperature_decay_tokens": 20, **sampling},
            "prompts": [
                {"strategy": "empty", "share": 0.4},
                {"strategy": "public_prefix", "share": 0.3, "source": str(demo_assets.prompts_path)},
                {"strategy": "repeat_word", "share": 0.2, "max_new_tokens": REPEAT_MAX_NEW,
                 "words": ["poem", "company"], "repetitions": [1, 3]},
                {"strategy": "file", "share": 0.1, "source": str(prompts_file)},
            ],
        },
    )


COLUMNS = ["run_id", "sample_id", "prompt_strategy", "prompt_text", "prompt_token_ids", "token_ids", "text",
           "n_tokens", "seed", "divergence_offset", "finish_reason"]


def _samples(spark, cfg, run_id):
    return Tables(spark, cfg).read("samples").where(F.col("run_id") == run_id)


def _snapshot(spark, df):
    """A copy of ``df``'s rows that later table writes cannot change (a cached Delta read
    would be refreshed by them)."""
    return spark.createDataFrame(df.collect(), df.schema)


def _kept(df, ids_df):
    """The rows of ``df`` whose sample_id is in ``ids_df``, in table column order."""
    return df.join(ids_df.select("sample_id"), "sample_id", "left_semi").select(*COLUMNS)


def generate(spark, cfg, run_id, budget_tokens=None):
    """The generate step as every entry point runs it: through the runner."""
    return Runner(spark, cfg).run_step(run_id, "generate", {"budget_tokens": budget_tokens})


@pytest.fixture(scope="module")
def first_run(spark, demo_assets, tmp_path_factory):
    """One generated run shared by the read-only checks below."""
    tmp = tmp_path_factory.mktemp("gen-run")
    cfg = _config(tmp, demo_assets)
    stats = generate(spark, cfg, "run-a")
    rows = _samples(spark, cfg, "run-a").orderBy("sample_id").toPandas()
    return cfg, stats, rows


def test_budget_is_met_without_large_overshoot(first_run):
    cfg, stats, rows = first_run
    tokens = int(rows["n_tokens"].sum())
    assert stats["generated_tokens"] == tokens and stats["samples"] == len(rows)
    assert 600 <= tokens < 600 + CHUNK * REPEAT_MAX_NEW
    assert rows["sample_id"].tolist() == list(range(len(rows)))  # dense, no duplicates
    assert stats["chunks"] >= 2  # committed in several rounds


def test_every_strategy_is_generated_and_recorded(first_run):
    cfg, stats, rows = first_run
    assert set(rows["prompt_strategy"]) == {"empty", "public_prefix", "repeat_word", "file"}
    assert sum(stats["samples_added_by_strategy"].values()) == len(rows)
    assert (rows["n_tokens"] == rows["token_ids"].map(len)).all()
    limit = np.where(rows["prompt_strategy"] == "repeat_word", REPEAT_MAX_NEW, MAX_NEW)
    assert (rows["n_tokens"] <= limit).all()
    assert (rows.loc[rows["finish_reason"] == "length", "n_tokens"]
            == limit[rows["finish_reason"] == "length"]).all()
    assert set(rows["finish_reason"]) <= {"length", "eos"}
    repeat = rows[rows["prompt_strategy"] == "repeat_word"]
    assert repeat["prompt_text"].str.contains("poem|company").all()
    off = repeat["divergence_offset"].dropna()
    assert ((off >= 0) & (off <= repeat.loc[off.index, "n_tokens"])).all()
    assert rows.loc[rows["prompt_strategy"] != "repeat_word", "divergence_offset"].isna().all()
    assert (rows.loc[rows["prompt_strategy"] == "empty", "prompt_text"] == "").all()
    assert rows["seed"].notna().all() and rows["created_at"].notna().all()


def test_stored_ids_are_the_generated_ids_not_a_text_round_trip(first_run, demo_assets):
    """Later stages score and match the ids as generated; re-encoding the text would not
    give them back."""
    from extraction_audit.generate.backends import BackendSpec, get_backend

    cfg, _, rows = first_run
    backend = get_backend(BackendSpec("hf", cfg.model.path, cfg.model.tokenizer_path, "float32", "cpu",
                                      cfg.generation.sampling.model_dump_json()))
    for _, row in rows.head(6).iterrows():
        out = backend.generate([np.asarray(row["prompt_token_ids"])], np.array([row["seed"]]),
                               REPEAT_MAX_NEW if row["prompt_strategy"] == "repeat_word" else MAX_NEW)
        assert out.rows()[0].tolist() == list(row["token_ids"])
        assert row["text"] == backend.tokenizer.decode(list(row["token_ids"]))
    tok = backend.tokenizer
    round_trip_differs = [tok(t, add_special_tokens=False)["input_ids"] != list(ids)
                          for t, ids in zip(rows["text"], rows["token_ids"])]
    assert any(round_trip_differs)


def test_runs_row_records_settings_and_progress(first_run, spark):
    cfg, stats, rows = first_run
    run = Tables(spark, cfg).read("runs").where(F.col("run_id") == "run-a").collect()[0]
    assert run["budget_tokens"] == 600 and run["generated_tokens"] == int(rows["n_tokens"].sum())
    sampling = json.loads(run["sampling"])
    assert sampling["temperature_start"] == 10.0 and sampling["top_k"] == 40
    assert "generate" in run["steps_done"]
    assert json.loads(run["step_stats"])["generate"]["samples"] == len(rows)
    assert run["tokenizer"] and "@" in run["tokenizer"]
    assert run["prompt_strategy"].startswith("empty:0.4")


def test_same_seed_reproduces_samples_in_another_run(first_run, spark):
    cfg, _, rows = first_run
    generate(spark, cfg, "run-b", budget_tokens=150)
    cols = ["sample_id", "prompt_strategy", "prompt_text", "prompt_token_ids", "token_ids", "text", "n_tokens",
            "seed", "divergence_offset", "finish_reason"]
    b = _samples(spark, cfg, "run-b").select(*cols)
    a = _samples(spark, cfg, "run-a").select(*cols).join(b.select("sample_id"), "sample_id")
    assert b.count() >= 5
    assertDataFrameEqual(b, a)


def test_rerun_generates_only_what_is_missing(spark, demo_assets, tmp_path):
    cfg = _config(tmp_path, demo_assets, budget=200)
    generate(spark, cfg, "r")
    tables = Tables(spark, cfg)
    before = _snapshot(spark, _samples(spark, cfg, "r").select(*COLUMNS))
    n_before = before.count()
    again = generate(spark, cfg, "r")
    assert again["samples_added"] == 0 and again["chunks"] == 0
    # Lose two committed samples (a hole), then rerun: exactly those come back, identical.
    tables.delete("samples", (F.col("run_id") == "r") & F.col("sample_id").isin(1, 3))
    repaired = generate(spark, cfg, "r")
    assert repaired["samples_added"] >= 2
    assertDataFrameEqual(_kept(_samples(spark, cfg, "r"), before), before)
    # A larger budget extends the run with new ids only.
    extended = generate(spark, cfg, "r", budget_tokens=400)
    ids = [r["sample_id"] for r in _samples(spark, cfg, "r").select("sample_id").collect()]
    assert len(ids) == len(set(ids)) == max(ids) + 1 > n_before
    assert extended["generated_tokens"] >= 400
    assertDataFrameEqual(_kept(_samples(spark, cfg, "r"), before), before)


def test_rerun_with_other_sampling_settings_is_refused(spark, demo_assets, tmp_path):
    cfg = _config(tmp_path, demo_assets, budget=30)
    generate(spark, cfg, "s")
    changed = _config(tmp_path, demo_assets, budget=30, top_k=10)
    with pytest.raises(UserFacingError, match="generation.sampling"):
        generate(spark, changed, "s")


def test_bad_budget_or_model_folder_is_refused_before_anything_is_written(spark, demo_assets, tmp_path):
    cfg = _config(tmp_path, demo_assets, budget=30)
    for budget in (0, -5):
        with pytest.raises(UserFacingError, match="at least 1"):
            generate(spark, cfg, "bad-budget", budget_tokens=budget)
    missing = cfg.model_copy(update={"model": cfg.model.model_copy(update={"path": str(tmp_path / "nowhere")})})
    with pytest.raises(UserFacingError, match="does not exist"):
        generate(spark, missing, "bad-budget")
    tables = Tables(spark, cfg)
    assert tables.read("runs").where(F.col("run_id") == "bad-budget").isEmpty()
    assert tables.read("run_steps").where(F.col("run_id") == "bad-budget").isEmpty()


def test_context_overflow_is_a_clear_error(spark, demo_assets, tmp_path):
    cfg = _config(tmp_path, demo_assets, budget=30, max_new_tokens=100_000)
    with pytest.raises(UserFacingError, match="context"):
        generate(spark, cfg, "too-long")


def test_generate_cli(spark, demo_assets, tmp_path, capsys):
    import yaml

    from extraction_audit.cli import main

    cfg = _config(tmp_path, demo_assets, budget=40)
    path = tmp_path / "conf.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", exclude={"base_dir"})))
    assert main(["generate", "--config", str(path), "--run-id", "cli-run", "--budget-tokens", "60"]) == 0
    out = capsys.readouterr().out
    assert "run cli-run:" in out and "generated tokens (budget 60)" in out
    assert main(["generate", "--config", str(path), "--run-id", "cli-run", "--set",
                 "generation.sampling.top_k=5"]) == 2
    assert "different generation.sampling" in capsys.readouterr().err
