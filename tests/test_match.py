"""Matching against a brute-force oracle that implements ../shared/TABLES.md directly."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from conftest import build_word_tokenizer, make_config, words
from extraction_audit.hashing import HashConfig, bucket_of, hash_window_reference
from extraction_audit.index import build_index, resolve_meta
from extraction_audit.match import (is_prompt_copy, low_entropy_reason, passage_id_of, run_match,
                                    sample_windows_frame, verified_positions)
from extraction_audit.metrics import budget_checkpoints, compute_run_metrics
from extraction_audit.runs import RunRecord
from extraction_audit.tables import SAMPLES, Tables

N = 4


# ----------------------------------------------------------------------------- oracle
def oracle(samples: dict[int, list[int]], docs: dict[str, list[int]], n: int):
    """Occurrences and passages straight from the definitions."""
    corpus_windows = {tuple(t[i:i + n]) for t in docs.values() for i in range(len(t) - n + 1)}
    occurrences = []
    for sid, g in samples.items():
        covered = np.zeros(len(g), dtype=bool)
        for i in range(len(g) - n + 1):
            if tuple(g[i:i + n]) in corpus_windows:
                covered[i:i + n] = True
        i = 0
        while i < len(g):
            if covered[i]:
                j = i
                while j < len(g) and covered[j]:
                    j += 1
                occurrences.append((sid, i, j, tuple(g[i:j])))
                i = j
            else:
                i += 1
    passages = defaultdict(set)
    for sid, _, _, seq in occurrences:
        passages[seq].add(sid)

    def contains(doc, seq):
        return any(tuple(doc[i:i + len(seq)]) == seq for i in range(len(doc) - len(seq) + 1))

    passage_rows = {}
    for seq, sids in passages.items():
        holders = sorted(d for d, t in docs.items() if contains(t, seq))
        passage_rows[passage_id_of(seq)] = {"token_ids": list(seq), "n_samples": len(sids),
                                            "doc_count": len(holders), "example_doc_ids": holders[:5]}
    occ_rows = {(sid, s, e, passage_id_of(seq)) for sid, s, e, seq in occurrences}
    return occ_rows, passage_rows


def region_oracle(samples: dict[int, list[int]], docs: dict[str, list[int]], n: int) -> list[tuple[str, int, int]]:
    """Source regions straight from the definition (corpora whose windows each sit at one
    place): every matching sample window marks its corpus span; marked runs per document."""
    where = {tuple(t[i:i + n]): (d, i) for d, t in docs.items() for i in range(len(t) - n + 1)}
    marked = {d: np.zeros(len(t), dtype=bool) for d, t in docs.items()}
    for g in samples.values():
        for i in range(len(g) - n + 1):
            if tuple(g[i:i + n]) in where:
                d, o = where[tuple(g[i:i + n])]
                marked[d][o:o + n] = True
    regions = []
    for d, m in sorted(marked.items()):
        edges = np.flatnonzero(np.diff(np.concatenate([[0], m.astype(int), [0]])))
        regions += [(d, int(s), int(e)) for s, e in zip(edges[::2], edges[1::2])]
    return regions


# ----------------------------------------------------------------------------- fixtures
def setup_corpus(spark, tmp_path, tokenizer, docs: dict[str, list[int]], **index):
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    with open(corpus / "part-0.jsonl", "w") as f:
        for doc_id, toks in docs.items():
            f.write(json.dumps({"id": doc_id, "text": words(toks)}) + "\n")
    cfg = make_config(tmp_path, model={"path": tokenizer, "family": "tiny"},
                      corpus={"id": "c", "format": "jsonl", "path": str(corpus)},
                      index={"n": N, "bucket_bits": 2, "max_postings": 4, **index})
    build_index(spark, cfg)
    return cfg


def index_all(spark, cfg, tmp_path, docs: dict[str, list[int]]) -> dict:
    """A later build of ``cfg``'s corpus from a source holding ``docs`` (new ones and old)."""
    more = tmp_path / "more"
    more.mkdir()
    with open(more / "part-0.jsonl", "w") as f:
        for doc_id, toks in docs.items():
            f.write(json.dumps({"id": doc_id, "text": words(toks)}) + "\n")
    cfg.corpus.path = str(more)
    return build_index(spark, cfg)


