"""Scoring models, loaded once per Python worker and kept for the worker's life.

Reads and writes no table.  Spark reuses Python workers between tasks
(``spark.python.worker.reuse``), so a module-level cache means one load per worker
process, not one per Arrow batch.  The driver calls ``describe_model`` first so a wrong
path fails in the first second with a message naming the setting, never inside a task.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserFacingError
from ..tokenizer import check_model_location

_MODELS: dict[tuple[str, str, str], object] = {}


@dataclass(frozen=True)
class ModelInfo:
    """What the driver needs to know about a model before any task starts."""

    path: str
    max_length: int | None  # positions the model can attend to; None when unbounded
    vocab_size: int
    bos_token_id: int | None


def resolve_device(setting: str) -> str:
    import torch

    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if setting == "cuda" and not torch.cuda.is_available():
        raise UserFacingError("model.device is 'cuda' but no CUDA device is visible")
    return setting


def _torch_dtype(setting: str, device: str):
    import torch

    if setting == "auto":
        # Scores compare small differences in log-probability: full precision on CPU,
        # bfloat16 on GPU (log-softmax itself is always done in float32).
        return torch.float32 if device == "cpu" else torch.bfloat16
    return getattr(torch, setting)


def describe_model(path: str | None, setting: str) -> ModelInfo:
    """Read a model's config on the driver (cheap: no weights) and check it exists."""
    from transformers import AutoConfig

    check_model_location(path, setting)
    try:
        conf = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise UserFacingError(f"{setting}: cannot load a model config from {path!r}: {err}") from None
    max_length = None
    for attr in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        value = getattr(conf, attr, None)
        if isinstance(value, int) and value > 0:
            max_length = value
            break
    text_conf = conf.get_text_config() if hasattr(conf, "get_text_config") else conf
    return ModelInfo(path=path, max_length=max_length, vocab_size=int(text_conf.vocab_size),
                     bos_token_id=getattr(text_conf, "bos_token_id", None))


def load_scoring_model(path: str, device: str = "auto", dtype: str = "auto"):
    """The causal LM at ``path`` in eval mode on ``device``; cached per process."""
    device = resolve_device(device)
    key = (path, device, dtype)
    if key not in _MODELS:
        from transformers import AutoModelForCausalLM

        try:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=_torch_dtype(dtype, device))
        except (OSError, ValueError) as err:
            raise UserFacingError(f"cannot load model from {path!r}: {err}") from None
        _MODELS[key] = model.to(device).eval()
    return _MODELS[key]
