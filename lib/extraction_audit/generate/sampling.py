"""Seeded sampling with the deployed settings, reproducible per sample.

Why not ``model.generate(do_sample=True)``: it draws from torch's global RNG, so a
sample's tokens depend on which other samples shared its batch and in which order.  A
rerun after a crash (or any re-generation of one sample) would then produce different
text.  Instead we run Hugging Face ``generate`` *greedily* with one logits processor,
``SeededSampler``, that

1. applies the deployed settings in the usual Hugging Face order: repetition penalty
   (over the row's own prompt and generated tokens, never its left padding), the
   temperature (with the optional decaying schedule), top-k, top-p, typical-p;
2. samples one token per row with the Gumbel-max trick,
   ``argmax(scores + Gumbel noise)``, which draws exactly from ``softmax(scores)``, using
   counter-based noise: a 32-bit integer hash of (sample seed, step, token id), computed
   vectorised in int64 torch arithmetic that is exact on CPU and GPU;
3. returns scores that are 0 for the chosen token and -inf elsewhere, so the greedy
   ``argmax`` inside ``generate`` picks it.

The noise depends only on the sample's seed, the generated-token step and the token
id, so a sample is the same whatever batch it runs in (up to floating-point noise in
the model's logits, which very rarely flips a draw).

The temperature schedule (classic: 10 falling linearly to 1 over the first 20 generated
tokens) divides the logits by ``temperature_at(step)``; after the window it is exactly
the constant-temperature processor.  Reads and writes no tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import LogitsProcessor
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper, TypicalLogitsWarper

from ..config import SamplingConfig

_MASK32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``(x * c) mod 2**32`` for ``x`` in [0, 2**32) without int64 overflow.

    Splitting ``c`` into 16-bit halves keeps every product below 2**49, so the result is
    exact on every device (signed 64-bit overflow is never relied on)."""
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & _MASK32


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """``lowbias32`` integer finaliser (C. Wellons): a well-avalanched 32-bit hash."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def counter_uniform(seeds: torch.Tensor, step: int, token_ids: torch.Tensor) -> torch.Tensor:
    """Uniform(0, 1) noise (float64, never 0 or 1) for each (row seed, step, token id).

    ``seeds``: int64 [B]; ``token_ids``: int64 [B, K] or [1, K].  Pure function of its
    inputs: the same triple gives the same number on any device and in any batch."""
    seeds = seeds.to(torch.int64)
    seed_lo = (seeds & _MASK32).unsqueeze(1)
    seed_hi = ((seeds >> 32) & _MASK32).unsqueeze(1)
    h = _mix32(seed_lo ^ 0x9E3779B9)
    h = _mix32(h ^ seed_hi)
    h = _mix32(h ^ (int(step) & _MASK32))
    h = _mix32(h ^ (token_ids.to(torch.int64) & _MASK32))
    h = _mix32(h ^ 0x5BD1E995)
    return (h.to(torch.float64) + 0.5) / 4294967296.0


def gumbel_noise(seeds: torch.Tensor, step: int, token_ids: torch.Tensor) -> torch.Tensor:
    u = counter_uniform(seeds, step, token_ids)
    return -torch.log(-torch.log(u))


def temperature_at(step: int, sampling: SamplingConfig) -> float:
    """Temperature for the ``step``-th generated token (0-based).

    ``temperature_start`` falls linearly to ``temperature`` over
    ``temperature_decay_tokens`` tokens; from then on it is ``temperature``."""
    target = float(sampling.temperature)
    start = sampling.temperature_start
    window = int(sampling.temperature_decay_tokens)
    if start is None or window <= 0 or step >= window:
        return target
    return float(start) + (target - float(start)) * (step / window)


@dataclass(frozen=True)
class BatchLayout:
    """What the sampler must know about a left-padded batch.

    ``pad_lengths[b]``: left padding of row b; ``prompt_width``: padded prompt length
    (generated step = current length - prompt_width); ``seeds[b]``: the row's seed."""

    pad_lengths: torch.Tensor
    prompt_width: int
    seeds: torch.Tensor