def put_samples(spark, cfg, run_id, samples: dict[int, list[int]], prompts: dict[int, list[int]] | None = None,
                budget: int | None = None):
    tables = Tables(spark, cfg)
    meta = resolve_meta(cfg, None)
    RunRecord(tables, run_id).create(cfg, tokenizer=meta.tokenizer,
                                     budget_tokens=budget or sum(len(t) for t in samples.values()))
    prompts = prompts or {}
    rows = [{"run_id": run_id, "sample_id": sid, "prompt_strategy": "empty", "prompt_text": "",
             "prompt_token_ids": prompts.get(sid, []), "token_ids": toks, "text": words(toks),
             "n_tokens": len(toks), "seed": sid, "created_at": datetime(2026, 1, 1)}
            for sid, toks in samples.items()]
    tables.merge("samples", spark.createDataFrame(rows, SAMPLES.schema))
    return tables


def match_and_measure(spark, cfg, run_id, metrics: bool = True):
    """The match step and (unless ``metrics=False``: a test of matching alone) the metrics
    step of one run, called directly (no run state)."""
    stats = run_match(spark, cfg, run_id)
    if metrics:
        compute_run_metrics(spark, cfg, run_id, Tables(spark, cfg), run=RunRecord(Tables(spark, cfg), run_id).get())
    return stats


def findings(spark, cfg, run_id):
    tables = Tables(spark, cfg)
    occ = {(r.sample_id, r.start, r.end, r.passage_id) for r in
           tables.read("passage_occurrences").where(F.col("run_id") == run_id).collect()}
    passages = {r.passage_id: r for r in tables.read("extracted_passages").where(F.col("run_id") == run_id).collect()}
    return occ, passages


def assert_matches_oracle(spark, cfg, run_id, samples, docs):
    return assert_findings_equal_oracle(*findings(spark, cfg, run_id), samples, docs)


def assert_findings_equal_oracle(occ, passages, samples, docs):
    exp_occ, exp_passages = oracle(samples, docs, N)
    assert occ == exp_occ
    assert set(passages) == set(exp_passages)
    for pid, exp in exp_passages.items():
        got = passages[pid]
        assert list(got.token_ids) == exp["token_ids"]
        assert got.n_samples == exp["n_samples"]
        assert got.doc_count == exp["doc_count"], (pid, exp)
        assert got.doc_count_is_exact
        assert list(got.example_doc_ids) == exp["example_doc_ids"]
        assert got.is_stitched == (exp["doc_count"] == 0)
        assert got.n_tokens == len(exp["token_ids"])
    return occ, passages


# ----------------------------------------------------------------------------- one shared index
class Alphabet:
    """One test's slice of the shared corpus: its token ids 0..63 are shifted into a range of
    their own and its document ids get a prefix, so no window, passage or document count of
    one test can involve another test's documents (the oracle of a test's own documents is
    the oracle of the whole shared corpus)."""

    def __init__(self, name: str, slot: int):
        self.name, self.base = name, slot * 64

    def __call__(self, ids) -> list[int]:
        return [self.base + int(i) for i in ids]

    def doc(self, doc_id: str) -> str:
        return f"{self.name}-{doc_id}"

    def docs(self, docs: dict[str, list[int]]) -> dict[str, list[int]]:
        return {self.doc(d): self(t) for d, t in docs.items()}

    def seqs(self, samples: dict[int, list[int]]) -> dict[int, list[int]]:
        return {s: self(t) for s, t in samples.items()}


