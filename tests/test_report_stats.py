"""Report statistics without Spark: bootstrap over samples, the richness extrapolation on
simulated populations with a known number of passages, and crossing detection."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from extraction_audit.report.bootstrap import (PERCENTILE_METHOD, SE_METHOD, SampleSummaries, difference,
                                               interval)
from extraction_audit.report.curves import describe_comparison, find_crossings, log_interpolated_crossing
from extraction_audit.report.extrapolation import estimate_richness, expected_distinct, extrapolation_curve


def _summary_frame(rng, n_samples: int, n_passages: int, emit_p: float, tokens: int = 100) -> pd.DataFrame:
    """Samples that each emit every passage with probability emit_p (15 tokens each)."""
    emits = rng.random((n_samples, n_passages)) < emit_p
    keys = np.arange(n_passages, dtype=np.int64) * 7919 + 11
    rows = []
    for i in range(n_samples):
        ks = keys[emits[i]].tolist()
        rows.append({"sample_id": 1000 - i, "n_tokens": tokens, "extracted_tokens": 15 * len(ks),
                     "passage_keys": ks, "rare_passage_keys": [k for k in ks if k % 2],
                     "pii_keys": [], "pii_in_corpus_keys": []})
    return pd.DataFrame(rows)


def test_point_statistics_equal_direct_counts():
    rng = np.random.default_rng(0)
    frame = _summary_frame(rng, 50, 30, 0.05)
    s = SampleSummaries(frame)
    point = s.point()
    all_keys = {k for ks in frame["passage_keys"] for k in ks}
    assert point["distinct_passages"] == len(all_keys)
    assert point["distinct_rare_passages"] == len({k for k in all_keys if k % 2})
    assert point["share_extracted"] == pytest.approx(frame["extracted_tokens"].sum() / frame["n_tokens"].sum())
    # sample_id order: the frame was written in descending ids, prefixes follow ascending ids
    first10 = frame.sort_values("sample_id").head(10)
    assert s.point(10)["distinct_passages"] == len({k for ks in first10["passage_keys"] for k in ks})
    assert s.prefix_length(10, 1000) == 10
    assert s.prefix_length(10, 999) is None          # checkpoint cut some other way
    assert s.prefix_length(51, 5100) is None


def test_resampled_distinct_counts_never_exceed_observed_and_intervals_are_centred():
    rng = np.random.default_rng(1)
    s = SampleSummaries(_summary_frame(rng, 80, 40, 0.03))
    point = s.point()
    reps = s.replicates(200, seed=3)
    assert (reps["distinct_passages"] <= point["distinct_passages"]).all()
    est = interval("distinct_passages", point["distinct_passages"], reps["distinct_passages"], 0.95)
    assert est.method == SE_METHOD
    assert est.low < point["distinct_passages"] < est.high
    assert est.value - est.low == pytest.approx(est.high - est.value)
    share = interval("share_extracted", point["share_extracted"], reps["share_extracted"], 0.95)
    assert share.method == PERCENTILE_METHOD and share.low <= point["share_extracted"] <= share.high
    # same seed, same replicates
    assert np.array_equal(s.replicates(20, seed=3)["share_extracted"], s.replicates(20, seed=3)["share_extracted"])


def test_share_interval_covers_the_generating_rate_most_of_the_time():
    rng = np.random.default_rng(2)
    p = 0.04
    truth = 15 * 30 * p / 100       # expected share: 30 passages x p x 15 tokens per 100 tokens
    covered = 0
    trials = 150
    for trial in range(trials):
        s = SampleSummaries(_summary_frame(rng, 100, 30, p))
        point = s.point()
        est = interval("share_extracted", point["share_extracted"], s.replicates(200, seed=trial)["share_extracted"],
                       0.9)
        covered += est.low <= truth <= est.high
    assert covered >= 0.8 * trials  # nominal 90%; percentile intervals run a little short at n = 100


def test_difference_interval_of_independent_runs():
    rng = np.random.default_rng(4)
    a = SampleSummaries(_summary_frame(rng, 100, 30, 0.08))
    b = SampleSummaries(_summary_frame(rng, 100, 30, 0.02))
    pa, pb = a.point(), b.point()
    ra, rb = a.replicates(200, 1), b.replicates(200, 2)
    d = difference("share_extracted", pa["share_extracted"], ra["share_extracted"], pb["share_extracted"],
                   rb["share_extracted"], 0.95)
    assert d.value == pytest.approx(pa["share_extracted"] - pb["share_extracted"])
    assert 0 < d.low < d.value < d.high     # a clearly leaks more


# ---------------------------------------------------------------------------------------
# Extrapolation on simulated populations with a known number of passages
# ---------------------------------------------------------------------------------------

def _simulate(rng, n_passages: int, n_samples: int, median_p: float, sigma: float):
    """Each passage has its own emission probability (log-normal around median_p); each
    sample emits it independently.  Returns the samples x passages emission matrix."""
    p = np.clip(np.exp(rng.normal(np.log(median_p), sigma, n_passages)), 0, 1)
    return rng.random((n_samples, n_passages)) < p


def _frequency_counts(emits: np.ndarray) -> dict[int, int]:
    per_passage = emits.sum(axis=0)
    k, v = np.unique(per_passage[per_passage > 0], return_counts=True)
    return dict(zip(k.tolist(), v.tolist()))


def test_richness_estimate_recovers_a_known_population():
    rng = np.random.default_rng(20240601)
    n_passages, n_samples, trials = 2000, 500, 40
    inside, ratios, observed = 0, [], []
    for _ in range(trials):
        emits = _simulate(rng, n_passages, n_samples, 0.003, 0.5)
        est = estimate_richness(_frequency_counts(emits), n_samples, 0.95)
        assert est.observed <= est.low <= est.estimate <= est.high
        inside += est.low <= n_passages <= est.high
        ratios.append(est.estimate / n_passages)
        observed.append(est.observed / n_passages)
    assert np.mean(observed) < 0.8                     # a quarter of the population was never seen...
    assert abs(np.mean(ratios) - 1) < 0.03             # ...yet the estimate is right on average
    assert inside >= 0.8 * trials                      # and the band holds the truth most of the time


def test_richness_estimate_homogeneous_population_and_edge_cases():
    rng = np.random.default_rng(7)
    inside = 0
    for _ in range(40):
        est = estimate_richness(_frequency_counts(_simulate(rng, 500, 300, 0.004, 0.0)), 300)
        inside += est.low <= 500 <= est.high
    assert inside >= 34
    # nothing seen only once: no unseen mass, the estimate is what was seen
    flat = estimate_richness({3: 10, 5: 4}, 100)
    assert flat.estimate == flat.low == flat.high == 14 and flat.coverage == 1.0
    # no doubletons: bias-corrected form, still finite
    bc = estimate_richness({1: 5}, 50)
    assert bc.variant == "bias-corrected" and bc.estimate > 5 and np.isfinite(bc.high)
    empty = estimate_richness({}, 0)
    assert empty.observed == 0 and empty.estimate == 0


def test_extrapolation_predicts_a_doubled_budget():
    rng = np.random.default_rng(11)
    errors = []
    for _ in range(20):
        emits = _simulate(rng, 2000, 1000, 0.003, 0.8)
        first = emits[:500]
        est = estimate_richness(_frequency_counts(first), 500)
        truth_at_double = int(emits.any(axis=0).sum())
        errors.append(expected_distinct(est, 500) / truth_at_double - 1)
        curve = extrapolation_curve(est)
        assert curve[0]["expected"] == est.observed
        assert all(a["expected"] <= b["expected"] for a, b in zip(curve, curve[1:]))
        assert all(r["low"] <= r["expected"] <= r["high"] for r in curve)
    assert abs(np.mean(errors)) < 0.02


# ---------------------------------------------------------------------------------------
# Crossings
# ---------------------------------------------------------------------------------------

def _aligned(budgets, a, b, metric="distinct_passages"):
    return pd.DataFrame({"budget_tokens": budgets, f"{metric}_a": a, f"{metric}_b": b})


def test_find_crossings_between_checkpoints_and_at_ties():
    crossings = find_crossings(_aligned([100, 1000, 10000], [1, 5, 40], [4, 8, 20]), "A", "B", "distinct_passages")
    assert len(crossings) == 1
    c = crossings[0]
    assert (c.budget_before, c.budget_after, c.leader_before, c.leader_after) == (1000, 10000, "B", "A")
    # difference -3 at 1000 and +20 at 10000: zero at t = 3/23 of the way in log space
    assert c.approx_budget == pytest.approx(10 ** (3 + 3 / 23))
    tie = find_crossings(_aligned([100, 1000, 10000], [1, 5, 40], [4, 5, 20]), "A", "B", "distinct_passages")
    assert len(tie) == 1 and tie[0].approx_budget == 1000 and tie[0].budget_before == 100
    assert find_crossings(_aligned([100, 1000], [5, 9], [1, 2]), "A", "B", "distinct_passages") == []
    assert log_interpolated_crossing(10, -1, 1000, 1) == pytest.approx(100)


def test_describe_comparison_mentions_crossing_and_no_common_budget():
    frame = _aligned([100, 1000, 10000], [1, 5, 40], [4, 8, 20])
    frame["distinct_rare_passages_a"] = [0, 1, 2]
    frame["distinct_rare_passages_b"] = [0, 0, 1]
    frame["share_extracted_a"] = [0.01, 0.02, 0.03]
    frame["share_extracted_b"] = [0.001, 0.002, 0.003]
    text = describe_comparison(frame, "A", "B")
    assert "lead changes from B to A between 1,000 and 10,000 tokens" in text[0]
    assert "A leads at every common budget" in text[2]
    empty = describe_comparison(frame.iloc[0:0], "A", "B")
    assert "no budget checkpoint in common" in empty[0]
