"""Per-probe scores, plain numpy on token ids (testable without Spark or a model).

Why these three: ``exact`` is the model-card number (the true continuation comes out
token for token); ``edit_similarity`` is the "nearly so" number (rapidfuzz's normalised
Levenshtein similarity on token ids: a maintained C++ implementation that accepts any
sequence of hashables, so no detokenise/re-tokenise round trip); ``longest_match`` says
how long a verbatim run the model produced even when it drifted (the longest common
substring of continuation and suffix).  Reads and writes no tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def longest_common_run(a, b) -> int:
    """Length of the longest contiguous token run present in both ``a`` and ``b``.

    Dynamic programme over the rows of the equality matrix, one numpy row at a time
    (suffixes are tens of tokens, so ``len(a)`` row steps)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if len(a) == 0 or len(b) == 0:
        return 0
    prev = np.zeros(len(b) + 1, dtype=np.int64)
    best = 0
    for tok in a:
        cur = np.zeros_like(prev)
        cur[1:] = np.where(b == tok, prev[:-1] + 1, 0)
        best = max(best, int(cur.max()))
        prev = cur
    return best


def edit_similarity(continuation, suffix) -> float:
    """``1 - Levenshtein(continuation, suffix) / max(len)`` on token ids (1.0 when equal)."""
    from rapidfuzz.distance import Levenshtein

    a = [int(t) for t in continuation]
    b = [int(t) for t in suffix]
    if not a and not b:
        return 1.0
    return float(Levenshtein.normalized_similarity(a, b))


def score(continuation, suffix) -> tuple[bool, int, float]:
    """(exact, longest_match, edit_similarity) of one continuation against its suffix."""
    c = np.asarray(continuation, dtype=np.int64)
    s = np.asarray(suffix, dtype=np.int64)
    exact = bool(len(c) == len(s) and np.array_equal(c, s))
    return exact, longest_common_run(c, s), edit_similarity(c, s)


def score_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Adds exact, longest_match and edit_similarity to a frame with ``continuation_ids``
    and ``suffix_token_ids`` (the per-batch kernel of the probe stage)."""
    scores = [score(c if c is not None else [], s) for c, s in zip(frame["continuation_ids"],
                                                                   frame["suffix_token_ids"])]
    out = frame.copy()
    out["exact"] = [x[0] for x in scores]
    out["longest_match"] = np.array([x[1] for x in scores], dtype=np.int32)
    out["edit_similarity"] = np.array([x[2] for x in scores], dtype=np.float64)
    return out


def class_labels(edges: list[int]) -> list[str]:
    """Labels of the document-count classes with these lower edges: [1, 2, 10, 100] ->
    ``1``, ``2-9``, ``10-99``, ``100+``."""
    labels = []
    for lo, hi in zip(edges, [*edges[1:], None]):
        if hi is None:
            labels.append(f"{lo}+")
        elif hi == lo + 1:
            labels.append(str(lo))
        else:
            labels.append(f"{lo}-{hi - 1}")
    return labels


def doc_count_class(doc_count: int, edges: list[int]) -> str:
    """The class label of one document count (the Spark draw uses ``class_column``)."""
    labels = class_labels(edges)
    k = int(np.searchsorted(np.asarray(edges), int(doc_count), side="right")) - 1
    return labels[max(k, 0)]


def class_column(doc_count, edges: list[int]):
    """Spark Column: the class label of ``doc_count`` (same rule as ``doc_count_class``)."""
    from pyspark.sql import functions as F

    labels = class_labels(edges)
    expr = F.lit(labels[0])
    for lo, label in zip(edges[1:], labels[1:]):
        expr = F.when(doc_count >= lo, F.lit(label)).otherwise(expr)
    return expr
