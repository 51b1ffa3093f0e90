"""The rank step end to end on the demo models: planted memorised passages rank first, the
Spark-computed scores equal a direct per-sample computation, near-duplicates collapse, the
CLI re-run is idempotent, and calibration against hand-written corpus-route rows."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from pyspark.sql import functions as F

from conftest import make_config
from extraction_audit.runner import Runner
from extraction_audit.rank.scores import SCORES
from extraction_audit.runs import RunRecord
from extraction_audit.tables import Tables

RUN = "run-rank-demo"
WINDOW = 32
MAX_TOKENS = 120


@pytest.fixture(scope="module")
def demo_run(spark, demo_assets, tmp_path_factory):
    """Samples built by hand: planted rare passages (some after a prompt), two near-copies of
    one of them, ordinary hold-out prose, and hold-out prose with a memorised stretch inside."""
    from transformers import AutoTokenizer

    tmp = tmp_path_factory.mktemp("rank-demo")
    cfg = make_config(tmp, model={"path": str(demo_assets.model_dir), "tokenizer": str(demo_assets.tokenizer_dir),
                                  "reference_path": str(demo_assets.reference_model_dir), "device": "cpu"},
                      rank={"window": WINDOW, "batch_size": 8})
    tok = AutoTokenizer.from_pretrained(demo_assets.tokenizer_dir)

    def ids(text):
        return tok(text, add_special_tokens=False)["input_ids"]

    rows, kinds = [], {}

    def add(kind, prompt, generated):
        sid = len(rows)
        rows.append({"run_id": RUN, "sample_id": sid, "prompt_strategy": "empty" if not prompt else "public_prefix",
                     "prompt_text": tok.decode(prompt), "prompt_token_ids": list(prompt), "token_ids": list(generated),
                     "text": tok.decode(generated), "n_tokens": len(generated)})
        kinds[sid] = kind

    rare = [ids(p["text"]) for p in demo_assets.rare_passages()]
    for i, p in enumerate(rare):
        if i % 2:
            add("rare", p[:8], p[8:8 + MAX_TOKENS])
        else:
            add("rare", [], p[:MAX_TOKENS])
    for j, swap in enumerate(((5, 40), (17, 77))):
        copy = list(rare[0][:MAX_TOKENS])
        for pos in swap:
            copy[pos] = rare[1][pos]
        add("near_copy", [], copy)
    holdout = [ids(json.loads(line)["text"]) for line in open(demo_assets.holdout_path, encoding="utf-8")]
    holdout = [h for h in holdout if len(h) >= 60][:13]
    for h in holdout[:12]:
        add("holdout", [], h[:MAX_TOKENS])
    h = holdout[12]
    add("embedded", [], h[:30] + rare[2][:WINDOW] + h[30:60])

    tables = Tables(spark, cfg)
    tables.append("samples", spark.createDataFrame(pd.DataFrame(rows)))
    RunRecord(tables, RUN).create(cfg, steps_planned=["rank", "calibrate"])
    stats = Runner(spark, cfg).run_step(RUN, "rank")
    cands = tables.read("candidates").where(F.col("run_id") == RUN).toPandas().set_index("sample_id").sort_index()
    cands["kind"] = pd.Series(kinds)
    return {"cfg": cfg, "rows": rows, "kinds": kinds, "stats": stats, "cands": cands, "tmp": tmp}


def test_planted_passages_rank_at_the_top_of_every_score(demo_run):
    cands = demo_run["cands"]
    reps = cands[cands["is_representative"]]
    n_rare = int((reps["kind"] == "rare").sum())
    assert n_rare == 6
    for name, spec in SCORES.items():
        ranks = reps[spec.rank_column]
        assert ranks.notna().all(), name
        assert sorted(ranks.astype(int)) == list(range(1, len(reps) + 1)), name
        rare_ranks = sorted(ranks[reps["kind"] == "rare"].astype(int))
        assert rare_ranks[-1] <= n_rare + 1, (name, rare_ranks)
        assert (ranks[reps["kind"] == "holdout"] > rare_ranks[-1]).all(), name
    # the memorised stretch inside ordinary prose: only the window score puts it at the top
    embedded = reps[reps["kind"] == "embedded"].iloc[0]
    assert embedded["rank_window_min_log_ppl"] <= n_rare + 1
    assert embedded["window_min_log_ppl"] < 0.25 * embedded["target_log_ppl"]


def _direct_logprobs(model, context, target) -> np.ndarray:
    import torch

    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([list(context) + list(target)])).logits[0].double(), -1)
    return np.array([logp[len(context) - 1 + j, t].item() for j, t in enumerate(target)])


def test_spark_scores_equal_a_direct_unbatched_computation(demo_run, demo_assets):
    import zlib

    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = AutoModelForCausalLM.from_pretrained(demo_assets.model_dir).eval()
    reference = AutoModelForCausalLM.from_pretrained(demo_assets.reference_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(demo_assets.tokenizer_dir)
    cands, rows = demo_run["cands"], demo_run["rows"]
    embedded = next(s for s, k in demo_run["kinds"].items() if k == "embedded")
    for sid in (0, 1, 8, embedded):  # no prompt, with a prompt, a near-copy, the embedded stretch
        row = rows[sid]
        ctx = row["prompt_token_ids"] or [tok.bos_token_id]
        lp = _direct_logprobs(target, ctx, row["token_ids"])
        ref = _direct_logprobs(reference, ctx, row["token_ids"])
        low = _direct_logprobs(target, ctx, tok(row["text"].lower(), add_special_tokens=False)["input_ids"])
        windows = [-lp[i:i + WINDOW].mean() for i in range(len(lp) - WINDOW + 1)]
        k = max(1, int(len(lp) * 0.2))
        expected = {
            "target_log_ppl": -lp.mean(), "reference_log_ppl": -ref.mean(), "reference_ratio": lp.mean() / ref.mean(),
            "zlib_ratio": -lp.mean() / len(zlib.compress(row["text"].encode())),
            "lowercase_ratio": lp.mean() / low.mean(), "window_min_log_ppl": min(windows),
            "min_k_prob": np.sort(lp)[:k].mean(),
        }
        got = cands.loc[sid]
        for name, value in expected.items():
            assert got[name] == pytest.approx(value, rel=1e-4, abs=1e-7), (sid, name)
        assert got["n_scored_tokens"] == got["n_tokens"] == len(row["token_ids"])
        assert not got["window_is_whole_sample"]
    # the window score is not the whole-sample score when the memorised part is a sub-window
    assert cands.loc[embedded, "window_min_log_ppl"] < cands.loc[embedded, "target_log_ppl"] - 1.0


def test_near_copies_collapse_into_one_ranked_representative(demo_run):
    cands = demo_run["cands"]
    cluster = cands[cands["cluster_id"] == 0]
    assert sorted(cluster.index) == [0, 6, 7]
    assert (cluster["cluster_size"] == 3).all()
    assert cluster["is_representative"].tolist() == [True, False, False]
    rank_cols = [s.rank_column for s in SCORES.values()]
    assert cands.loc[[6, 7], rank_cols].isna().all().all()
    assert cands.loc[[6, 7], list(SCORES)].notna().all().all()  # scores kept for every row
    stats = demo_run["stats"]
    assert stats["samples_in"] == stats["scored"] == len(cands)
    assert stats["collapsed_duplicates"] == 2 and stats["representatives"] == len(cands) - 2
    assert stats["skipped"] == {"no_generated_tokens": 0} and stats["truncated_to_context"] == 0


def test_cli_rerun_is_idempotent_and_calibrates_against_the_corpus_route(demo_run, spark, capsys):
    from extraction_audit.cli import main

    cfg, cands, tmp = demo_run["cfg"], demo_run["cands"], demo_run["tmp"]
    tables = Tables(spark, cfg)
    recorded = json.loads(RunRecord(tables, RUN).get()["step_stats"])["rank"]
    assert recorded["representatives"] == demo_run["stats"]["representatives"]

    # what the corpus route would write: every planted stretch is an occurrence of a passage
    positives = [s for s, k in demo_run["kinds"].items() if k in ("rare", "near_copy", "embedded")]
    tables.append("passage_occurrences", spark.createDataFrame(pd.DataFrame(
        {"run_id": RUN, "sample_id": positives, "start": 0, "end": WINDOW, "passage_id": [f"p{s}" for s in positives]})))
    tables.append("extracted_passages", spark.createDataFrame(pd.DataFrame(
        {"run_id": RUN, "passage_id": [f"p{s}" for s in positives], "is_low_entropy": False})))

    config = tmp / "audit.yaml"
    config.write_text(yaml.safe_dump(cfg.model_dump(mode="json")), encoding="utf-8")
    assert main(["rank", "--config", str(config), "--run-id", RUN]) == 0
    printed = capsys.readouterr().out
    assert "calibration against the corpus route" in printed and "k is capped" in printed
    print(printed[printed.index("calibration"):])  # the numbers, for the record (-s)
    again = tables.read("candidates").where(F.col("run_id") == RUN).toPandas().set_index("sample_id").sort_index()
    assert len(again) == len(cands)
    pd.testing.assert_frame_equal(again[list(SCORES)], cands[list(SCORES)], rtol=1e-6)

    result = tables.read("rank_calibration").where(F.col("run_id") == RUN).toPandas() \
        .set_index(["score", "k_requested"])
    n_ranked = int(cands["is_representative"].sum())
    n_pos = 7  # six rare passages + the embedded stretch; the near-copies are not ranked
    for name in SCORES:
        row10, row100 = result.loc[(name, 10)], result.loc[(name, 100)]
        assert (row10["n_ranked"], row10["n_positive"]) == (n_ranked, n_pos)
        assert row100["k"] == n_ranked  # capped
        assert row100["precision_at_k"] == pytest.approx(n_pos / n_ranked)
        # the six rare passages are always in the top 10; the embedded stretch only
        # stands out to the window score, so whole-sample scores lose some AUC on it
        assert row10["precision_at_k"] >= 0.6 and row10["auc"] >= 12 / 14, name
    assert result.loc[("window_min_log_ppl", 10), "precision_at_k"] == 0.7
    assert result.loc[("window_min_log_ppl", 10), "auc"] == 1.0
