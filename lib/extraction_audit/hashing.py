"""The one n-gram hash, used by the corpus index and by the sample side of matching.

A window ``t[i:i+n]`` hashes to ``fmix64(sum_j (t[i+j]+1) * B^(n-1-j) mod 2^64)``: a
polynomial rolling hash, computed for every window of a whole Arrow batch at once with
two wrapping ``cumsum``s (``B`` is odd, so it has an inverse mod 2^64), then a murmur3
finaliser so the top bits (the bucket) are uniform.  No Python loop touches a token.

``hash_bits < 64`` keeps only the low bits; it exists so tests can force collisions and
prove that verification removes them.  The result is signed int64 (Spark BIGINT).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_MASK64 = (1 << 64) - 1
BASE = 0x9E3779B97F4A7C15 | 1  # odd: invertible mod 2^64


def _inverse_mod_2_64(a: int) -> int:
    return pow(a, -1, 1 << 64)


_BASE_INV = _inverse_mod_2_64(BASE)


@dataclass(frozen=True)
class HashConfig:
    """Which hash: the window length and the kept precision.  Stored with the index."""

    n: int = 50
    bits: int = 64

    def __post_init__(self) -> None:
        if not 2 <= self.n <= 2048:
            raise ValueError(f"n must be in [2, 2048], got {self.n}")
        if not 8 <= self.bits <= 64:
            raise ValueError(f"hash bits must be in [8, 64], got {self.bits}")


def _fmix64(h: np.ndarray) -> np.ndarray:
    h = h.copy()
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


def _powers(base: int, count: int) -> np.ndarray:
    p = np.full(count, np.uint64(base), dtype=np.uint64)
    p[0] = 1
    with np.errstate(over="ignore"):
        return np.cumprod(p, dtype=np.uint64)


def window_starts(lengths: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For sequences of the given lengths laid end to end, the (sequence index, offset)
    of every full window.  Sequences shorter than ``n`` contribute nothing."""
    lengths = np.asarray(lengths, dtype=np.int64)
    counts = np.maximum(lengths - n + 1, 0)
    seq = np.repeat(np.arange(len(lengths), dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(first, counts)
    return seq, offsets


def hash_concatenated(tokens: np.ndarray, lengths: np.ndarray, cfg: HashConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hash every window of every sequence in a concatenated token array.

    Returns ``(hashes int64, sequence index, offset in sequence)``, one entry per window,
    windows never crossing a sequence boundary.
    """
    n = cfg.n
    tokens = np.asarray(tokens)
    lengths = np.asarray(lengths, dtype=np.int64)
    seq, offsets = window_starts(lengths, n)
    if len(seq) == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    total = len(tokens)
    starts = (np.cumsum(lengths) - lengths)[seq] + offsets
    t = tokens.astype(np.uint64) + np.uint64(1)
    inv_pow = _powers(_BASE_INV, total + 1)
    with np.errstate(over="ignore"):
        q = np.zeros(total + 1, dtype=np.uint64)
        np.cumsum(t * inv_pow[:total], dtype=np.uint64, out=q[1:])
        pow_ = _powers(BASE, total + n)
        raw = (q[starts + n] - q[starts]) * pow_[starts + n - 1]
    h = _fmix64(raw)
    if cfg.bits < 64:
        h &= np.uint64((1 << cfg.bits) - 1)
    return h.view(np.int64), seq, offsets


def hash_windows(tokens: np.ndarray, cfg: HashConfig) -> np.ndarray:
    """Hashes of every window of one sequence (a convenience for the driver and tests)."""
    h, _, _ = hash_concatenated(np.asarray(tokens), np.array([len(tokens)]), cfg)
    return h


def hash_window_reference(window: list[int] | np.ndarray, cfg: HashConfig) -> int:
    """Straightforward per-token definition of the hash; tests check the fast path against it."""
    acc = 0
    for tok in window:
        acc = (acc * BASE + int(tok) + 1) & _MASK64
    h = _fmix64(np.array([acc], dtype=np.uint64))
    if cfg.bits < 64:
        h &= np.uint64((1 << cfg.bits) - 1)
    return int(h.view(np.int64)[0])


#: How a hash picks its bucket.  ``low``: its low ``bucket_bits`` bits.  ``top``: its top bits,
#: as indexes of layout ``anchors`` did; an anchor is the minimum hash of its window, so
#: its top bits are far from uniform (one 20 M-token index: 357 of 1,024 buckets used, the
#: largest 16x the mean), while its low bits are (all used, the largest 1.10x the mean).
BUCKET_SCHEMES = ("low", "top")


def bucket_of(hashes: np.ndarray, bucket_bits: int, scheme: str = "low") -> np.ndarray:
    """Bucket of each hash: the partition of the index and the unit of the match's join."""
    if bucket_bits == 0:
        return np.zeros(len(hashes), dtype=np.int32)
    unsigned = np.asarray(hashes).view(np.uint64)
    if scheme == "low":
        return (unsigned & np.uint64((1 << bucket_bits) - 1)).astype(np.int32)
    if scheme == "top":
        return (unsigned >> np.uint64(64 - bucket_bits)).astype(np.int32)
    raise ValueError(f"bucket scheme {scheme!r} is not one of {BUCKET_SCHEMES}")