def _edge_docs() -> dict[str, list[int]]:
    rng = np.random.default_rng(0)
    return {
        "a": [1, 2, 3, 4, 5, 6, 7, 8, 9],
        "b": [5, 6, 7, 8, 20, 21, 22, 23],          # shares 5 6 7 8 with a
        "c": [30, 31, 32, 33, 34],
        "d": [30, 31, 32, 33, 34],                  # repeated document
        "e": rng.integers(10, 60, size=120).tolist(),  # a passage longer than a model context
        "f": [40, 41, 42, 43, 0, 0, 0, 44, 45, 46, 47],
    }


def _random_docs() -> dict[str, list[int]]:
    rng = np.random.default_rng(7)
    docs = {f"d{i:02d}": rng.integers(0, 12, size=rng.integers(3, 40)).tolist() for i in range(25)}
    docs["d99"] = docs["d03"]
    return docs


BOILER = [50, 51, 52, 53, 54, 55]


FREQUENT_BOILER = [50, 51, 52, 53, 54, 55, 56, 57]


def _frequent_docs() -> dict[str, list[int]]:
    rng = np.random.default_rng(5)
    return {f"d{i:02d}": rng.integers(0, 40, size=6).tolist() + FREQUENT_BOILER + rng.integers(0, 40, size=6).tolist()
            for i in range(12)}


COMMON, WIDER = [50, 51, 52, 53, 54, 55], [56, 57, 58, 59, 60, 61]


def _hundred_docs() -> dict[str, list[int]]:
    rng = np.random.default_rng(13)
    return {f"d{i:03d}": rng.integers(0, 40, size=4).tolist() + (COMMON if i < 100 else []) +
            rng.integers(0, 40, size=3).tolist() + WIDER + rng.integers(0, 40, size=2).tolist() for i in range(101)}


PROSE = [11, 23, 5, 17, 42, 8, 31, 2, 19, 27]
# Each test's documents, in its own token ids; all of them are indexed once, as one corpus.
SHARED_CORPORA = {
    "edge": _edge_docs,
    "random": _random_docs,
    "bounds": lambda: {f"d{i:02d}": [i % 10, 40 + i % 7] + BOILER + [i % 9] for i in range(12)},
    "rerun": lambda: {"a": list(range(20)), "b": list(range(30, 45))},
    "flags": lambda: {"a": PROSE, "rep": [7] * 12, "p": [3, 4, 3, 4, 3, 4, 3, 4]},
    "checkpoints": lambda: {"a": list(range(40))},
    "first_seen": lambda: {"a": list(range(30))},
    "frequent": _frequent_docs,
    "hundred": _hundred_docs,
}


class SharedCorpus:
    """One index (corpus ``c``, n = 4) holding every consolidated test's documents: the index
    is built once for the module.  Tests that write (reruns, new samples, run metrics) match
    runs of their own, with their own match-time ``index.max_postings``; tests that only read
    findings share a run per ``max_postings`` (``SharedRun``)."""

    def __init__(self, spark, root: Path):
        self.spark = spark
        tokenizer = str(build_word_tokenizer(root / "tokenizer", vocab=64 * len(SHARED_CORPORA)))
        self.alphabets = {name: Alphabet(name, slot) for slot, name in enumerate(SHARED_CORPORA)}
        self.docs = {name: self.alphabets[name].docs(make()) for name, make in SHARED_CORPORA.items()}
        everything = {d: t for docs in self.docs.values() for d, t in docs.items()}
        self.cfg = setup_corpus(spark, root, tokenizer, everything)

    def config(self, max_postings: int = 4):
        cfg = self.cfg.model_copy(deep=True)
        cfg.index.max_postings = max_postings
        return cfg


@pytest.fixture(scope="module")
def shared(spark, tmp_path_factory) -> SharedCorpus:
    return SharedCorpus(spark, tmp_path_factory.mktemp("shared-corpus"))


