"""Load the target model once per Python process (driver or Spark executor worker).

Spark reuses Python workers across tasks (``spark.python.worker.reuse``, on by
default), so the module-level cache keyed by (path, dtype, device) means a model is
read from disk once per worker and stays on its GPU for every later task and batch.

Device ``auto`` is the GPU Spark assigned to the task (``TaskContext.resources()['gpu']``)
when there is one, else ``cuda:0`` when CUDA is visible, else the CPU.  dtype ``auto``
is bfloat16 on GPUs that support it (float16 otherwise) and float32 on the CPU.
Reads and writes no tables.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from ..errors import UserFacingError
from ..tokenizer import check_model_location, load_tokenizer

log = logging.getLogger(__name__)

_MODELS: dict[tuple[str, str, str], object] = {}
_LOCK = threading.Lock()


def resolve_device(device: str = "auto") -> str:
    """``cpu``, ``cuda`` or ``cuda:<index>``; ``auto`` prefers the task's assigned GPU."""
    import torch

    if device == "cpu":
        return "cpu"
    if device == "auto" and not torch.cuda.is_available():
        return "cpu"
    if not torch.cuda.is_available():
        raise UserFacingError("model.device is 'cuda' but no CUDA device is visible to this process")
    address = _task_gpu_address()
    return f"cuda:{address}" if address is not None else "cuda:0"


def _task_gpu_address() -> str | None:
    """The GPU Spark's resource scheduler gave this task (None outside a GPU task)."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return None
    ctx = TaskContext.get()
    if ctx is None:
        return None
    gpu = (ctx.resources() or {}).get("gpu")
    return gpu.addresses[0] if gpu is not None and gpu.addresses else None


def limit_cpu_threads_to_task() -> None:
    """Inside a Spark task, use the task's CPUs (``spark.task.cpus``) for torch, so
    concurrent CPU tasks on one executor do not oversubscribe its cores."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover
        return
    ctx = TaskContext.get()
    if ctx is not None:
        import torch

        torch.set_num_threads(max(1, int(ctx.cpus())))


def resolve_dtype(dtype: str, device: str):
    import torch

    if dtype == "float32":
        return torch.float32
    if dtype == "float16":
        return torch.float16
    if dtype == "bfloat16":
        return torch.bfloat16
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def load_model(path: str, dtype: str = "auto", device: str = "auto"):
    """A causal LM in eval mode on ``device`` (cached per process)."""
    device = resolve_device(device)
    key = (path, str(dtype), device)
    with _LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = _load_uncached(path, dtype, device)
            _MODELS[key] = model
    return model


def _load_uncached(path: str, dtype: str, device: str):
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    check_model_location(path, "model.path")
    hf_logging.disable_progress_bar()
    if device == "cpu":
        limit_cpu_threads_to_task()
    torch_dtype = resolve_dtype(dtype, device)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    except (OSError, ValueError) as err:
        raise UserFacingError(f"cannot load model from {path!r}: {err}") from None
    model.to(device)
    model.eval()
    log.info("loaded model %s on %s as %s", Path(path).name or path, device, torch_dtype)
    return model


def get_tokenizer(path: str):
    """The tokenizer (cached per process by ``extraction_audit.tokenizer``)."""
    check_model_location(path, "model.tokenizer")
    return load_tokenizer(path)


def clear_cache() -> None:
    """Drop cached models (tests, or switching models inside one long-lived process)."""
    with _LOCK:
        _MODELS.clear()
