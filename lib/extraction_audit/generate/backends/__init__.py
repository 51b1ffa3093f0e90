"""Generation backends, registered by name and chosen with ``generation.backend``.

A backend turns a batch of prompt token ids plus one seed per sample into generated
token ids (``GeneratedBatch``).  ``hf`` (Hugging Face ``generate`` with the seeded
sampler) is the default and the one CI tests; ``vllm`` is imported only when chosen.
Backends are cached per Python worker, so a model is loaded once per executor process.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass

import numpy as np

from ...config import SamplingConfig
from ...errors import UserFacingError

BACKENDS: dict[str, str] = {
    "hf": "extraction_audit.generate.backends.hf:HFBackend",
    "vllm": "extraction_audit.generate.backends.vllm:VLLMBackend",
}


@dataclass(frozen=True)
class BackendSpec:
    """Everything an executor needs to build the backend (small and picklable)."""

    backend: str
    model_path: str
    tokenizer_path: str
    dtype: str
    device: str
    sampling_json: str

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig.model_validate_json(self.sampling_json)


@dataclass
class GeneratedBatch:
    """Generated ids of a batch, flattened row after row (``values``) with per-row
    ``lengths``; the end-of-text token is not included (``stopped_at_eos`` says it came)."""

    values: np.ndarray  # int32, concatenated rows
    lengths: np.ndarray  # int32 [B]
    stopped_at_eos: np.ndarray  # bool [B]

    def rows(self) -> list[np.ndarray]:
        return np.split(self.values, np.cumsum(self.lengths)[:-1]) if len(self.lengths) else []


_CACHE: dict[BackendSpec, object] = {}
_LOCK = threading.Lock()


def get_backend(spec: BackendSpec):
    """The backend for ``spec``, built once per process."""
    with _LOCK:
        backend = _CACHE.get(spec)
        if backend is None:
            if spec.backend not in BACKENDS:
                raise UserFacingError(
                    f"generation.backend {spec.backend!r} is unknown; choose one of {sorted(BACKENDS)}")
            module_name, class_name = BACKENDS[spec.backend].split(":")
            backend = getattr(importlib.import_module(module_name), class_name)(spec)
            _CACHE[spec] = backend
    return backend