class SharedRun:
    """Tests that only read a matched run share one: each test's samples (in its own
    alphabet) get sample ids of their own in one run, matched once.  A test's slice is its
    samples' occurrences and the passages made of its alphabet's tokens; no passage can mix
    two alphabets, so each slice equals what a run of that test's samples alone would hold."""

    def __init__(self, spark, shared: SharedCorpus, run_id: str, max_postings: int, parts: dict, metrics: bool):
        self.spark, self.shared, self.run_id = spark, shared, run_id
        self.cfg = shared.config(max_postings=max_postings)
        self.samples = {name: {1000 * i + sid: toks for sid, toks in samples.items()}
                        for i, (name, samples) in enumerate(parts.items())}
        everything = {sid: toks for samples in self.samples.values() for sid, toks in samples.items()}
        put_samples(spark, self.cfg, run_id, everything)
        self.stats = match_and_measure(spark, self.cfg, run_id, metrics=metrics)
        self.all_samples = everything

    def findings(self, name: str):
        """(occurrences, passages) of one test's slice of the run."""
        occ, passages = findings(self.spark, self.cfg, self.run_id)
        base = self.shared.alphabets[name].base
        return ({o for o in occ if o[0] in self.samples[name]},
                {pid: p for pid, p in passages.items() if all(base <= t < base + 64 for t in p.token_ids)})

    def assert_matches_oracle(self, name: str):
        return assert_findings_equal_oracle(*self.findings(name), self.samples[name], self.shared.docs[name])


def _exact_parts(shared: SharedCorpus) -> dict:
    """The samples of the tests that share the run matched with max_postings 100 (the default)."""
    a = shared.alphabets
    return {"edge": a["edge"].seqs(_edge_samples()), "random": a["random"].seqs(_random_samples()),
            "hundred": a["hundred"].seqs({0: [63] + COMMON + [62], 1: [63] + WIDER + [62]})}


@pytest.fixture(scope="module")
def exact_run(spark, shared) -> SharedRun:
    """Edge cases, random corpora and the 100-document default, matched as one run (with
    the metrics step over all of them, the empty sample included)."""
    return SharedRun(spark, shared, "exact", 100, _exact_parts(shared), metrics=True)


@pytest.fixture(scope="module")
def frequent_run(spark, shared) -> SharedRun:
    """Passages and anchors in more documents than ``index.max_postings`` (3): the
    document-count bounds test and the frequent-anchor test, matched as one run."""
    bounds, frequent = shared.alphabets["bounds"], shared.alphabets["frequent"]
    return SharedRun(spark, shared, "frequent", 3, {"bounds": bounds.seqs({0: [61] + BOILER + [62]}),
                                                     "frequent": frequent.seqs(_frequent_samples())},
                     metrics=False)


# ----------------------------------------------------------------------------- tests
def _edge_samples() -> dict[int, list[int]]:
    long_passage = _edge_docs()["e"]
    return {
        0: [1, 2, 3, 4, 63, 63, 63, 63, 6, 7, 8, 9],        # match at very start and very end
        1: [30, 31, 32, 33],                                 # exactly n tokens
        2: [30, 31, 32],                                     # n-1 tokens: no match
        3: [63, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22, 63],       # stitched: a then b on overlapping windows
        4: [62] + long_passage + [62],                       # passage longer than a model context
        5: [62] + long_passage[:50] + [61],                  # same passage prefix in another sample
        6: [62] + long_passage[:50] + [60],
        7: [40, 41, 42, 43, 44, 45, 46, 47],                 # windows from f but never contiguous in f
        8: [],                                               # empty sample
    }


def _random_samples() -> dict[int, list[int]]:
    local = _random_docs()
    rng = np.random.default_rng(7)
    samples = {}
    for sid in range(30):
        src = local[f"d{rng.integers(0, 25):02d}"]
        a = int(rng.integers(0, max(1, len(src) - 2)))
        samples[sid] = rng.integers(0, 12, size=5).tolist() + src[a:a + int(rng.integers(0, 20))] + \
            rng.integers(0, 12, size=int(rng.integers(0, 6))).tolist()
    return samples


