"""Winnowing anchors against their definition, and the guarantee the index rests on."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extraction_audit.anchors import AnchorConfig, default_k, select_anchors, window_anchors
from extraction_audit.hashing import HashConfig, hash_window_reference


def reference_window_anchor(toks: list[int], i: int, cfg: AnchorConfig) -> tuple[int, int]:
    """The definition, one window at a time: leftmost minimum k-gram hash of toks[i:i+n]."""
    kh = HashConfig(n=cfg.k, bits=cfg.bits)
    hashes = [hash_window_reference(toks[i + r:i + r + cfg.k], kh) for r in range(cfg.w)]
    r = min(range(cfg.w), key=lambda j: (hashes[j], j))
    return hashes[r], r


def concat(seqs):
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    tokens = np.concatenate([np.asarray(s, dtype=np.int64) for s in seqs]) if seqs else np.empty(0, np.int64)
    return tokens, lengths


@settings(max_examples=60, deadline=None)
@given(seqs=st.lists(st.lists(st.integers(0, 5), max_size=30), min_size=1, max_size=6),
       n=st.integers(2, 9), data=st.data())
def test_batch_selection_equals_one_window_at_a_time(seqs, n, data):
    k = data.draw(st.integers(2, n), label="k")
    cfg = AnchorConfig(n=n, k=k, bits=data.draw(st.sampled_from([64, 8]), label="bits"))
    seq, pos, h, rel = window_anchors(*concat(seqs), cfg)
    expected = [(s, i, *reference_window_anchor(t, i, cfg)) for s, t in enumerate(seqs)
                for i in range(len(t) - n + 1)]
    assert list(zip(seq.tolist(), pos.tolist(), h.tolist(), rel.tolist())) == expected
    picked = select_anchors(*concat(seqs), cfg)
    want = sorted({(s, i + r, hh) for s, i, hh, r in expected})
    assert list(zip(*(a.tolist() for a in picked))) == want


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_shared_run_of_n_tokens_shares_an_anchor_on_its_diagonal(data):
    n = data.draw(st.integers(3, 12), label="n")
    cfg = AnchorConfig(n=n, k=data.draw(st.integers(2, n), label="k"))
    vocab = data.draw(st.integers(2, 8), label="vocab")
    shared = data.draw(st.lists(st.integers(0, vocab - 1), min_size=n, max_size=3 * n), label="shared")
    left = data.draw(st.lists(st.integers(0, vocab - 1), max_size=10), label="left")
    right = data.draw(st.lists(st.integers(0, vocab - 1), max_size=10), label="right")
    before = data.draw(st.lists(st.integers(0, vocab - 1), max_size=10), label="before")
    sample, doc = left + shared, before + shared + right
    s_seq, s_pos, s_hash, s_rel = window_anchors(*concat([sample]), cfg)
    stored = set(zip(*(a.tolist() for a in select_anchors(*concat([doc]), cfg)[1:])))
    diag = len(left) - len(before)
    for i in range(len(left), len(left) + len(shared) - n + 1):
        where = np.flatnonzero(s_pos == i)[0]
        anchor_in_doc = int(s_pos[where] + s_rel[where]) - diag
        assert (anchor_in_doc, int(s_hash[where])) in stored


def test_density_on_unique_text_is_about_two_over_w_plus_one():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 50_000, size=400_000)
    cfg = AnchorConfig(n=50, k=default_k(50))
    _, offsets, _ = select_anchors(tokens, np.array([len(tokens)]), cfg)
    assert cfg.k == 20 and cfg.w == 31
    assert len(offsets) / len(tokens) == pytest.approx(2 / (cfg.w + 1), rel=0.05)


def test_short_sequences_and_bad_settings():
    cfg = AnchorConfig(n=5, k=3)
    seq, pos, _, _ = window_anchors(*concat([[1, 2, 3, 4], [], [1, 2, 3, 4, 5]]), cfg)
    assert seq.tolist() == [2] and pos.tolist() == [0]
    assert all(len(a) == 0 for a in select_anchors(*concat([[1, 2, 3]]), cfg))
    assert [default_k(n) for n in (2, 3, 4, 20, 50, 200)] == [2, 2, 2, 10, 20, 20]
    with pytest.raises(ValueError, match="k-gram length"):
        AnchorConfig(n=5, k=6)


def test_low_hash_bits_spread_anchors_evenly_over_buckets_and_top_bits_do_not():
    """An anchor is the minimum hash of its window, so the top bits of anchor hashes crowd
    into a few buckets; their low bits are uniform.  The index buckets by the low bits."""
    from extraction_audit.hashing import bucket_of

    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 50_000, size=400_000)
    _, _, hashes = select_anchors(tokens, np.array([len(tokens)]), AnchorConfig(n=50, k=20))
    bits = 6
    low = np.bincount(bucket_of(hashes, bits, "low"), minlength=1 << bits)
    top = np.bincount(bucket_of(hashes, bits, "top"), minlength=1 << bits)
    assert len(hashes) > 20_000
    assert (low > 0).all() and low.max() / low.mean() < 1.3
    assert (top > 0).sum() < (1 << bits) // 2 and top.max() / top.mean() > 4
    assert (bucket_of(hashes, 0) == 0).all()
    with pytest.raises(ValueError):
        bucket_of(hashes, bits, "middle")
