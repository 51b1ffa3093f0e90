"""Known-prefix probes: the per-probe scores, classes, rates and recovery share against
direct computations (pure python; the Spark stage is exercised by the demo test)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extraction_audit.config import ConfigError, parse_config
from extraction_audit.probe.kernels import class_labels, doc_count_class, longest_common_run, score, score_frame
from extraction_audit.probe.summary import rates, recovery_share


def _levenshtein(a, b) -> int:
    d = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, y in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (x != y))
    return d[len(b)]


def _longest_brute(a, b) -> int:
    best = 0
    for i in range(len(a)):
        for j in range(len(b)):
            k = 0
            while i + k < len(a) and j + k < len(b) and a[i + k] == b[j + k]:
                k += 1
            best = max(best, k)
    return best


tokens = st.lists(st.integers(0, 4), max_size=14)


@settings(max_examples=150, deadline=None)
@given(tokens, tokens)
def test_scores_equal_a_direct_computation(a, b):
    exact, longest, sim = score(a, b)
    assert exact == (a == b)
    assert longest == _longest_brute(a, b) == longest_common_run(a, b)
    expected = 1.0 if not a and not b else 1 - _levenshtein(a, b) / max(len(a), len(b))
    assert sim == pytest.approx(expected)


def test_small_cases_and_the_approximate_threshold():
    suffix = list(range(10))
    assert score(suffix, suffix) == (True, 10, 1.0)
    one_off = [*suffix[:5], 99, *suffix[6:]]
    assert score(one_off, suffix) == (False, 5, pytest.approx(0.9))   # approximate at >= 0.9
    assert score(suffix[:9], suffix) == (False, 9, pytest.approx(0.9))  # stopped one token early
    assert score([], suffix) == (False, 0, 0.0)
    frame = score_frame(pd.DataFrame({"continuation_ids": [np.array(suffix), np.array(one_off)],
                                      "suffix_token_ids": [np.array(suffix), np.array(suffix)]}))
    assert frame["exact"].tolist() == [True, False] and frame["longest_match"].tolist() == [10, 5]


def test_document_count_classes():
    edges = [1, 2, 10, 100]
    assert class_labels(edges) == ["1", "2-9", "10-99", "100+"]
    assert [doc_count_class(n, edges) for n in (1, 2, 9, 10, 99, 100, 10**6)] == \
        ["1", "2-9", "2-9", "10-99", "10-99", "100+", "100+"]


def test_probe_config_is_validated_with_the_key_named():
    with pytest.raises(ConfigError, match="class_edges"):
        parse_config({"probe": {"class_edges": [2, 10]}})
    with pytest.raises(ConfigError, match="probe.suffix_tokens"):
        parse_config({"probe": {"suffix_tokens": 20}})  # shorter than index.n = 50
    assert "probe" in parse_config({"steps": ["generate", "match", "probe"]}).steps


def _frame(rng, n=60):
    return pd.DataFrame({
        "run_id": "r", "mode": rng.choice(["greedy", "sampled"], n), "source": rng.choice(["a", "b"], n),
        "doc_count_class": rng.choice(["1", "2-9"], n), "exact": rng.random(n) < 0.4,
        "edit_similarity": rng.random(n), "stratum_size": 100,
        "found_at_tokens": np.where(rng.random(n) < 0.5, rng.choice([10, 100, 1000], n), np.nan)})


def test_rates_equal_a_direct_count_and_intervals_contain_them():
    frame = _frame(np.random.default_rng(1))
    out = rates(frame, ["doc_count_class"], 0.9, n_boot=100, seed=3)
    for row in out.to_dict("records"):
        g = frame[(frame["mode"] == row["mode"]) & (frame["doc_count_class"] == row["doc_count_class"])]
        # Equal stratum sizes: the weighted rate is the plain share, per stratum and pooled.
        per_source = g.groupby("source").size()
        w = 100 / g["source"].map(per_source)
        assert row["exact_rate"] == pytest.approx((g["exact"] * w).sum() / w.sum())
        assert row["approx_rate"] == pytest.approx(((g["edit_similarity"] >= 0.9) * w).sum() / w.sum())
        assert row["exact_low"] <= row["exact_rate"] <= row["exact_high"]
    again = rates(frame, ["doc_count_class"], 0.9, n_boot=100, seed=3)
    pd.testing.assert_frame_equal(out, again)  # the bootstrap is seeded


def test_recovery_share_equals_a_direct_count():
    frame = _frame(np.random.default_rng(2), 200)
    out = recovery_share(frame, {"r": [10, 100, 1000]}, n_boot=50)
    reproduced = frame[(frame["mode"] == "greedy") & frame["exact"]]
    for row in out.to_dict("records"):
        found = int((reproduced["found_at_tokens"] <= row["budget_tokens"]).sum())
        assert (row["reproduced"], row["found"]) == (len(reproduced), found)
        assert row["share"] == pytest.approx(found / len(reproduced))
        assert row["share_low"] <= row["share"] <= row["share_high"]
    assert out["found"].is_monotonic_increasing
