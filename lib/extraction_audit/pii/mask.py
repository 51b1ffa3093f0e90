"""Mask personal data in text shown to people: reports, review pages, notebooks, the demo.

Passage and sample text is a copy of what the model emitted, so it can hold card numbers,
SSNs or NHS numbers even when ``pii_findings`` stores only keyed hashes.  Every value the
configured detectors find in a displayed text is replaced by its redaction hint in
brackets (``[card **** **** **** 1111]``), unless ``storage.allow_raw_pii`` is true.

Runs on the driver over what a page shows (the top N passages or candidates), never over
a whole table.  Reads and writes no tables.
"""

from __future__ import annotations

from functools import lru_cache

from ..config import AuditConfig
from ..errors import UserFacingError
from . import normalise as norm
from .detectors import DetectionSettings, DetectorSet, get_detector_set

_DISPLAY_ONLY_KEY = "display-masking-only"  # masking needs no value_key; any key will do


def masking_settings(cfg: AuditConfig) -> DetectionSettings:
    """The run's detector settings; a placeholder key when none is configured (no hashes
    are made)."""
    try:
        return DetectionSettings.from_config(cfg)
    except UserFacingError as err:
        if cfg.pii.hmac_key_env not in str(err):
            raise
        copy = cfg.model_copy(deep=True)
        copy.pii.hmac_key = _DISPLAY_ONLY_KEY
        return DetectionSettings.from_config(copy)


def mask_text(text, detectors: DetectorSet):
    """``text`` with every detected value replaced by ``[type hint]``."""
    if not isinstance(text, str) or not text:
        return text
    out, pos = [], 0
    for hit in detectors.detect(text):
        out.append(text[pos:hit.start])
        out.append(f"[{hit.entity_type} {norm.redact(hit.entity_type, hit.normalised)}]")
        pos = hit.end
    out.append(text[pos:])
    return "".join(out)


@lru_cache(maxsize=2)
def _detectors(settings: DetectionSettings) -> DetectorSet:
    return get_detector_set(settings)


def masker(cfg: AuditConfig):
    """A ``str -> str`` function: masking, or the identity when ``storage.allow_raw_pii``."""
    if cfg.storage.allow_raw_pii:
        return lambda text: text
    detectors = _detectors(masking_settings(cfg))
    return lambda text: mask_text(text, detectors)


def mask_frame(cfg: AuditConfig, frame, columns=("text",)):
    """A copy of a (small, displayed) pandas frame with ``columns`` masked."""
    if frame is None or cfg.storage.allow_raw_pii:
        return frame
    mask = masker(cfg)
    frame = frame.copy()
    for col in columns:
        if col in frame.columns:
            frame[col] = frame[col].map(mask)
    return frame
