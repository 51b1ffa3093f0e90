"""Winnowing anchors: the sampled, content-defined selection the corpus index stores.

Hash every k-gram of a sequence; for every window of ``w = n - k + 1`` consecutive
k-grams (exactly the k-grams inside one n-token window) keep the one with the smallest
hash, the leftmost on ties.  The kept positions are the sequence's *anchors*.

Guarantee (why matching on anchors loses nothing): let ``s[i:i+n] == d[j:j+n]`` be a
verbatim match of n tokens between a sample and a document.  The w k-grams inside the two
windows are identical, in the same order, so their hashes are identical and the leftmost
minimum sits at the same relative position ``r`` in both.  The document's window at ``j``
therefore selected the k-gram at ``j + r`` (it is stored), and the sample's window at
``i`` has its anchor at ``i + r``: one anchor hash in common, on the match's diagonal
``i - j``.  Longer matches contain n-token windows, so the same holds for every window
of them.  Hash collisions only add candidates, which verification removes.

Density: on text without long repeats the selection keeps about ``2 / (w + 1)`` of the
positions (Schleimer, Wilkerson and Aiken, *Winnowing*, 2003), so the index stores one
row per ~16 tokens at n = 50, k = 20 instead of one per token.

Everything here is numpy over whole Arrow batches (sequences laid end to end with their
lengths, as ``hashing.hash_concatenated`` takes them); no Python loop touches a token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hashing import HashConfig, hash_concatenated

# Windows per chunk of the sliding minimum: bounds the (chunk x w) temporary.
_CHUNK = 1 << 16


@dataclass(frozen=True)
class AnchorConfig:
    """Match length ``n``, k-gram length ``k`` (w = n - k + 1) and hash precision."""

    n: int
    k: int
    bits: int = 64

    def __post_init__(self) -> None:
        if not 2 <= self.k <= self.n:
            raise ValueError(f"anchor k-gram length must be in [2, n={self.n}], got {self.k}")

    @property
    def w(self) -> int:
        return self.n - self.k + 1

    @property
    def kgram_hash(self) -> HashConfig:
        return HashConfig(n=self.k, bits=self.bits)


def default_k(n: int) -> int:
    """k = 20 at n = 50 (w = 31, ~1/16 of positions kept); about n/2 for short n, so the
    test corpora (n = 3..20) exercise a real window; never below 2 or above n."""
    return int(max(2, min(20, (n + 1) // 2, n)))


def _window_minima(hashes: np.ndarray, seq: np.ndarray, w: int) -> tuple[np.ndarray, np.ndarray]:
    """For every run of ``w`` consecutive k-grams of one sequence: (index of its first
    k-gram, index of its leftmost minimum), indices into the concatenated k-gram arrays."""
    m = len(hashes)
    if m < w:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty.copy()
    starts = np.flatnonzero(seq[: m - w + 1] == seq[w - 1:])
    if w == 1:
        return starts, starts.copy()
    view = np.lib.stride_tricks.sliding_window_view(hashes, w)
    best = np.empty(len(starts), dtype=np.int64)
    for lo in range(0, len(starts), _CHUNK):
        chunk = starts[lo:lo + _CHUNK]
        best[lo:lo + len(chunk)] = chunk + np.argmin(view[chunk], axis=1)
    return starts, best


def window_anchors(tokens: np.ndarray, lengths: np.ndarray, cfg: AnchorConfig):
    """The anchor of every n-token window (the sample side of matching).

    Returns ``(seq, pos, anchor_hash, anchor_rel)``: for the window starting at ``pos`` of
    sequence ``seq``, its anchor k-gram's hash and its offset inside the window."""
    hashes, seq, offsets = hash_concatenated(tokens, lengths, cfg.kgram_hash)
    starts, best = _window_minima(hashes, seq, cfg.w)
    return seq[starts], offsets[starts], hashes[best], (offsets[best] - offsets[starts]).astype(np.int32)


def select_anchors(tokens: np.ndarray, lengths: np.ndarray, cfg: AnchorConfig):
    """The distinct anchor positions of every sequence (the corpus side).

    Returns ``(seq, offset, anchor_hash)`` sorted by (seq, offset).  A sequence shorter
    than n has no window and so no anchor: it can never hold an n-token match."""
    hashes, seq, offsets = hash_concatenated(tokens, lengths, cfg.kgram_hash)
    _, best = _window_minima(hashes, seq, cfg.w)
    if len(best) == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    # Consecutive windows usually share their minimum: keep each selected k-gram once.
    keep = np.concatenate([[True], best[1:] != best[:-1]])
    picked = np.unique(best[keep])
    return seq[picked], offsets[picked], hashes[picked]
