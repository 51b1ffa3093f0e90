"""Membership scores of the corpus-free route: exact formulas and the batch kernels.

Reads and writes no table: these are pure torch / numpy functions, so each score can be
tested against a direct computation without Spark (``candidates.py`` runs them inside
``mapInPandas``).

Notation.  A sample's generated token ids are ``g[0..L)`` exactly as generated (never
decoded and re-encoded); its context ``c`` is its prompt token ids, or the tokenizer's
bos token alone when the prompt is empty.  ``lp_M[j] = log P_M(g[j] | c, g[0..j))`` is the
natural-log probability model ``M`` gives generated token ``j``.  Prompt tokens are
conditioned on but never scored.  When ``c + g`` is longer than the model's context, the
oldest prompt tokens are dropped first, then the generated tail beyond the context
(``n_scored_tokens`` in ``candidates`` then says how many tokens were scored).

Scores (rank 1 = most likely memorised; "asc" = lower value ranks first):

* ``target_log_ppl``     = -(1/L) sum_j lp_target[j]   (mean NLL in nats; asc)
* ``reference_ratio``    = target_log_ppl / reference_log_ppl, with ``reference_log_ppl``
  the same mean NLL under the reference model (``model.reference_path``) on the same ids
  (or, with ``rank.reference_tokenizer`` set, on the prompt and text re-tokenized by it);
  asc: the target finds the text far more likely than the reference does.
* ``zlib_ratio``         = target_log_ppl / zlib_entropy, where
  ``zlib_entropy = len(zlib.compress(text.encode("utf-8")))`` in bytes at zlib's default
  level, ``text`` the decoded generated text (prompt excluded) - the zlib entropy of
  Carlini et al. 2021 (who rank by its inverse, zlib / log-ppl, descending; same order); asc.
* ``lowercase_ratio``    = target_log_ppl / lowercase_log_ppl, with ``lowercase_log_ppl`` the
  target's mean NLL of ``text.lower()`` re-tokenized (the one score that must re-tokenize),
  conditioned on the same context; asc: the exact casing is far more likely than the
  lower-cased text (Carlini et al. rank lower/target descending; same order).
* ``window_min_log_ppl`` = min over i of -(1/w) sum_{j=i}^{i+w-1} lp_target[j], stride 1,
  ``w = rank.window``; when L <= w there is one window, the whole sample, so the score
  equals ``target_log_ppl`` and ``window_is_whole_sample`` is true; asc.
* ``min_k_prob``         = (1/m) sum of the m smallest lp_target[j], m = max(1,
  floor(L * rank.min_k_percent / 100)) (Min-K% Prob, Shi et al. 2024); desc: even the
  least likely tokens are likely.

A score that cannot be computed (no tokens, a ratio with a zero denominator) is NULL and
gets no rank.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class ScoreSpec:
    """One membership score: its ``candidates`` column, rank column and direction."""

    name: str
    ascending: bool  # True: a lower value ranks first (is more suspicious)
    needs: frozenset[str]  # extra forward passes: "reference", "lowercase"
    formula: str

    @property
    def rank_column(self) -> str:
        return f"rank_{self.name}"


SCORES: dict[str, ScoreSpec] = {s.name: s for s in (
    ScoreSpec("target_log_ppl", True, frozenset(), "mean NLL of the generated tokens under the target"),
    ScoreSpec("reference_ratio", True, frozenset({"reference"}), "target_log_ppl / reference_log_ppl"),
    ScoreSpec("zlib_ratio", True, frozenset(), "target_log_ppl / len(zlib.compress(text utf-8))"),
    ScoreSpec("lowercase_ratio", True, frozenset({"lowercase"}), "target_log_ppl / lowercase_log_ppl"),
    ScoreSpec("window_min_log_ppl", True, frozenset(), "min mean NLL over windows of rank.window tokens"),
    ScoreSpec("min_k_prob", False, frozenset(), "mean log-prob of the k% least likely generated tokens"),
)}


# -- forward passes --------------------------------------------------------------

def fit_to_context(context: np.ndarray, target: np.ndarray, max_length: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Trim to the model's context: drop the oldest context tokens first (keeping at least
    one), then the generated tail."""
    if max_length is None or len(context) + len(target) <= max_length:
        return context, target
    target = target[: max_length - 1]
    keep = max(1, max_length - len(target))
    return context[-keep:], target


