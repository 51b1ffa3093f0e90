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


@lru_cache(maxsize=8)
def folder_rust_tokenizer(path: str):
    """The ``tokenizers`` object of a folder's ``tokenizer.json``, built once per process
    without importing ``transformers``; None when the folder has none."""
    definition = Path(path) / "tokenizer.json"
    if not definition.is_file():
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(definition))


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


def _rust_tokenizer(definition: str, digest: str):
    """The ``tokenizers`` object of a definition, built once per worker process."""
    backend = _RUST_TOKENIZERS.get(digest)
    if backend is None:
        from tokenizers import Tokenizer

        backend = _RUST_TOKENIZERS[digest] = Tokenizer.from_str(definition)
    return backend


_RUST_TOKENIZERS: dict[str, object] = {}  # per worker process, by definition digest


def _definition_of(tok, method: str) -> tuple[str | None, str | None]:
    """A fast tokenizer's Rust definition and its digest (None, None for other tokenizers)."""
    backend = getattr(tok, "_tokenizer", None)
    if backend is None or not hasattr(backend, method):
        return None, None
    definition = backend.to_str()
    return definition, hashlib.sha1(definition.encode()).hexdigest()


class WorkerEncoder:
    """Document encoder shipped to Spark's Python workers.

    A fast tokenizer travels as its Rust definition (``backend_tokenizer.to_str()``, the
    exact object ``encode_batch`` calls on the driver), so a worker builds it with the
    ``tokenizers`` library alone instead of importing ``transformers`` (about 2 s per
    worker process) and reading the folder again.  Other tokenizers fall back to
    ``load_tokenizer(path)`` in the worker."""

    def __init__(self, path: str):
        self.path = path
        self.definition, self.digest = _definition_of(load_tokenizer(path), "encode_batch_fast")

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Token ids of whole documents: no special tokens, no truncation."""
        if not texts:
            return []
        if self.definition is None:
            return encode_batch(load_tokenizer(self.path), texts)
        return _encode_whole(_rust_tokenizer(self.definition, self.digest), texts)


class WorkerDecoder:
    """Token ids -> text in Spark's Python workers, exactly as the driver's
    ``tok.batch_decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=clean_up)``.

    A fast tokenizer's decode is its Rust decoder followed, only when clean-up applies, by
    ``transformers``' clean-up of spaces; without clean-up the worker decodes with the
    ``tokenizers`` library alone (importing ``transformers`` and ``torch`` costs a worker
    process 3-5 CPU-s).  With clean-up, or a slow tokenizer, it loads the tokenizer."""

    def __init__(self, path: str, clean_up: bool | None = None):
        self.path, self.clean_up = path, clean_up
        tok = load_tokenizer(path)
        applies = tok.clean_up_tokenization_spaces if clean_up is None else clean_up
        self.definition, self.digest = (None, None) if applies else _definition_of(tok, "decode_batch")

    def decode(self, id_lists: list[list[int]]) -> list[str]:
        ids = [[int(t) for t in x] for x in id_lists]
        if not ids:
            return []
        if self.definition is None:
            return load_tokenizer(self.path).batch_decode(ids, skip_special_tokens=False,
                                                          clean_up_tokenization_spaces=self.clean_up)
        return _rust_tokenizer(self.definition, self.digest).decode_batch(ids, skip_special_tokens=False)
