"""Scored tokens per second: batched, padded forward passes vs one sample at a time.

Same tiny random GPT-2 (or ``--model PATH``), same samples of mixed lengths, measured in
one process with ``extraction_audit.rank.scores.token_logprobs``:

- ``one_by_one``: batch size 1 (what a naive per-row UDF would do) - the baseline;
- ``batched_<B>``: batch size B, sequences sorted by length and right-padded.

Also checks that every batched result equals the one-by-one result (max abs difference),
so a speed-up never comes from scoring something else.  Example::

    python tests/benchmarks/bench_rank_scores.py --samples 256 --batch-sizes 8,32,64 --device cpu
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=96)
    p.add_argument("--min-tokens", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--batch-sizes", default="8,32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--model", default=None, help="a local causal LM folder (default: tiny random GPT-2)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    import torch
    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

    from extraction_audit.rank.scores import token_logprobs

    args = parse_args(argv)
    if args.model:
        model = AutoModelForCausalLM.from_pretrained(args.model).to(args.device).eval()
    else:
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=2048, n_positions=512, n_embd=128, n_layer=3,
                                           n_head=4, bos_token_id=0, eos_token_id=0)).to(args.device).eval()
    vocab = model.config.vocab_size
    rng = np.random.default_rng(0)
    lengths = rng.integers(args.min_tokens, args.max_tokens + 1, args.samples)
    targets = [rng.integers(0, vocab, n) for n in lengths]
    contexts = [rng.integers(0, vocab, int(rng.integers(1, 12))) for _ in lengths]
    tokens = int(lengths.sum())

    def timed(batch_size):
        started = time.perf_counter()
        out = token_logprobs(model, contexts, targets, batch_size=batch_size)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return out, time.perf_counter() - started

    token_logprobs(model, contexts[:4], targets[:4], batch_size=4)  # warm-up
    base, base_s = timed(1)
    print(f"one_by_one: {tokens / base_s:,.0f} scored tokens/s ({base_s:.2f} s, {args.samples} samples)")
    for b in (int(x) for x in args.batch_sizes.split(",")):
        out, secs = timed(b)
        diff = max(float(np.abs(x - y).max()) for x, y in zip(out, base))
        print(f"batched_{b}: {tokens / secs:,.0f} scored tokens/s, {base_s / secs:.2f}x one_by_one, "
              f"max |diff| {diff:.2e}")


if __name__ == "__main__":
    main()
