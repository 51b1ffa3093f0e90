"""Optional vLLM backend (``generation.backend: vllm``), same interface as ``hf``.

vLLM is never required: it is imported only when this backend is chosen, and a missing
install is a ``UserFacingError``.  Each request carries its sample's seed (vLLM's
per-request generator), so samples are reproducible within one vLLM version, though
not token-identical to the ``hf`` backend (different noise).  typical-p is not offered
by vLLM, and the decaying temperature schedule needs per-request logits processors,
which only vLLM's V0 engine accepts; either setting with an engine that cannot honour
it is refused rather than silently ignored.  Reads and writes no tables.
"""

from __future__ import annotations

import numpy as np

from ...errors import UserFacingError
from ..sampling import temperature_at
from . import BackendSpec, GeneratedBatch


def _import_vllm():
    try:
        from vllm import LLM, SamplingParams
    except ImportError as err:
        raise UserFacingError(
            "generation.backend is 'vllm' but vLLM is not installed on this machine "
            f"({err}); install it on the GPU executors or use generation.backend: hf") from None
    return LLM, SamplingParams


class VLLMBackend:
    name = "vllm"

    def __init__(self, spec: BackendSpec):
        LLM, SamplingParams = _import_vllm()
        self.spec = spec
        self.sampling = spec.sampling
        self._SamplingParams = SamplingParams
        if self.sampling.typical_p is not None and self.sampling.typical_p < 1.0:
            raise UserFacingError("generation.sampling.typical_p is not supported by the vllm backend; use backend hf")
        self._schedule = self.sampling.temperature_start is not None and self.sampling.temperature_decay_tokens > 0
        if self._schedule and "logits_processors" not in getattr(SamplingParams, "__struct_fields__", ()):
            raise UserFacingError(
                "this vLLM engine cannot apply the decaying temperature schedule "
                "(generation.sampling.temperature_start); use backend hf or set temperature_start: null")
        dtype = "auto" if spec.dtype == "auto" else spec.dtype
        self.llm = LLM(model=spec.model_path, tokenizer=spec.tokenizer_path, dtype=dtype, seed=0)
        tokenizer = self.llm.get_tokenizer()
        self.stop_ids = [int(tokenizer.eos_token_id)] if tokenizer.eos_token_id is not None else []

    def _params(self, seed: int, max_new_tokens: int):
        s = self.sampling
        kwargs = dict(
            n=1,
            seed=int(seed) & 0x7FFFFFFFFFFFFFFF,
            max_tokens=int(max_new_tokens),
            temperature=1.0 if self._schedule else float(s.temperature),
            top_k=int(s.top_k) if s.top_k is not None else -1,
            top_p=float(s.top_p) if s.top_p is not None else 1.0,
            repetition_penalty=float(s.repetition_penalty) if s.repetition_penalty is not None else 1.0,
        )
        if self._schedule:
            def schedule(generated_ids, logits, _s=s):
                return logits / temperature_at(len(generated_ids), _s)

            kwargs["logits_processors"] = [schedule]
        return self._SamplingParams(**kwargs)

    def generate(self, prompts: list[np.ndarray], seeds: np.ndarray, max_new_tokens: int) -> GeneratedBatch:
        from vllm.inputs import TokensPrompt

        requests = [TokensPrompt(prompt_token_ids=[int(t) for t in p]) for p in prompts]
        params = [self._params(int(seed), max_new_tokens) for seed in seeds]
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        rows, stopped = [], []
        for out in outputs:
            ids = np.asarray(out.outputs[0].token_ids, dtype=np.int32)
            hit = np.isin(ids, self.stop_ids) if self.stop_ids else np.zeros(len(ids), dtype=bool)
            stopped.append(bool(hit.any()))
            rows.append(ids[: int(hit.argmax())] if hit.any() else ids)
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int32, count=len(rows))
        values = np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, dtype=np.int32)
        return GeneratedBatch(values=values, lengths=lengths, stopped_at_eos=np.asarray(stopped, dtype=bool))
