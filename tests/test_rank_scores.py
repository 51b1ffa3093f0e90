"""Membership score kernels against direct computations (no Spark)."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd
import pytest

from extraction_audit.rank.scores import (
    SCORES, combine_scores, fit_to_context, mean_nll, min_k_mean_logprob, safe_ratio, token_logprobs,
    window_min_mean_nll, zlib_entropy,
)

TEXTS = [
    "The Quick Brown Fox jumps over the Lazy Dog near Kestrel Bay.",
    "ACCOUNT NUMBER 12345678, Sort Code 20-00-00, please call Mr Whitlock.",
    "lower case text stays the same when lowered.",
    "Mixed CASE, punctuation!! and   spaces\nacross lines.",
]


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """A randomly initialised tiny GPT-2 and a byte-level BPE tokenizer saved together."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from extraction_audit.synthetic import EOT, train_tokenizer

    path = tmp_path_factory.mktemp("tiny-lm")
    tok = train_tokenizer(TEXTS * 3, vocab_size=300)
    eos = tok.convert_tokens_to_ids(EOT)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=2, n_head=2,
                                       bos_token_id=eos, eos_token_id=eos)).eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path, model, tok


def direct_logprobs(model, context, target) -> np.ndarray:
    """One unpadded forward pass per sequence, full log-softmax: the textbook definition."""
    import torch

    ids = torch.tensor([list(context) + list(target)])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), dim=-1)
    return np.array([logp[len(context) - 1 + j, t].item() for j, t in enumerate(target)])


def test_batched_padded_logprobs_equal_unbatched(tiny_lm):
    _, model, tok = tiny_lm
    rng = np.random.default_rng(1)
    vocab = len(tok)
    contexts = [rng.integers(0, vocab, n) for n in (1, 3, 7, 2, 1)]
    targets = [rng.integers(0, vocab, n) for n in (5, 1, 12, 30, 17)]
    got = token_logprobs(model, contexts, targets, batch_size=3)
    for c, t, lp in zip(contexts, targets, got):
        np.testing.assert_allclose(lp, direct_logprobs(model, c, t), atol=2e-5)


def test_context_overflow_drops_oldest_prompt_tokens_then_the_tail(tiny_lm):
    _, model, _ = tiny_lm
    c, t = np.arange(10), np.arange(100, 120)
    np.testing.assert_array_equal(fit_to_context(c, t, 25)[0], np.arange(5, 10))
    c2, t2 = fit_to_context(c, np.arange(100, 140), 25)
    assert len(c2) == 1 and c2[0] == 9 and len(t2) == 24
    long_target = np.arange(3, 83)  # 80 tokens > 64 positions
    lp = token_logprobs(model, [np.array([1, 2])], [long_target], batch_size=2, max_length=64)[0]
    assert len(lp) == 63
    np.testing.assert_allclose(lp, direct_logprobs(model, [2], long_target[:63]), atol=2e-5)


def test_window_minimum_matches_brute_force_and_finds_a_memorised_sub_window():
    rng = np.random.default_rng(2)
    lp = rng.normal(-5.0, 1.0, size=200)
    lp[120:150] = rng.normal(-0.05, 0.01, size=30)  # a memorised stretch inside ordinary text
    for w in (2, 7, 30, 50, 199, 200):
        brute = min(-np.mean(lp[i:i + w]) for i in range(len(lp) - w + 1))
        assert window_min_mean_nll(lp, w) == pytest.approx(brute, rel=1e-12)
    assert window_min_mean_nll(lp, 30) == pytest.approx(-np.mean(lp[120:150]))
    assert window_min_mean_nll(lp, 30) < 0.1 < 3.0 < mean_nll(lp)
    # shorter than (or equal to) the window: the whole sample, flagged
    assert window_min_mean_nll(lp[:40], 50) == pytest.approx(mean_nll(lp[:40]))
    cols = combine_scores([lp, lp[:40]], ["a", "b"], window=50, min_k_percent=20)
    assert cols["window_is_whole_sample"].tolist() == [False, True]
    assert math.isnan(window_min_mean_nll(np.array([]), 5))