def token_logprobs(model, contexts: Sequence[np.ndarray], targets: Sequence[np.ndarray], *,
                   batch_size: int, max_length: int | None = None, pad_id: int = 0) -> list[np.ndarray]:
    """``log P(target[j] | context, target[:j])`` for every target token of every sequence.

    Sequences are sorted by length and run ``batch_size`` at a time, right-padded with an
    attention mask (padding after the last real token cannot change causal logits).  Every
    context must hold at least one token.  Returns float64 arrays, one per input, shorter
    than the target only when ``fit_to_context`` had to drop its tail.
    """
    import torch

    device = next(model.parameters()).device
    pairs = [fit_to_context(np.asarray(c, dtype=np.int64), np.asarray(t, dtype=np.int64), max_length)
             for c, t in zip(contexts, targets)]
    if any(len(c) == 0 for c, _ in pairs):
        raise ValueError("every sequence needs at least one context token (the prompt or bos)")
    out: list[np.ndarray] = [np.empty(0)] * len(pairs)
    order = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i][0]) + len(pairs[i][1])))
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        lengths = [len(pairs[i][0]) + len(pairs[i][1]) for i in chunk]
        width = max(lengths)
        ids = np.full((len(chunk), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(chunk), width), dtype=np.int64)
        for row, i in enumerate(chunk):
            ids[row, : lengths[row]] = np.concatenate(pairs[i])
            mask[row, : lengths[row]] = 1
        input_ids = torch.from_numpy(ids).to(device)
        with torch.inference_mode():
            logits = model(input_ids=input_ids, attention_mask=torch.from_numpy(mask).to(device)).logits.float()
            # log_softmax at the next token without a second (batch, seq, vocab) tensor
            nxt = input_ids[:, 1:].unsqueeze(-1)
            lp = (logits[:, :-1].gather(-1, nxt).squeeze(-1) - torch.logsumexp(logits[:, :-1], dim=-1))
        lp = lp.double().cpu().numpy()
        for row, i in enumerate(chunk):
            n_ctx, n_tgt = len(pairs[i][0]), len(pairs[i][1])
            out[i] = lp[row, n_ctx - 1: n_ctx - 1 + n_tgt]
    return out


# -- per-sample statistics of token log-probs ---------------------------------------

def mean_nll(lp: np.ndarray) -> float:
    return float(-np.mean(lp)) if len(lp) else math.nan


def window_min_mean_nll(lp: np.ndarray, window: int) -> float:
    """Smallest mean NLL over all windows of ``window`` tokens (stride 1); the whole
    sample when it is not longer than the window."""
    if len(lp) == 0:
        return math.nan
    if len(lp) <= window:
        return mean_nll(lp)
    csum = np.concatenate(([0.0], np.cumsum(lp, dtype=np.float64)))
    window_sums = csum[window:] - csum[:-window]
    return float(-window_sums.max() / window)


def min_k_mean_logprob(lp: np.ndarray, percent: float) -> float:
    """Mean of the ``max(1, floor(L * percent / 100))`` smallest token log-probs."""
    if len(lp) == 0:
        return math.nan
    m = max(1, int(len(lp) * percent / 100.0))
    return float(np.partition(lp, m - 1)[:m].mean())


def zlib_entropy(text: str) -> int:
    """Bytes of ``zlib.compress`` (default level) of the UTF-8 text."""
    return len(zlib.compress(text.encode("utf-8")))


def safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where either side is missing or the denominator is zero."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(num.shape, np.nan)
    ok = np.isfinite(num) & np.isfinite(den) & (den != 0)
    out[ok] = num[ok] / den[ok]
    return out


def combine_scores(target_lp: Sequence[np.ndarray], texts: Sequence[str], *, window: int, min_k_percent: float,
                   reference_lp: Sequence[np.ndarray] | None = None,
                   lowercase_lp: Sequence[np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Every score column (and its ingredients) from per-token log-probs, one value per sample.

    ``reference_lp`` / ``lowercase_lp`` may be None when their scores are not requested;
    those columns are then all NaN."""
    n = len(target_lp)
    nan = np.full(n, np.nan)
    target = np.array([mean_nll(x) for x in target_lp], dtype=np.float64)
    reference = np.array([mean_nll(x) for x in reference_lp], dtype=np.float64) if reference_lp is not None else nan
    lowercase = np.array([mean_nll(x) for x in lowercase_lp], dtype=np.float64) if lowercase_lp is not None else nan
    zlib_bytes = np.array([zlib_entropy(t) for t in texts], dtype=np.int64)
    lengths = np.array([len(x) for x in target_lp], dtype=np.int64)
    return {
        "target_log_ppl": target,
        "reference_log_ppl": reference,
        "lowercase_log_ppl": lowercase,
        "zlib_entropy": zlib_bytes,
        "reference_ratio": safe_ratio(target, reference),
        "zlib_ratio": safe_ratio(target, zlib_bytes),
        "lowercase_ratio": safe_ratio(target, lowercase),
        "window_min_log_ppl": np.array([window_min_mean_nll(x, window) for x in target_lp], dtype=np.float64),
        "min_k_prob": np.array([min_k_mean_logprob(x, min_k_percent) for x in target_lp], dtype=np.float64),
        "n_scored_tokens": lengths.astype(np.int32),
        "window_is_whole_sample": lengths <= window,
    }
