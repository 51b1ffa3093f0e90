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
        return [e.ids for e in fast(list(texts), add_special_tokens=False)]
    return tok(list(texts), add_special_tokens=False, truncation=False)["input_ids"]
