"""Second-chance corpus search: find documents holding given values as plain text.

The corpus-side detectors can miss a value the sample detectors found (a customer id in
lower case, a phone number glued to a word, a name without a cue), and a miss would hide a
leak.  So every sample value absent from ``pii_corpus_index`` (up to
``pii.corpus_search_limit`` values) is searched for in the corpus text by its surface
forms (``normalise.search_requirements``).

All forms are compiled into one trie-shaped regular expression, so a document is scanned
once whatever the number of values (cost grows with text length and the trie's branching,
not linearly with the number of forms: ``tests/benchmarks/bench_pii_search.py`` measured
3x faster than a ``str.find`` loop at 2,000 values and 6x at 10,000).  Each document is searched twice, lower-cased: as written, and
with separators between digits removed, so ``4111 1111 1111 1111`` and ``4111-1111-...``
both match the digit form.  A match counts only at word boundaries (digit forms: no digit
on either side).

Reads: ``corpus_documents`` (text).  Writes nothing; returns (entity_type, value_key,
doc_id) hits.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from functools import lru_cache
from typing import Iterator

import pandas as pd

_DIGIT_SEPARATORS = re.compile(r"(?<=\d)[ \t\-./()]+(?=\d)")

SEARCH_HITS_DDL = "entity_type STRING, value_key STRING, doc_id STRING"
MAX_FORM_CHARS = 256  # longer forms (none of the built-in types) would nest the trie too deeply


def trie_regex(words: list[str]) -> str:
    """A regex matching any of ``words``, longest first, built as a prefix trie."""
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        ends = "" in node
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch != ""]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:
            return "(?:" + body + ")?"
        return body

    return emit(trie)


class FormSearcher:
    """Finds which values' requirements are met in a text."""

    def __init__(self, values: list[tuple[str, str, list[list[str]]]]):
        """``values``: (entity_type, value_key, requirements) with lower-case variants."""
        self.values = values
        self.form_owners: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for vi, (_, _, requirements) in enumerate(values):
            for ri, variants in enumerate(requirements):
                for form in variants:
                    if form and len(form) <= MAX_FORM_CHARS:
                        self.form_owners[form].append((vi, ri))
        forms = sorted(self.form_owners)
        self.prefixes = {f: [f[:k] for k in range(1, len(f)) if f[:k] in self.form_owners] for f in forms}
        self.regex = re.compile("(?=(" + trie_regex(forms) + "))", re.DOTALL) if forms else None

    @staticmethod
    def _boundary_ok(text: str, start: int, end: int) -> bool:
        def clash(form_char: str, neighbour: str) -> bool:
            if form_char.isdigit():
                return neighbour.isdigit()
            return form_char.isalnum() and neighbour.isalnum()

        before = text[start - 1] if start > 0 else " "
        after = text[end] if end < len(text) else " "
        return not clash(text[start], before) and not clash(text[end - 1], after)

    def forms_in(self, text: str) -> set[str]:
        found: set[str] = set()
        if self.regex is None or not text:
            return found
        for view in (text.lower(), _DIGIT_SEPARATORS.sub("", text.lower())):
            for m in self.regex.finditer(view):
                longest = m.group(1)
                if not longest:
                    continue
                start = m.start(1)
                for form in (longest, *self.prefixes[longest]):
                    if form not in found and self._boundary_ok(view, start, start + len(form)):
                        found.add(form)
        return found

    def values_in(self, text: str) -> list[int]:
        met: dict[int, set[int]] = defaultdict(set)
        for form in self.forms_in(text):
            for vi, ri in self.form_owners[form]:
                met[vi].add(ri)
        return [vi for vi, reqs in met.items() if len(reqs) == len(self.values[vi][2])]


@lru_cache(maxsize=2)
def _searcher(payload_id: str, payload: tuple) -> FormSearcher:
    return FormSearcher([(e, k, [list(v) for v in reqs]) for e, k, reqs in payload])


def search_corpus(docs_df, values: list[tuple[str, str, list[list[str]]]]):
    """Distributed search: ``docs_df`` (doc_id, text) -> DataFrame of SEARCH_HITS_DDL.

    ``values`` is bounded by ``pii.corpus_search_limit`` and travels with the task closure;
    each Python worker compiles the searcher once per payload.
    """
    payload = tuple((e, k, tuple(tuple(v) for v in reqs)) for e, k, reqs in values)
    payload_id = hashlib.sha1(repr(payload).encode()).hexdigest()

    def search_batches(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        searcher = _searcher(payload_id, payload)
        for batch in batches:
            rows = []
            for doc_id, text in zip(batch["doc_id"], batch["text"]):
                for vi in searcher.values_in(text or ""):
                    entity_type, key, _ = searcher.values[vi]
                    rows.append((entity_type, key, doc_id))
            yield pd.DataFrame(rows, columns=["entity_type", "value_key", "doc_id"])

    return docs_df.select("doc_id", "text").mapInPandas(search_batches, SEARCH_HITS_DDL)
