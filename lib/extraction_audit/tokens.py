"""Compact token storage for ``corpus_documents.token_bytes``.

Token ids are stored as little-endian unsigned 16-bit integers when the tokenizer's
vocabulary fits (``token_width = 2``), else little-endian signed 32-bit (``token_width =
4``).  ``decode_tokens`` is the one documented decoder; in SQL the same bytes can be read
with ``extraction_audit`` or any language that reads little-endian integers.
"""

from __future__ import annotations

import numpy as np

_DTYPES = {2: np.dtype("<u2"), 4: np.dtype("<i4")}


def token_width_for_vocab(vocab_size: int) -> int:
    return 2 if vocab_size <= 65536 else 4


def encode_tokens(ids, width: int) -> bytes:
    arr = np.asarray(ids, dtype=np.int64)
    if width == 2 and len(arr) and (arr.min() < 0 or arr.max() > 65535):
        raise ValueError("token id outside uint16 range for a 2-byte token encoding")
    return arr.astype(_DTYPES[width]).tobytes()


def decode_tokens(blob: bytes | bytearray | memoryview, width: int) -> np.ndarray:
    """Token ids (int32) from ``token_bytes`` written with ``token_width = width``."""
    return np.frombuffer(bytes(blob), dtype=_DTYPES[width]).astype(np.int32)