def test_edge_cases_equal_the_oracle(spark, shared, exact_run):
    g = shared.alphabets["edge"]
    long_passage = _edge_docs()["e"]
    occ, passages = exact_run.assert_matches_oracle("edge")
    first = min(exact_run.samples["edge"])
    assert (first, 0, 4, passage_id_of(g([1, 2, 3, 4]))) in occ
    assert (first, 8, 12, passage_id_of(g([6, 7, 8, 9]))) in occ
    stitched = passages[passage_id_of(g([2, 3, 4, 5, 6, 7, 8, 20, 21, 22]))]
    assert stitched.doc_count == 0 and stitched.is_stitched
    assert passages[passage_id_of(g([30, 31, 32, 33]))].doc_count == 2
    assert passages[passage_id_of(g(long_passage[:50]))].n_samples == 2
    stats, cfg = exact_run.stats, exact_run.cfg
    assert stats["samples"] == len(exact_run.all_samples)
    # Matching reads the index buckets of the samples' anchors, every row of them.
    meta = resolve_meta(cfg, None)
    samples = exact_run.all_samples
    windows = sample_windows_frame(np.array(list(samples)), list(samples.values()), meta.hash_config,
                                   meta.bucket_bits, meta.anchor_config, meta.bucket_scheme)
    anchors = Tables(spark, cfg).read("corpus_anchors")
    assert stats["index_rows_read"] == anchors.where(F.col("bucket").isin(
        sorted({int(b) for b in windows["bucket"]}))).count()

    # A run of one window has one anchor: matching reads that anchor's bucket of the index
    # and no other (rows, files and bytes as found on disk, not as the stage computed them).
    one_window = g([30, 31, 32, 33])
    put_samples(spark, cfg, "one", {0: one_window})
    one = match_and_measure(spark, cfg, "one", metrics=False)
    bucket = int(sample_windows_frame(np.array([0]), [one_window], meta.hash_config, meta.bucket_bits,
                                      meta.anchor_config, meta.bucket_scheme)["bucket"].iloc[0])
    folder = Path(cfg.storage.warehouse) / "corpus_anchors" / "corpus_id=c" / f"bucket={bucket}"
    files = sorted(folder.glob("*.parquet"))
    assert files and one["index_files_read"] == len(files) < len(list(folder.parent.rglob("*.parquet")))
    assert one["index_bytes_read"] == sum(f.stat().st_size for f in files)
    assert one["index_rows_read"] == anchors.where(F.col("bucket") == bucket).count()
    assert one["passages"] == 1


def test_random_corpora_equal_the_oracle(exact_run):
    exact_run.assert_matches_oracle("random")


def test_an_index_of_the_earlier_layout_still_matches_exactly(spark, tmp_path, word_tokenizer, monkeypatch):
    """Indexes of layout ``anchors`` put each anchor in the bucket of its hash's top bits; this
    version buckets by the low bits.  Such an index is still read with its own buckets: its
    matches equal the oracle's, and a later build adds to it with the same buckets."""
    from extraction_audit import index as index_module
    from extraction_audit.index import NgramIndex

    rng = np.random.default_rng(5)
    docs = {f"d{i:02d}": rng.integers(0, 12, size=rng.integers(3, 40)).tolist() for i in range(12)}
    first = dict(list(docs.items())[:8])
    with monkeypatch.context() as patched:
        patched.setattr(index_module, "LAYOUT", "anchors")
        cfg = setup_corpus(spark, tmp_path, word_tokenizer, first)
    assert index_all(spark, cfg, tmp_path, docs)["documents_added"] == 4
    index = NgramIndex(spark, cfg)
    meta = index.require_meta()
    assert meta.layout == "anchors" and meta.bucket_scheme == "top"
    stored = index.anchors().select("bucket", "anchor_hash").toPandas()
    assert (stored["bucket"].to_numpy() == bucket_of(stored["anchor_hash"].to_numpy(), meta.bucket_bits, "top")).all()
    samples = {}
    for sid in range(12):
        src = docs[f"d{rng.integers(0, 12):02d}"]
        a = int(rng.integers(0, max(1, len(src) - 2)))
        samples[sid] = rng.integers(0, 12, size=4).tolist() + src[a:a + int(rng.integers(0, 20))]
    put_samples(spark, cfg, "old", samples)
    match_and_measure(spark, cfg, "old", metrics=False)
    assert_matches_oracle(spark, cfg, "old", samples, docs)


