"""Second-chance search kernel: one trie regex over all forms vs a loop of str.find per form.

Run: python tests/benchmarks/bench_pii_search.py [n_values] [n_docs]
Prints seconds for both on the same synthetic documents and their ratio (same hits checked).
"""

from __future__ import annotations

import random
import sys
import time

from extraction_audit.pii import normalise as norm
from extraction_audit.pii.search import FormSearcher


def synthetic(n_values: int, n_docs: int, seed: int = 0):
    rng = random.Random(seed)
    words = [''.join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    values = []
    for i in range(n_values):
        card = "4" + "".join(rng.choice("0123456789") for _ in range(15))
        email = f"{rng.choice(words)}.{rng.choice(words)}{i}@example.org"
        entity, normalised = (("card", card) if i % 2 else ("email", email))
        values.append((entity, f"k{i}", norm.search_requirements(entity, normalised, normalised)))
    planted = [v for v in values[: max(1, n_values // 50)]]
    docs = []
    for d in range(n_docs):
        text = " ".join(rng.choice(words) for _ in range(800))
        if d % 10 == 0:
            text += " " + planted[d % len(planted)][2][0][0][2:]  # a form without its view prefix
        docs.append(text)
    return values, docs


def naive(values, docs):
    out = []
    for text in docs:
        low = text.lower()
        hits = []
        for vi, (_, _, reqs) in enumerate(values):
            if all(any(f[2:].lower() in low for f in variants) for variants in reqs):
                hits.append(vi)
        out.append(sorted(hits))
    return out


def main() -> None:
    n_values = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    n_docs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    values, docs = synthetic(n_values, n_docs)
    t0 = time.perf_counter()
    searcher = FormSearcher(values)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    trie_hits = [sorted(searcher.values_in(t)) for t in docs]
    trie_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive_hits = naive(values, docs)
    naive_s = time.perf_counter() - t0
    assert all(set(a) >= set(b) for a, b in zip(trie_hits, naive_hits) if b), "trie search lost a hit"
    print(f"values={n_values} docs={n_docs} chars/doc~{sum(map(len, docs)) // len(docs)}")
    print(f"trie regex: compile {compile_s:.3f}s, search {trie_s:.3f}s")
    print(f"str.find loop (baseline): {naive_s:.3f}s")
    print(f"speed-up (baseline / trie search): {naive_s / trie_s:.1f}x")


if __name__ == "__main__":
    main()
