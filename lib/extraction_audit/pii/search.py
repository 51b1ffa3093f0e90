"""By-value corpus search: which documents hold each of a run's values, in any surface form.

``corpus_doc_count`` of a sample value is the number of corpus documents holding it,
whatever the spelling: ``4111 1111 1111 1111`` or ``4111-1111-1111-1111``, ``020 7946 0958``
or ``+44 (0)20 7946 0958``, ``J.Doe@Example.com`` or ``j.doe@example.com``.  Re-running the
detectors over the corpus would under-count (a value whose corpus mention lacks a cue, or
hits an over-strict rule, is not tagged there), so the count is a text search for the
value itself.

A run's distinct values are few; their forms (``normalise.search_requirements``) travel
with the task closure (the broadcast set) and each Python worker compiles them once into
two trie-shaped regular expressions, one per view of a document (``normalise``: COMPACT
for numbers and codes, PLAIN for emails, IPs, dates, names, custom types).  Each document
is scanned once per view whatever the number of values (``tests/benchmarks/
bench_pii_search.py``: 1.8x faster than an exact ``str.find`` loop at 2,000 values);
only the hits reach Python, which checks the boundaries of every form that starts at the
hit (the longest and its prefixes).

COMPACT view: upper case; a run of separators (``SEPARATORS``) between two letters/digits
becomes one marker, and a marker is put between a letter and a digit that touch.  A form
is matched with an optional marker between any two of its characters, and must start and
end next to a non-letter/digit (a marker counts): so it is a concatenation of whole
letter/digit runs of the text.  ``values_in_reference`` is the plain per-value reference
the test suite compares against a brute-force regex over the raw text.

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

from .normalise import COMPACT, PLAIN, plain_text

SEARCH_HITS_DDL = "entity_type STRING, value_key STRING, doc_id STRING"
MAX_FORM_CHARS = 256  # longer forms (none of the built-in types) would nest the trie too deeply

#: What may stand between two letter/digit runs of one compact form: whitespace, dashes
#: (ASCII and Unicode hyphens/dashes), dots, slashes, brackets.
SEPARATORS = r"\s\-\u2010-\u2015./()\[\]"
MARKER = "\x01"
_SEP_RUN = re.compile(rf"(?<=[^\W_])[{SEPARATORS}]+(?=[^\W_])")
_CLASS_CHANGE = re.compile(r"(?<=[0-9])(?=[^\W\d_])|(?<=[^\W\d_])(?=[0-9])")


def compact_text(text: str) -> str:
    """The COMPACT view: upper case, separator runs between letters/digits and letter/digit
    changes marked with ``MARKER``."""
    return _CLASS_CHANGE.sub(MARKER, _SEP_RUN.sub(MARKER, text.replace(MARKER, " ").upper()))


def trie_regex(words: list[str], between: str = "") -> str:
    """A regex matching any of ``words``, longest first, built as a prefix trie;
    ``between`` (a regex) may occur between any two characters of a word."""
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict, first: bool) -> str:
        ends = "" in node
        lead = "" if first else between
        branches = [lead + re.escape(ch) + emit(child, False) for ch, child in sorted(node.items()) if ch != ""]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:
            return "(?:" + body + ")?"
        return body

    return emit(trie, True)


def _plain_boundary_ok(text: str, start: int, end: int) -> bool:
    """A PLAIN form may not touch a letter/digit: a digit edge only clashes with a digit."""
    def clash(form_char: str, neighbour: str) -> bool:
        if form_char.isdigit():
            return neighbour.isdigit()
        return form_char.isalnum() and neighbour.isalnum()

    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return not clash(text[start], before) and not clash(text[end - 1], after)


class _ViewSearcher:
    """All forms of one view, compiled into one trie regex."""

    def __init__(self, forms: list[str], compact: bool):
        self.compact = compact
        self.forms = set(forms)
        self.prefixes = {f: [f[:k] for k in range(1, len(f)) if f[:k] in self.forms] for f in self.forms}
        between = re.escape(MARKER) + "?" if compact else ""
        start = r"(?<![^\W_])" if compact else ""
        self.regex = (re.compile(start + "(?=(" + trie_regex(sorted(self.forms), between) + "))", re.DOTALL)
                      if self.forms else None)

    def _end_ok(self, view: str, start: int, end: int) -> bool:
        if self.compact:
            return end >= len(view) or not view[end].isalnum()
        return _plain_boundary_ok(view, start, end)

    def forms_in(self, view: str) -> set[str]:
        found: set[str] = set()
        if self.regex is None or not view:
            return found
        for m in self.regex.finditer(view):
            matched = m.group(1)
            if not matched:
                continue
            start = m.start(1)
            longest = matched.replace(MARKER, "") if self.compact else matched
            # view end of each prefix of the match (compact: markers are skipped)
            ends, n = {}, 0
            for i, ch in enumerate(matched):
                if ch != MARKER:
                    n += 1
                    ends[n] = start + i + 1
            for form in (longest, *self.prefixes[longest]):
                if form not in found and self._end_ok(view, start, ends[len(form)]):
                    found.add(form)
        return found


class FormSearcher:
    """Finds which values' requirements are met in a text (both views, one scan each)."""

    def __init__(self, values: list[tuple[str, str, list[list[str]]]]):
        """``values``: (entity_type, value_key, requirements), forms prefixed with their view
        (``normalise.COMPACT`` / ``normalise.PLAIN``)."""
        self.values = values
        self.form_owners: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for vi, (_, _, requirements) in enumerate(values):
            for ri, variants in enumerate(requirements):
                for form in variants:
                    if form and len(form) <= MAX_FORM_CHARS + 2:
                        self.form_owners[form].append((vi, ri))
        self.compact = _ViewSearcher([f[2:] for f in self.form_owners if f.startswith(COMPACT)], True)
        self.plain = _ViewSearcher([f[2:] for f in self.form_owners if f.startswith(PLAIN)], False)

    def forms_in(self, text: str) -> set[str]:
        if not text:
            return set()
        found = {COMPACT + f for f in self.compact.forms_in(compact_text(text))} if self.compact.regex else set()
        if self.plain.regex:
            found |= {PLAIN + f for f in self.plain.forms_in(plain_text(text))}
        return found

    def values_in(self, text: str) -> list[int]:
        met: dict[int, set[int]] = defaultdict(set)
        for form in self.forms_in(text):
            for vi, ri in self.form_owners[form]:
                met[vi].add(ri)
        return sorted(vi for vi, reqs in met.items() if len(reqs) == len(self.values[vi][2]))