def test_forced_hash_collisions_are_removed_by_verification(spark, tmp_path, word_tokenizer):
    bits = 10
    rng = np.random.default_rng(11)
    for _attempt in range(50):
        docs = {f"d{i}": rng.integers(0, 50, size=12).tolist() for i in range(4)}
        hashes = [hash_window_reference(t[i:i + N], HashConfig(N, bits)) for t in docs.values()
                  for i in range(len(t) - N + 1)]
        if len(set(hashes)) == len(hashes):  # no collision inside the corpus itself
            break
    samples = {sid: rng.integers(0, 64, size=40).tolist() for sid in range(25)}
    samples[99] = [63] + docs["d1"][2:10] + [63]
    cfg = setup_corpus(spark, tmp_path, word_tokenizer, docs, hash_bits=bits, max_postings=16)
    put_samples(spark, cfg, "hc", samples)
    stats = match_and_measure(spark, cfg, "hc", metrics=False)
    assert stats["candidate_windows"] > stats["verified_windows"] > 0, stats
    assert_matches_oracle(spark, cfg, "hc", samples, docs)


def test_doc_count_bounds_for_frequent_passages(shared, frequent_run):
    g = shared.alphabets["bounds"]
    _, passages = frequent_run.findings("bounds")
    (p,) = passages.values()
    assert not p.doc_count_is_exact
    assert p.doc_count == 3 and p.doc_count_upper_bound == 12
    assert list(p.example_doc_ids) == [g.doc("d00"), g.doc("d01"), g.doc("d02")]


def test_rerun_is_idempotent_and_new_samples_update_tables(spark, shared):
    g, docs = shared.alphabets["rerun"], shared.docs["rerun"]
    cfg = shared.config()
    samples = g.seqs({0: [60] + list(range(3, 12)) + [61], 1: [62, 62, 62, 62, 62]})
    put_samples(spark, cfg, "idem", samples)
    match_and_measure(spark, cfg, "idem")
    tables = Tables(spark, cfg)
    before = {t: tables.read(t).where("run_id = 'idem'").collect() for t in
              ("passage_occurrences", "extracted_passages", "run_metrics")}
    match_and_measure(spark, cfg, "idem")
    for t, rows in before.items():
        assertDataFrameEqual(tables.read(t).where("run_id = 'idem'"), rows)

    more = g.seqs({2: [60] + list(range(32, 40)) + [61]})
    put_samples(spark, cfg, "idem", more)
    match_and_measure(spark, cfg, "idem")
    assert_matches_oracle(spark, cfg, "idem", {**samples, **more}, docs)


def test_prompt_copies_and_filler_are_flagged_and_excluded_from_metrics(spark, shared):
    g = shared.alphabets["flags"]
    cfg = shared.config()
    samples = g.seqs({0: [60] + PROSE + [61], 1: [60] + [7] * 8, 2: [3, 4, 3, 4, 3, 4, 61]})
    put_samples(spark, cfg, "flags", samples, prompts={2: g([3, 4])})
    match_and_measure(spark, cfg, "flags")
    _, passages = findings(spark, cfg, "flags")
    by_tokens = {tuple(p.token_ids): p for p in passages.values()}
    assert not by_tokens[tuple(g(PROSE))].is_low_entropy
    filler = tuple(g([7] * 8))
    assert by_tokens[filler].is_low_entropy and by_tokens[filler].low_entropy_reason == "repetitive_tokens"
    assert by_tokens[tuple(g([3, 4, 3, 4, 3, 4]))].is_prompt_copy
    metrics = Tables(spark, cfg).read("run_metrics").where(F.col("run_id") == "flags").orderBy("budget_tokens").collect()
    last = metrics[-1]
    assert last.extracted_tokens == len(PROSE) and last.distinct_passages == 1
    assert last.distinct_rare_passages == 1
    assert last.generated_tokens == sum(len(s) for s in samples.values())
    assert last.share_extracted == pytest.approx(len(PROSE) / last.generated_tokens)


