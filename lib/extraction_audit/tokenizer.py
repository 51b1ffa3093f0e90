"""The target model's tokenizer: loaded once per Python process, identified by fingerprint.

Matching compares token ids, so the corpus index and the samples must come from the same
tokenizer.  ``tokenizer_fingerprint`` (name plus a hash of the full tokenizer definition)
is stored with the index and checked before matching.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from .errors import UserFacingError

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def check_model_location(path: str | None, setting: str) -> str:
    """Fail early, naming the setting, when a local model/tokenizer path does not exist.

    Hub ids (``org/name``) are accepted; they must be in the local Hugging Face cache
    because nothing is downloaded at run time on air-gapped clusters."""
    if not path:
        raise UserFacingError(f"{setting} is not set")
    looks_local = path.startswith((".", "/", "~")) or "://" in path or path.startswith("dbfs:")
    if looks_local and "://" not in path and not path.startswith("dbfs:") and not Path(path).expanduser().exists():
        raise UserFacingError(f"{setting}: no model or tokenizer at {path!r} (path does not exist)")
    return path


@lru_cache(maxsize=8)
def load_tokenizer(path: str):
    """Load (once per process) a Hugging Face tokenizer from a local path or cached hub id."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise UserFacingError(f"cannot load tokenizer from {path!r}: {err}") from None
    # Documents are tokenized whole; silence the "longer than model_max_length" warning.
    tok.model_max_length = 1 << 62
    return tok


def vocab_size(tok) -> int:
    return max(len(tok), int(getattr(tok, "vocab_size", 0) or 0))


def tokenizer_fingerprint(tok, name: str | None = None) -> str:
    """``<name>@<sha256 prefix of the tokenizer definition>``: same ids <=> same fingerprint."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None:
        definition = backend.to_str()
    else:
        definition = json.dumps(sorted(tok.get_vocab().items()))
    digest = hashlib.sha256(definition.encode("utf-8")).hexdigest()[:16]
    label = Path(name or getattr(tok, "name_or_path", "") or "tokenizer").name or "tokenizer"
    return f"{label}@{digest}"


def same_tokenizer(a: str | None, b: str | None) -> bool:
    """Fingerprints name the same token ids when their definition hashes agree (the
    label before ``@`` is only the folder name, which may differ between copies)."""
    if not a or not b:
        return False
    return a.rsplit("@", 1)[-1] == b.rsplit("@", 1)[-1]


def encode_batch(tok, texts: list[str]) -> list[list[int]]:
    """Token ids of whole documents: no special tokens, no truncation."""
    if not texts:
        return []
    backend = getattr(tok, "_tokenizer", None)  # the Rust tokenizer of a fast tokenizer
    fast = getattr(backend, "encode_batch_fast", None)  # tokenizers >= 0.20: no offsets computed
    if fast is not None:
        return _encode_whole(backend, texts)
    return tok(list(texts), add_special_tokens=False, truncation=False)["input_ids"]


def _encode_whole(backend, texts: list[str]) -> list[list[int]]:
    """Ids from a Rust tokenizer: documents are encoded whole (no truncation, padding or
    special tokens), on the driver and in workers alike."""
    if backend.truncation is not None or backend.padding is not None:
        backend.no_truncation()
        backend.no_padding()
    return [e.ids for e in backend.encode_batch_fast(list(texts), add_special_tokens=False)]


class WorkerEncoder:
    """Document encoder shipped to Spark's Python workers.

    A fast tokenizer travels as its Rust definition (``backend_tokenizer.to_str()``, the
    exact object ``encode_batch`` calls on the driver), so a worker builds it with the
    ``tokenizers`` library alone instead of importing ``transformers`` (about 2 s per
    worker process) and reading the folder again.  Other tokenizers fall back to
    ``load_tokenizer(path)`` in the worker."""

    _loaded: dict[str, object] = {}  # per worker process, by definition digest

    def __init__(self, path: str):
        self.path = path
        tok = load_tokenizer(path)
        backend = getattr(tok, "_tokenizer", None)
        self.definition = (backend.to_str() if backend is not None and hasattr(backend, "encode_batch_fast")
                           else None)
        self.digest = hashlib.sha1(self.definition.encode()).hexdigest() if self.definition else None

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Token ids of whole documents: no special tokens, no truncation."""
        if not texts:
            return []
        if self.definition is None:
            return encode_batch(load_tokenizer(self.path), texts)
        backend = WorkerEncoder._loaded.get(self.digest)
        if backend is None:
            from tokenizers import Tokenizer

            backend = WorkerEncoder._loaded[self.digest] = Tokenizer.from_str(self.definition)
        return _encode_whole(backend, texts)
