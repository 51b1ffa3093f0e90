"""Executor side of generation: one Spark task turns plan rows into sample rows.

Runs inside ``DataFrame.mapInArrow``.  We use the Arrow flavour of ``mapInPandas`` so the
generated ids go from the model's output tensor straight into an Arrow ``list<int32>``
column (one values buffer plus offsets, no per-row Python lists and never a
decode/re-encode round trip); only the ``text`` column is decoded, from those ids.

Within a task, plan rows are sorted by ``max_new_tokens`` and prompt length and cut into
batches of ``generation.batch_size`` with a single ``max_new_tokens`` each, which keeps
padding and wasted steps small.  Batch composition does not change any sample (see
``sampling``).  The backend (model + tokenizer) is cached per Python worker.  Reads and
writes no tables (the driver writes ``samples``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .backends import BackendSpec, get_backend
from .prompts import divergence_offset, separator_mask, word_variants

# The samples columns a task produces; run_id and created_at are added by the driver.
WORKER_OUTPUT_DDL = (
    "sample_id BIGINT, prompt_strategy STRING, prompt_text STRING, prompt_token_ids ARRAY<INT>, "
    "token_ids ARRAY<INT>, text STRING, n_tokens INT, seed BIGINT, divergence_offset INT, finish_reason STRING"
)


@dataclass(frozen=True)
class WorkerSpec:
    backend: BackendSpec
    batch_size: int


def batch_slices(max_new_tokens: np.ndarray, prompt_lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Row indices of each model batch: grouped by max_new_tokens, similar prompt lengths
    together, at most ``batch_size`` rows."""
    order = np.lexsort((prompt_lengths, max_new_tokens))
    batches = []
    boundaries = np.flatnonzero(np.diff(max_new_tokens[order])) + 1
    for group in np.split(order, boundaries):
        batches.extend(group[i:i + batch_size] for i in range(0, len(group), batch_size))
    return [b for b in batches if len(b)]


def generate_batches(batches: Iterator, spec: WorkerSpec) -> Iterator:
    """mapInArrow function: plan RecordBatches in, sample RecordBatches out."""
    import pyarrow as pa

    plan = pa.Table.from_batches(list(batches))
    if plan.num_rows == 0:
        return
    backend = get_backend(spec.backend)
    tokenizer = backend.tokenizer
    prompt_col = plan.column("prompt_token_ids").combine_chunks()
    prompt_offsets = prompt_col.offsets.to_numpy()
    prompt_values = prompt_col.values.to_numpy(zero_copy_only=False).astype(np.int64)
    prompt_lengths = np.diff(prompt_offsets)
    max_new = plan.column("max_new_tokens").to_numpy().astype(np.int64)
    seeds = plan.column("seed").to_numpy()
    words = plan.column("repeat_word").to_pylist()
    for rows in batch_slices(max_new, prompt_lengths, spec.batch_size):
        prompts = [prompt_values[prompt_offsets[r]:prompt_offsets[r + 1]] for r in rows]
        out = backend.generate(prompts, seeds[rows], int(max_new[rows[0]]))
        yield _sample_batch(plan, rows, out, [words[r] for r in rows], tokenizer)


def _sample_batch(plan, rows: np.ndarray, out, words: list[str | None], tokenizer):
    import pyarrow as pa

    offsets = np.concatenate([[0], np.cumsum(out.lengths)]).astype(np.int32)
    token_ids = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(out.values, pa.int32()))
    generated = out.rows()
    texts = tokenizer.batch_decode([g.tolist() for g in generated])
    divergence = [None] * len(rows)
    if any(w is not None for w in words):
        separators = separator_mask(tokenizer)
        variants = {w: word_variants(tokenizer, w) for w in set(words) if w is not None}
        for i, (word, g) in enumerate(zip(words, generated)):
            if word is not None:
                divergence[i] = divergence_offset(g, variants[word], separators)
    take = pa.array(rows, pa.int64())
    return pa.RecordBatch.from_arrays(
        [
            plan.column("sample_id").take(take).combine_chunks(),
            plan.column("prompt_strategy").take(take).combine_chunks(),
            plan.column("prompt_text").take(take).combine_chunks(),
            plan.column("prompt_token_ids").take(take).combine_chunks(),
            token_ids,
            pa.array(texts, pa.string()),
            pa.array(out.lengths, pa.int32()),
            plan.column("seed").take(take).combine_chunks(),
            pa.array(divergence, pa.int32()),
            pa.array(np.where(out.stopped_at_eos, "eos", "length"), pa.string()),
        ],
        names=["sample_id", "prompt_strategy", "prompt_text", "prompt_token_ids", "token_ids", "text", "n_tokens",
               "seed", "divergence_offset", "finish_reason"],
    )
