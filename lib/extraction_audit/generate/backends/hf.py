"""Hugging Face backend: ``model.generate`` driven greedily through ``SeededSampler``.

Prompts of a batch are left-padded (so every row's next token sits in the last
column and all rows share the generated-step counter); the attention mask hides the
padding and ``generate`` derives position ids from it.  Generation stops at the model's
end-of-text token(s) or after ``max_new_tokens``.  The model's own
``generation_config`` cannot add processors: every setting that would otherwise be
inherited from it is pinned to a neutral value here, so only the configured sampling
settings apply.  Reads and writes no tables.
"""

from __future__ import annotations

import numpy as np

from ..model_loading import get_tokenizer, load_model, resolve_device
from ..sampling import BatchLayout, SeededSampler
from . import BackendSpec, GeneratedBatch


def stop_token_ids(model, tokenizer) -> list[int]:
    """End-of-text ids from the tokenizer and the model's generation config (chat models
    often list several, e.g. end-of-turn), restricted to ids inside the vocabulary."""
    ids: set[int] = set()
    for source in (getattr(tokenizer, "eos_token_id", None), getattr(model.generation_config, "eos_token_id", None)):
        if source is None:
            continue
        ids.update(int(i) for i in (source if isinstance(source, (list, tuple)) else [source]))
    vocab = int(model.get_output_embeddings().weight.shape[0]) if model.get_output_embeddings() is not None else None
    return sorted(i for i in ids if i >= 0 and (vocab is None or i < vocab))


def left_pad(prompts: list[np.ndarray], pad_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input_ids, attention_mask, pad_lengths) for right-aligned prompts, vectorised."""
    lengths = np.fromiter((len(p) for p in prompts), dtype=np.int64, count=len(prompts))
    width = int(lengths.max()) if len(lengths) else 0
    pad_lengths = width - lengths
    mask = np.arange(width)[None, :] >= pad_lengths[:, None]
    input_ids = np.full((len(prompts), width), pad_id, dtype=np.int64)
    input_ids[mask] = np.concatenate(prompts).astype(np.int64) if len(prompts) else []
    return input_ids, mask.astype(np.int64), pad_lengths


class HFBackend:
    name = "hf"

    def __init__(self, spec: BackendSpec):
        self.spec = spec
        self.sampling = spec.sampling
        self.device = resolve_device(spec.device)
        self.model = load_model(spec.model_path, spec.dtype, spec.device)
        self.tokenizer = get_tokenizer(spec.tokenizer_path)
        self.stop_ids = stop_token_ids(self.model, self.tokenizer)
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else (self.stop_ids[0] if self.stop_ids else 0))

    def generate(self, prompts: list[np.ndarray], seeds: np.ndarray, max_new_tokens: int) -> GeneratedBatch:
        """Sample ``max_new_tokens`` (or until end-of-text) for each prompt with its seed."""
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        input_ids, attention_mask, pad_lengths = left_pad(prompts, self.pad_id)
        width = input_ids.shape[1]
        layout = BatchLayout(
            pad_lengths=torch.from_numpy(pad_lengths).to(self.device),
            prompt_width=width,
            seeds=torch.from_numpy(np.ascontiguousarray(seeds, dtype=np.int64)).to(self.device),
        )
        config = GenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=int(max_new_tokens),
            min_new_tokens=0,
            pad_token_id=self.pad_id,
            eos_token_id=self.stop_ids or None,
            repetition_penalty=1.0,
            encoder_repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            suppress_tokens=[],
            begin_suppress_tokens=[],
            renormalize_logits=False,
            use_cache=True,
        )
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=torch.from_numpy(input_ids).to(self.device),
                attention_mask=torch.from_numpy(attention_mask).to(self.device),
                generation_config=config,
                logits_processor=LogitsProcessorList([SeededSampler(self.sampling, layout)]),
            )
        generated = output[:, width:].to("cpu").numpy()
        return cut_at_stop(generated, self.stop_ids)


def cut_at_stop(generated: np.ndarray, stop_ids: list[int]) -> GeneratedBatch:
    """Keep each row's tokens before its first end-of-text id (vectorised)."""
    n_rows, n_cols = generated.shape
    is_stop = np.isin(generated, np.asarray(stop_ids, dtype=generated.dtype)) if stop_ids else \
        np.zeros(generated.shape, dtype=bool)
    stopped = is_stop.any(axis=1)
    lengths = np.where(stopped, is_stop.argmax(axis=1), n_cols).astype(np.int32)
    keep = np.arange(n_cols)[None, :] < lengths[:, None]
    return GeneratedBatch(values=generated[keep].astype(np.int32), lengths=lengths, stopped_at_eos=stopped)