def test_metrics_at_budget_checkpoints(spark, shared):
    g, docs = shared.alphabets["checkpoints"], shared.docs["checkpoints"]
    cfg = shared.config()
    samples = g.seqs({sid: ([60] * 5 if sid % 2 else list(range(sid, sid + 5))) for sid in range(20)})
    put_samples(spark, cfg, "cp", samples, budget=100)
    match_and_measure(spark, cfg, "cp")
    rows = Tables(spark, cfg).read("run_metrics").where(F.col("run_id") == "cp").orderBy("budget_tokens").collect()
    assert [r.budget_tokens for r in rows] == [1, 10, 100]
    assert [r.generated_tokens for r in rows] == [0, 10, 100]
    assert [r.n_samples for r in rows] == [0, 2, 20]
    assert [r.distinct_passages for r in rows] == [0, 1, 10]
    assert rows[-1].extracted_tokens == 50
    # Ten overlapping fragments of one document are ten passages but one source region.
    assert [r.is_whole_run for r in rows] == [False, False, True]
    for row, upto in zip(rows, (0, 2, 20)):
        expected = region_oracle({s: t for s, t in samples.items() if s < upto}, docs, N)
        assert row.distinct_regions == len(expected)
        assert row.distinct_rare_regions == len(expected)
        assert row.corpus_tokens_extracted == sum(e - s for _, s, e in expected)
    assert [(r.distinct_regions, r.corpus_tokens_extracted) for r in rows] == [(0, 0), (1, 5), (1, 23)]
    tables = Tables(spark, cfg)
    regions = [(r.doc_id, r.region_start, r.region_end, r.n_passages, r.n_samples, r.is_rare)
               for r in tables.read("extracted_regions").where(F.col("run_id") == "cp").collect()]
    assert regions == [(g.doc("a"), 0, 23, 10, 10, True)]
    doc = tables.read("extracted_documents").where(F.col("run_id") == "cp").collect()
    assert [(d.doc_id, d.regions, d.tokens_extracted, d.doc_tokens, d.n_samples) for d in doc] == \
        [(g.doc("a"), 1, 23, 40, 10)]


def test_first_seen_run_tracks_passages_across_runs(spark, shared):
    g = shared.alphabets["first_seen"]
    cfg = shared.config()
    put_samples(spark, cfg, "night1", {0: g(range(0, 6))})
    match_and_measure(spark, cfg, "night1", metrics=False)
    put_samples(spark, cfg, "night2", {0: g(range(0, 6)), 1: g(range(10, 16))})
    match_and_measure(spark, cfg, "night2", metrics=False)
    _, passages = findings(spark, cfg, "night2")
    seen = {tuple(p.token_ids): p.first_seen_run_id for p in passages.values()}
    assert seen == {tuple(g(range(0, 6))): "night1", tuple(g(range(10, 16))): "night2"}


def test_kernels():
    s = np.array([1, 2, 3, 4, 5, 6, 7, 8])
    d = np.array([9, 1, 2, 3, 4, 0, 6, 7, 8])
    assert verified_positions(s, d, -1, np.array([0, 1, 4]), 4).tolist() == [0]
    assert budget_checkpoints(1_000_000) == [10_000, 100_000, 1_000_000]
    assert budget_checkpoints(50_000) == [500, 1000, 5000, 10_000, 50_000]
    assert is_prompt_copy(np.array([5, 5, 5, 6]), np.array([1, 5, 6]))
    assert not is_prompt_copy(np.array([5, 7]), np.array([1, 5, 6]))
    from extraction_audit.config import MatchConfig

    mc = MatchConfig()
    assert low_entropy_reason(np.arange(50), "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17", mc) == "few_letters"
    assert low_entropy_reason(np.arange(50) % 2, "= - = - = - = -", mc) == "repetitive_tokens"
    assert low_entropy_reason(np.arange(50), "The quick brown fox jumps over the lazy dog near the bank.", mc) is None