@pytest.mark.parametrize("percent", [1, 10, 20, 50, 100])
def test_min_k_prob_is_the_mean_of_the_lowest_k_percent(percent):
    lp = np.random.default_rng(3).normal(-3, 2, size=37)
    m = max(1, math.floor(37 * percent / 100))
    assert min_k_mean_logprob(lp, percent) == pytest.approx(np.mean(sorted(lp)[:m]))


def test_ratios_are_nan_without_a_usable_denominator():
    out = safe_ratio(np.array([1.0, 2.0, np.nan, 3.0]), np.array([2.0, 0.0, 1.0, np.nan]))
    assert out[0] == 0.5 and np.isnan(out[1:]).all()


def test_directions():
    assert [n for n, s in SCORES.items() if not s.ascending] == ["min_k_prob"]
    assert SCORES["window_min_log_ppl"].rank_column == "rank_window_min_log_ppl"


def test_zlib_and_lowercase_scores_match_a_direct_computation(tiny_lm):
    from extraction_audit.rank.candidates import ScoringSettings, score_batch

    path, model, tok = tiny_lm
    bos = tok.bos_token_id
    generated = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    prompts = [[], tok("Note:", add_special_tokens=False)["input_ids"], [], [5, 6]]
    pdf = pd.DataFrame({"sample_id": range(len(TEXTS)), "prompt_token_ids": prompts, "token_ids": generated,
                        "prompt_text": ["", "Note:", "", None], "text": TEXTS})
    settings = ScoringSettings(
        scores=tuple(SCORES), target_path=str(path), tokenizer_path=str(path), target_max_length=64,
        bos_token_id=bos, reference_path=str(path), reference_max_length=64, reference_tokenizer_path=None,
        reference_bos_token_id=bos, device="cpu", dtype="float32", batch_size=2, window=8, min_k_percent=20)
    out = score_batch(pdf, settings)
    for i, text in enumerate(TEXTS):
        ctx = prompts[i] or [bos]
        target = direct_logprobs(model, ctx, generated[i])
        lowered = direct_logprobs(model, ctx, tok(text.lower(), add_special_tokens=False)["input_ids"])
        log_ppl = -target.mean()
        row = out.iloc[i]
        assert row["zlib_entropy"] == len(zlib.compress(text.encode("utf-8"))) == zlib_entropy(text)
        assert row["target_log_ppl"] == pytest.approx(log_ppl, rel=1e-5)
        assert row["zlib_ratio"] == pytest.approx(log_ppl / len(zlib.compress(text.encode("utf-8"))), rel=1e-5)
        assert row["lowercase_log_ppl"] == pytest.approx(-lowered.mean(), rel=1e-5)
        assert row["lowercase_ratio"] == pytest.approx(log_ppl / -lowered.mean(), rel=1e-5)
        assert row["reference_ratio"] == pytest.approx(1.0, rel=1e-6)  # same model as reference
        brute = min(-target[j:j + 8].mean() for j in range(max(1, len(target) - 7)))
        assert row["window_min_log_ppl"] == pytest.approx(brute, rel=1e-5)
    # the already-lower-case text re-tokenizes to itself: ratio exactly 1
    assert out.iloc[2]["lowercase_ratio"] == pytest.approx(1.0, rel=1e-6)
    # a score left out of rank.scores is not computed
    partial = score_batch(pdf, settings.__class__(**{**settings.__dict__, "scores": ("target_log_ppl",)}))
    assert partial["lowercase_ratio"].isna().all() and partial["reference_ratio"].isna().all()
    assert partial["target_log_ppl"].tolist() == pytest.approx(out["target_log_ppl"].tolist())
    # rank.reference_tokenizer set: the reference scores prompt_text + text re-tokenized by it
    retok = score_batch(pdf, settings.__class__(**{**settings.__dict__, "reference_tokenizer_path": str(path)}))
    np.testing.assert_allclose(retok["reference_ratio"][:3], 1.0, rtol=1e-6)  # same text, same ids
    ctx3 = [bos]  # prompt_text missing: the reference is conditioned on bos alone
    ref3 = direct_logprobs(model, ctx3, tok(TEXTS[3], add_special_tokens=False)["input_ids"])
    assert retok["reference_log_ppl"][3] == pytest.approx(-ref3.mean(), rel=1e-5)
