"""Scoring models: the driver-side check, and the once-per-worker load.

Reads and writes no table.  Workers load models through the generation step's cache
(``generate.model_loading.load_model``: one load per Python worker, the task's GPU when
Spark assigned one, torch threads limited to the task's CPUs).  The driver calls
``describe_model`` first, so a wrong path fails in the first second with a message
naming the setting, never inside a task.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserFacingError
from ..tokenizer import check_model_location


@dataclass(frozen=True)
class ModelInfo:
    """What the driver needs to know about a model before any task starts."""

    path: str
    max_length: int | None  # positions the model can attend to; None when unbounded
    vocab_size: int
    bos_token_id: int | None


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
    """The causal LM at ``path`` in eval mode, cached per Python worker."""
    from ..generate.model_loading import load_model

    return load_model(path, dtype=dtype, device=device)