def _frequent_samples() -> dict[int, list[int]]:
    local, boiler = _frequent_docs(), FREQUENT_BOILER
    return {
        0: [63] + boiler + local["d09"][14:20] + [63],          # boilerplate into d09's own text
        1: [63] + local["d11"][:6] + boiler[:5] + [62],          # d11's own text into the boilerplate
        2: [63] + boiler + [62],                                 # the boilerplate alone
        3: [63] + local["d00"][14:20] + [61],                    # no boilerplate at all
    }


def test_frequent_anchors_lose_no_match(shared, frequent_run):
    """Boilerplate in more documents than the first pass verifies (K + 1 = 4 of 12), each
    copy with different text around it: windows that run from the boilerplate into one
    document's own text are found in the second pass, with exact counts."""
    g, docs = shared.alphabets["frequent"], shared.docs["frequent"]
    assert frequent_run.stats["second_pass_windows"] > 0, frequent_run.stats
    occ, passages = frequent_run.findings("frequent")
    exp_occ, exp_passages = oracle(frequent_run.samples["frequent"], docs, N)
    assert occ == exp_occ
    assert set(passages) == set(exp_passages)
    for pid, exp in exp_passages.items():
        got = passages[pid]
        assert got.doc_count <= exp["doc_count"] <= got.doc_count_upper_bound, (pid, exp)
        if exp["doc_count"] < 12:  # reaches into one document's own text: found and counted exactly
            assert got.doc_count_is_exact and got.doc_count == exp["doc_count"]
            assert list(got.example_doc_ids) == exp["example_doc_ids"]
    boiler_only = passages[passage_id_of(g(FREQUENT_BOILER))]
    assert boiler_only.doc_count_upper_bound == 12 and not boiler_only.is_stitched


def test_stored_anchors_equal_the_definition_and_doc_numbers_are_dense(spark, tmp_path, word_tokenizer):
    from extraction_audit.anchors import AnchorConfig, select_anchors
    from extraction_audit.index import NgramIndex

    rng = np.random.default_rng(9)
    docs = {f"d{i:02d}": rng.integers(0, 30, size=int(rng.integers(1, 40))).tolist() for i in range(15)}
    cfg = setup_corpus(spark, tmp_path, word_tokenizer, dict(list(docs.items())[:7]))
    assert index_all(spark, cfg, tmp_path, docs)["documents_added"] == 8
    index = NgramIndex(spark, cfg)
    numbers = {r.doc_number: r.doc_id for r in index.doc_numbers().collect()}
    assert sorted(numbers) == list(range(len(docs))) and sorted(numbers.values()) == sorted(docs)
    meta = index.require_meta()
    acfg = AnchorConfig(n=N, k=meta.anchor_k)
    expected = set()
    for doc_id, toks in docs.items():
        _, offsets, hashes = select_anchors(np.array(toks), np.array([len(toks)]), acfg)
        expected |= {(doc_id, int(o), int(h)) for o, h in zip(offsets, hashes)}
    stored = {(numbers[r.doc_number], r.offset, r.anchor_hash) for r in index.anchors().collect()}
    assert stored == expected


def test_default_counts_are_exact_up_to_one_hundred_documents(shared, exact_run, tmp_path):
    """The default index.max_postings (100): a passage in 100 documents gets its exact count,
    one in 101 an exact lower bound (100) and its upper bound."""
    g = shared.alphabets["hundred"]
    assert make_config(tmp_path).index.max_postings == exact_run.cfg.index.max_postings == 100
    _, passages = exact_run.findings("hundred")
    in_100, in_101 = passages[passage_id_of(g(COMMON))], passages[passage_id_of(g(WIDER))]
    assert (in_100.doc_count, in_100.doc_count_is_exact) == (100, True)
    assert (in_101.doc_count, in_101.doc_count_is_exact, in_101.doc_count_upper_bound) == (100, False, 101)
