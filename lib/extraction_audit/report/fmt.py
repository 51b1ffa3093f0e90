"""Number formatting shared by the HTML and Markdown renderers (so both print the same)."""

from __future__ import annotations

import math

import pandas as pd

from .bootstrap import Estimate

def is_missing(value) -> bool:
    if value is None:
        return True
    try:
        return bool(math.isnan(float(value)))
    except (TypeError, ValueError):
        return False


def number(value, share: bool = False) -> str:
    if is_missing(value):
        return "–"
    v = float(value)
    if share:
        return f"{v:.2%}" if abs(v) >= 0.0001 or v == 0 else f"{v:.1e}"
    return f"{v:,.0f}" if abs(v - round(v)) < 1e-9 or abs(v) >= 100 else f"{v:,.1f}"


def interval(est, share: bool = False, signed: bool = False, integer: bool = False) -> str:
    """``low – high``.  Shares are clipped to [0, 1] and counts to >= 0 unless ``signed``
    (differences); ``integer`` rounds count bounds outwards."""
    if est is None or is_missing(est.low) or is_missing(est.high):
        return "–"
    low, high = float(est.low), float(est.high)
    if not signed:
        low = max(low, 0.0)
        high = min(high, 1.0) if share else high
    if integer and not share:
        low, high = math.floor(low + 1e-9), math.ceil(high - 1e-9)
    separator = " to " if signed else " – "
    return f"{number(low, share)}{separator}{number(high, share)}"


def value_with_interval(est: Estimate | None, share: bool = False, integer: bool = True) -> str:
    if est is None:
        return "–"
    text = number(est.value, share)
    ci = interval(est, share, integer=integer)
    return text if ci == "–" else f"{text} ({ci})"


def k_label(k_requested, k) -> str:
    """precision@k's k, with the cap said wherever it applies: ``1,000 (capped to 41)``."""
    if is_missing(k_requested):
        return number(k)
    if not is_missing(k) and int(k) != int(k_requested):
        return f"{number(k_requested)} (capped to {number(k)}: all ranked samples)"
    return number(k_requested)


def short_id(value, width: int = 10) -> str:
    """The first characters of a sha1 id: enough to find the row (``LIKE 'abc%'``), narrow
    enough to leave the table's width to the passage text."""
    return "" if is_missing(value) else str(value)[:width]


def timestamp(value) -> str:
    """``2026-12-01 03:27 UTC``: minutes are enough to tell runs apart in a key table."""
    if is_missing(value):
        return ""
    try:
        return pd.Timestamp(value).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError):
        return str(value)