def apply_repetition_penalty(scores: torch.Tensor, input_ids: torch.Tensor, penalty: float,
                             pad_lengths: torch.Tensor) -> torch.Tensor:
    """Hugging Face's repetition penalty (divide positive, multiply negative logits of
    tokens already present), counting only the row's real tokens, not its padding."""
    positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
    real = (positions >= pad_lengths.to(input_ids.device).unsqueeze(1)).to(torch.int32)
    seen = torch.zeros(scores.shape, dtype=torch.int32, device=scores.device)
    seen.scatter_add_(1, input_ids, real)
    penalised = torch.where(scores < 0, scores * penalty, scores / penalty)
    return torch.where(seen > 0, penalised, scores)


class SeededSampler(LogitsProcessor):
    """The whole deployed sampling step as one Hugging Face ``LogitsProcessor``.

    One processor (not a list) so nothing ``generate`` adds can be interleaved with the
    configured order.  ``warp`` returns the processed scores (the distribution sampled
    from) and is what the schedule tests inspect; ``__call__`` samples."""

    def __init__(self, sampling: SamplingConfig, layout: BatchLayout):
        self.sampling = sampling
        self.layout = layout
        self.top_k = sampling.top_k
        self._warpers = []
        if sampling.top_k is not None:
            self._warpers.append(TopKLogitsWarper(top_k=int(sampling.top_k)))
        if sampling.top_p is not None and sampling.top_p < 1.0:
            self._warpers.append(TopPLogitsWarper(top_p=float(sampling.top_p)))
        if sampling.typical_p is not None and sampling.typical_p < 1.0:
            self._warpers.append(TypicalLogitsWarper(mass=float(sampling.typical_p)))

    def step_of(self, input_ids: torch.Tensor) -> int:
        return int(input_ids.shape[1]) - int(self.layout.prompt_width)

    def warp(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        scores = scores.float()
        penalty = self.sampling.repetition_penalty
        if penalty is not None and penalty != 1.0:
            scores = apply_repetition_penalty(scores, input_ids, float(penalty), self.layout.pad_lengths)
        temperature = temperature_at(self.step_of(input_ids), self.sampling)
        if temperature != 1.0:
            scores = scores / temperature
        for warper in self._warpers:
            scores = warper(input_ids, scores)
        return scores

    def choose(self, input_ids: torch.Tensor, warped: torch.Tensor) -> torch.Tensor:
        """Gumbel-max draw per row.  With top-k the noise is computed for the k surviving
        candidates only: noise depends on the token id, not its position, so the draw is
        identical to adding noise over the whole vocabulary, at a fraction of the cost."""
        step = self.step_of(input_ids)
        seeds = self.layout.seeds.to(warped.device)
        k = self.top_k
        if k is not None and k < warped.shape[1]:
            values, candidates = warped.topk(int(k), dim=1)
        else:
            values = warped
            candidates = torch.arange(warped.shape[1], device=warped.device).unsqueeze(0)
        perturbed = values.to(torch.float64) + gumbel_noise(seeds, step, candidates)
        best = perturbed.argmax(dim=1, keepdim=True)
        if candidates.shape[0] == 1:
            return candidates[0, best.squeeze(1)]
        return candidates.gather(1, best).squeeze(1)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        chosen = self.choose(input_ids, self.warp(input_ids, scores))
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(1, chosen.unsqueeze(1), 0.0)
        return out


def sampling_label(sampling: SamplingConfig) -> str:
    """Short human label, e.g. ``top_k=40 T=10->1/20``, for logs and reports."""
    parts = []
    if sampling.top_k is not None:
        parts.append(f"top_k={sampling.top_k}")
    if sampling.top_p is not None:
        parts.append(f"top_p={sampling.top_p}")
    if sampling.typical_p is not None:
        parts.append(f"typical_p={sampling.typical_p}")
    if sampling.repetition_penalty is not None:
        parts.append(f"rep={sampling.repetition_penalty}")
    if sampling.temperature_start is not None and sampling.temperature_decay_tokens:
        parts.append(f"T={sampling.temperature_start:g}->{sampling.temperature:g}/{sampling.temperature_decay_tokens}")
    else:
        parts.append(f"T={sampling.temperature:g}")
    return " ".join(parts)