def values_in_reference(text: str, values: list[tuple[str, str, list[list[str]]]]) -> list[int]:
    """Plain reference of ``FormSearcher.values_in``: every form of every value looked for
    with ``str.find`` in the view, boundaries checked at every occurrence."""
    views = {COMPACT: compact_text(text or ""), PLAIN: plain_text(text or "")}

    def occurs(form: str) -> bool:
        view_kind, body = form[:2], form[2:]
        view = views[view_kind]
        if view_kind == PLAIN:
            i = view.find(body)
            while i >= 0:
                if _plain_boundary_ok(view, i, i + len(body)):
                    return True
                i = view.find(body, i + 1)
            return False
        stripped, positions = [], []
        for i, ch in enumerate(view):
            if ch != MARKER:
                stripped.append(ch)
                positions.append(i)
        flat = "".join(stripped)
        i = flat.find(body)
        while i >= 0:
            s, e = positions[i], positions[i + len(body) - 1] + 1
            if (s == 0 or not view[s - 1].isalnum()) and (e >= len(view) or not view[e].isalnum()):
                return True
            i = flat.find(body, i + 1)
        return False

    return [vi for vi, (_, _, reqs) in enumerate(values) if all(any(occurs(f) for f in r) for r in reqs)]


@lru_cache(maxsize=2)
def _searcher(payload_id: str, payload: tuple) -> FormSearcher:
    return FormSearcher([(e, k, [list(v) for v in reqs]) for e, k, reqs in payload])


def search_corpus(docs_df, values: list[tuple[str, str, list[list[str]]]]):
    """Distributed search: ``docs_df`` (doc_id, text) -> DataFrame of SEARCH_HITS_DDL, one
    row per (value, document holding it).

    ``values`` (a run's distinct values, bounded by ``pii.corpus_search_limit``) travel with
    the task closure; each Python worker compiles the searcher once per payload.
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
