"""Keyed hashing of personal data values: ``value_key = HMAC-SHA256(key, type:normalised)``.

A plain hash of a phone number or NHS number can be reversed by enumerating the small
space of valid numbers, so the key is a secret from the config (``pii.hmac_key``) or,
better, from the environment variable named by ``pii.hmac_key_env``.  There is no default
key: a run without one stops with an error naming both settings.

Reads and writes no tables.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from ..config import PiiConfig
from ..errors import UserFacingError

_FINGERPRINT_MESSAGE = b"extraction-audit/pii/key-fingerprint/v1"


def resolve_hmac_key(pii: PiiConfig) -> bytes:
    """The secret key as bytes, from ``pii.hmac_key`` or the ``pii.hmac_key_env`` variable."""
    secret = pii.hmac_key or os.environ.get(pii.hmac_key_env, "")
    if not secret:
        raise UserFacingError(
            f"no key for hashing personal data: set the environment variable {pii.hmac_key_env} "
            f"(named by pii.hmac_key_env) or pii.hmac_key; keep the same key across runs so "
            f"findings stay comparable")
    return secret.encode("utf-8")


def value_key(key: bytes, entity_type: str, normalised: str) -> str:
    return hmac.new(key, f"{entity_type}:{normalised}".encode("utf-8"), hashlib.sha256).hexdigest()


def key_fingerprint(key: bytes) -> str:
    """Identifies the key without revealing it: a key change invalidates the corpus index."""
    return hmac.new(key, _FINGERPRINT_MESSAGE, hashlib.sha256).hexdigest()[:16]
