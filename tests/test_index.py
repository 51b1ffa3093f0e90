"""Corpus ingestion and the n-gram index against brute force, on real Spark + Delta."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from conftest import make_config, words
from extraction_audit.errors import UserFacingError
from extraction_audit.hashing import HashConfig, hash_concatenated, hash_window_reference, hash_windows
from extraction_audit.index import NgramIndex, build_index
from extraction_audit.tables import Tables


def write_jsonl(path: Path, docs: list[dict]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "part-0.jsonl", "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
    return path


def index_config(tmp_path, tokenizer, corpus_dir, corpus_id="c", n=3, **index):
    return make_config(
        tmp_path,
        model={"path": tokenizer},
        corpus={"id": corpus_id, "format": "jsonl", "path": str(corpus_dir)},
        index={"n": n, "bucket_bits": 2, "max_postings": 3, **index},
    )


def brute_force(docs: dict[str, list[int]], n: int, k: int) -> dict[int, dict]:
    """The definition: per distinct window, documents, occurrences and first-K postings."""
    cfg = HashConfig(n=n)
    out: dict[int, dict] = defaultdict(lambda: {"docs": {}, "occ": 0})
    for doc_id, toks in docs.items():
        for i in range(len(toks) - n + 1):
            h = hash_window_reference(toks[i:i + n], cfg)
            entry = out[h]
            entry["occ"] += 1
            entry["docs"].setdefault(doc_id, i)
    result = {}
    for h, e in out.items():
        postings = sorted(e["docs"].items())[:k]
        result[h] = {"doc_count": len(e["docs"]), "occurrence_count": e["occ"],
                     "postings": [(d, o) for d, o in postings], "postings_complete": len(e["docs"]) <= k}
    return result


def table_as_dict(spark, cfg) -> dict[int, dict]:
    rows = NgramIndex(spark, cfg).ngrams().collect()
    return {r.ngram_hash: {"doc_count": r.doc_count, "occurrence_count": r.occurrence_count,
                           "postings": [(p.doc_id, p.offset) for p in r.postings],
                           "postings_complete": r.postings_complete} for r in rows}


# ----------------------------------------------------------------------------- hashing
def test_vectorised_hash_equals_per_token_definition():
    rng = np.random.default_rng(0)
    for n, bits in ((2, 64), (5, 64), (50, 64), (7, 12)):
        cfg = HashConfig(n=n, bits=bits)
        toks = rng.integers(0, 70000, size=300)
        fast = hash_windows(toks, cfg)
        slow = [hash_window_reference(toks[i:i + n], cfg) for i in range(len(toks) - n + 1)]
        assert fast.tolist() == slow
        if bits < 64:
            assert (fast >= 0).all() and (fast < (1 << bits)).all()


def test_windows_never_cross_sequence_boundaries():
    cfg = HashConfig(n=3)
    a, b, c = [1, 2, 3, 4], [5, 6], [7, 8, 9]
    hashes, seq, offsets = hash_concatenated(np.array(a + b + c), np.array([4, 2, 3]), cfg)
    assert seq.tolist() == [0, 0, 2]
    assert offsets.tolist() == [0, 1, 0]
    expected = [hash_window_reference(w, cfg) for w in ([1, 2, 3], [2, 3, 4], [7, 8, 9])]
    assert hashes.tolist() == expected


def test_worker_encoder_equals_the_driver_tokenizer(demo_assets):
    """Workers rebuild the Rust tokenizer from its definition: same ids as the driver's
    Hugging Face tokenizer, after a pickle round trip, on odd whitespace and Unicode."""
    import pickle

    from extraction_audit.tokenizer import WorkerEncoder, encode_batch, load_tokenizer

    path = str(demo_assets.model_dir)
    texts = ["Hello  world\n\n\tx", "café ñandú 東京 🙂", " leading and trailing ", "a" * 500,
             "Call 020 7946 0958 or mail j.smith@example.org"]
    encoder = pickle.loads(pickle.dumps(WorkerEncoder(path)))
    assert encoder.definition is not None, "the demo tokenizer is a fast tokenizer"
    assert encoder.encode(texts) == encode_batch(load_tokenizer(path), texts)
    assert encoder.encode([]) == []


def test_worker_decoder_equals_the_driver_tokenizer(demo_assets):
    """Workers decode with the Rust tokenizer alone: the same text as the driver's Hugging
    Face ``batch_decode`` (the tokenizer's own clean-up setting, and clean-up off), on random
    ids, special tokens and characters split across tokens; clean-up on falls back to it."""
    import pickle

    from extraction_audit.tokenizer import WorkerDecoder, encode_batch, load_tokenizer

    path = str(demo_assets.model_dir)
    tok = load_tokenizer(path)
    rng = np.random.default_rng(5)
    ids = [rng.integers(0, len(tok), size=int(n)).tolist() for n in rng.integers(1, 80, size=40)]
    ids += encode_batch(tok, ["café ñandú 東京 🙂 ,  x .", "don 't stop !"])
    ids.append([i for i in encode_batch(tok, ["東京"])[0]][:1])  # half a character
    ids.append(sorted(tok.all_special_ids) + ids[0][:5])
    for clean_up in (None, False):
        decoder = pickle.loads(pickle.dumps(WorkerDecoder(path, clean_up=clean_up)))
        assert decoder.definition is not None, "no clean-up: the Rust decoder alone"
        want = tok.batch_decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=clean_up)
        assert decoder.decode([np.asarray(x) for x in ids]) == want
    cleaned = WorkerDecoder(path, clean_up=True)
    assert cleaned.definition is None
    assert cleaned.decode(ids) == tok.batch_decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=True)
    assert cleaned.decode([]) == []


def test_hash_in_spark_udf_equals_driver(spark):
    cfg = HashConfig(n=4)
    seqs = [[1, 2, 3, 4, 5, 6], [9, 9, 9, 9], [70000, 1, 2, 3, 4]]

    def udf_hash(batches):
        import pandas as pd

        for pdf in batches:
            yield pd.DataFrame({"h": [hash_windows(np.array(s), cfg).tolist() for s in pdf["s"]]})

    df = spark.createDataFrame([(s,) for s in seqs], "s array<int>").repartition(2)
    got = sorted(tuple(r.h) for r in df.mapInPandas(udf_hash, "h array<bigint>").collect())
    assert got == sorted(tuple(hash_windows(np.array(s), cfg).tolist()) for s in seqs)


# ----------------------------------------------------------------------------- counts
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_counts_equal_brute_force(spark, tmp_path_factory, word_tokenizer, data):
    n = data.draw(st.integers(2, 4), label="n")
    vocab = data.draw(st.integers(2, 6), label="vocab")
    base_docs = data.draw(st.lists(st.lists(st.integers(0, vocab - 1), min_size=0, max_size=14),
                                   min_size=1, max_size=8), label="docs")
    # Always include the edge cases: shorter than n, exactly n, repeated documents.
    docs = base_docs + [list(range(n - 1)), [0] * n, base_docs[0]]
    tmp = tmp_path_factory.mktemp("bf")
    records = [{"id": f"d{i:02d}", "text": words(t) if t else "w0"} for i, t in enumerate(docs)]
    token_docs = {r["id"]: (t if t else [0]) for r, t in zip(records, docs)}
    cfg = index_config(tmp, word_tokenizer, write_jsonl(tmp / "corpus", records), n=n)
    stats = build_index(spark, cfg)
    assert stats["documents_added"] == len(records)
    assert table_as_dict(spark, cfg) == brute_force(token_docs, n, k=3)


def test_incremental_add_equals_full_rebuild_and_readd_is_noop(spark, tmp_path, word_tokenizer):
    rng = np.random.default_rng(1)
    records = [{"id": f"d{i:02d}", "text": words(rng.integers(0, 5, size=rng.integers(1, 20)))}
               for i in range(12)]
    records.append(dict(records[0], id="d99"))  # repeated content, distinct document
    part_a, part_b = records[:6], records[6:]
    full = index_config(tmp_path, word_tokenizer, write_jsonl(tmp_path / "all", records), corpus_id="full")
    build_index(spark, full)

    inc_a = index_config(tmp_path, word_tokenizer, write_jsonl(tmp_path / "a", part_a), corpus_id="inc")
    build_index(spark, inc_a)
    inc_ab = index_config(tmp_path, word_tokenizer, write_jsonl(tmp_path / "ab", records), corpus_id="inc")
    stats = build_index(spark, inc_ab)
    assert stats["documents_added"] == len(part_b)
    assert stats["documents_already_present"] == len(part_a)

    cols = ["bucket", "ngram_hash", "doc_count", "occurrence_count", "postings", "postings_complete"]
    assertDataFrameEqual(NgramIndex(spark, inc_ab).ngrams().select(cols),
                         NgramIndex(spark, full).ngrams().select(cols))

    tables = Tables(spark, inc_ab)
    versions = {t: tables.delta(t).history(1).collect()[0].version
                for t in ("corpus_anchors", "corpus_documents", "corpus_index_builds")}
    last_build = tables.read("corpus_index_builds").where("corpus_id = 'inc'").orderBy(F.desc("finished_at")).first()
    assert last_build.source_snapshot
    # The same files again: the source is not read and nothing is committed.
    again = build_index(spark, inc_ab)
    assert again["documents_added"] == 0 and again["records_read"] == 0
    assert again["source_unchanged_since"] == last_build.build_id
    assert {t: tables.delta(t).history(1).collect()[0].version for t in versions} == versions
    # Asked to read it anyway: every record is read and found present.
    full_read = build_index(spark, index_config(tmp_path, word_tokenizer, tmp_path / "ab", corpus_id="inc",
                                                skip_unchanged_source=False))
    assert (full_read["records_read"], full_read["documents_already_present"]) == (len(records), len(records))
    assert "source_unchanged_since" not in full_read
    assertDataFrameEqual(NgramIndex(spark, inc_ab).ngrams().select(cols),
                         NgramIndex(spark, full).ngrams().select(cols))
    # A file added to the folder changes the fingerprint: the source is read again.
    write_jsonl(tmp_path / "ab" / "more", [{"id": "d100", "text": words([4, 4, 1])}])
    grown = build_index(spark, inc_ab)
    assert (grown["records_read"], grown["documents_added"]) == (len(records) + 1, 1)
    assert tables.delta("corpus_anchors").history(1).collect()[0].version > versions["corpus_anchors"]
    meta = Tables(spark, inc_ab).read("corpus_index").where("corpus_id = 'inc'").collect()[0]
    assert meta.documents == len(records) + 1


def _killed_then_rerun(spark, tmp_path, word_tokenizer, corpus_id: str, kill_at: str):
    """Build six documents, killed when ``index.<kill_at>`` is called; then build again.
    Returns the records, the config and the rerun's statistics."""
    import extraction_audit.index as index_mod

    records = [{"id": f"d{i}", "text": words([i % 3, 1, 2, 3, i % 2])} for i in range(6)]
    cfg = index_config(tmp_path, word_tokenizer, write_jsonl(tmp_path / "c", records), corpus_id=corpus_id)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt(f"simulated kill at {kill_at}")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_mod, kill_at, crash)
        with pytest.raises(KeyboardInterrupt):
            build_index(spark, cfg)
    stats = build_index(spark, cfg)
    assert len(stats["builds_finished_after_crash"]) == 1
    assert stats["documents_added"] == 0
    return records, cfg, stats


def test_interrupted_build_is_finished_on_rerun(spark, tmp_path, word_tokenizer):
    """Documents written but anchors not committed (a crash between the commits)."""
    records, cfg, _ = _killed_then_rerun(spark, tmp_path, word_tokenizer, "crash", "_add_build_anchors")
    expected = brute_force({r["id"]: [i % 3, 1, 2, 3, i % 2] for i, r in enumerate(records)}, 3, 3)
    assert table_as_dict(spark, cfg) == expected


def test_build_killed_after_its_anchor_commit_is_recorded_on_rerun(spark, tmp_path, word_tokenizer):
    """Anchors committed but the build not recorded: the rerun records it from its commit,
    and the corpus totals (sums over the builds) equal the tables."""
    _, cfg, _ = _killed_then_rerun(spark, tmp_path, word_tokenizer, "late", "_record_build")
    tables = Tables(spark, cfg)
    meta = tables.read("corpus_index").where("corpus_id = 'late'").collect()[0]
    assert (meta.documents, meta.tokens) == (6, 30)
    assert meta.anchors == tables.read("corpus_anchors").where("corpus_id = 'late'").count() > 0


def _build_states(spark, cfg, corpus_id: str) -> dict[str, str | None]:
    rows = Tables(spark, cfg).read("corpus_index_builds").where(F.col("corpus_id") == corpus_id).collect()
    return {r.build_id: r.state for r in rows}


def test_build_stopped_before_writing_documents_is_recorded_abandoned(spark, tmp_path, word_tokenizer):
    """Killed after recording its start, before its documents commit: the rerun records it
    abandoned (nothing to finish) and indexes every document itself."""
    import extraction_audit.index as index_mod

    records = [{"id": f"d{i}", "text": words([i % 3, 1, 2, 3, i % 2])} for i in range(6)]
    cfg = index_config(tmp_path, word_tokenizer, write_jsonl(tmp_path / "c", records), corpus_id="early")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("simulated kill before the documents commit")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_mod, "tokenize_documents", crash)
        with pytest.raises(KeyboardInterrupt):
            build_index(spark, cfg)
    assert list(_build_states(spark, cfg, "early").values()) == ["started"]
    stats = build_index(spark, cfg)
    assert (stats["builds_finished_after_crash"], stats["documents_added"]) == ([], 6)
    assert sorted(_build_states(spark, cfg, "early").values()) == ["abandoned", "done"]
    meta = Tables(spark, cfg).read("corpus_index").where("corpus_id = 'early'").collect()[0]
    assert (meta.documents, meta.tokens) == (6, 30)
    expected = brute_force({r["id"]: [i % 3, 1, 2, 3, i % 2] for i, r in enumerate(records)}, 3, 3)
    assert table_as_dict(spark, cfg) == expected


def test_an_unchanged_corpus_build_opens_no_document_file(spark, tmp_path, word_tokenizer):
    """Crashed builds are found from their ``started`` rows, not by scanning every document's
    build_id (a full column scan of a terabyte corpus, nightly): with the documents' data
    files gone, a build of the unchanged source still finds nothing pending and reads nothing."""
    records = [{"id": f"d{i}", "text": words([i, 1, 2, 3])} for i in range(4)]
    cfg = index_config(tmp_path, word_tokenizer, write_jsonl(tmp_path / "c", records), corpus_id="quiet")
    build_index(spark, cfg)
    documents = Path(Tables(spark, cfg).location("corpus_documents"))
    data_files = [f for f in documents.rglob("*.parquet") if "_delta_log" not in f.parts]
    assert data_files
    for f in data_files:
        f.unlink()
    stats = build_index(spark, cfg)
    assert stats["source_unchanged_since"] and stats["builds_finished_after_crash"] == []


def test_a_build_an_earlier_version_left_unrecorded_is_found_by_its_documents(spark, tmp_path, word_tokenizer):
    """Builds recorded by an earlier version have no ``state`` and a crashed one no row at
    all: its documents are scanned for it, once; the earlier rows are marked done."""
    import extraction_audit.index as index_mod

    records = [{"id": f"d{i}", "text": words([i % 3, 1, 2, 3, i % 2])} for i in range(6)]
    first, rest = records[:2], records
    cfg = index_config(tmp_path, word_tokenizer, write_jsonl(tmp_path / "a", first), corpus_id="old")
    build_index(spark, cfg)
    cfg = index_config(tmp_path, word_tokenizer, write_jsonl(tmp_path / "b", rest), corpus_id="old")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("simulated kill after the documents commit")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_mod, "_add_build_anchors", crash)
        with pytest.raises(KeyboardInterrupt):
            build_index(spark, cfg)
    tables = Tables(spark, cfg)
    # What an earlier version leaves: no started row, the recorded build without a state.
    tables.delete("corpus_index_builds", F.col("state") == "started")
    tables.update("corpus_index_builds", F.col("corpus_id") == "old", {"state": F.lit(None).cast("string")})
    assert list(_build_states(spark, cfg, "old").values()) == [None]

    stats = build_index(spark, cfg)
    assert len(stats["builds_finished_after_crash"]) == 1
    assert list(_build_states(spark, cfg, "old").values()) == ["done"] * 3
    expected = brute_force({r["id"]: [i % 3, 1, 2, 3, i % 2] for i, r in enumerate(records)}, 3, 3)
    assert table_as_dict(spark, cfg) == expected
    meta = tables.read("corpus_index").where("corpus_id = 'old'").collect()[0]
    assert (meta.documents, meta.tokens) == (6, 30)


# ----------------------------------------------------------------------------- ingestion
def test_bad_records_are_counted_by_reason_and_the_rest_indexed(spark, tmp_path, word_tokenizer):
    corpus = tmp_path / "bad"
    corpus.mkdir()
    good = [{"id": f"g{i}", "text": words([i, 1, 2, 3])} for i in range(4)]
    lines = [json.dumps(d).encode() for d in good]
    lines += [
        b'{"id": "m1", "text": "w1 w2',                       # malformed JSON
        json.dumps({"id": "n1", "text": None}).encode(),     # null text
        json.dumps({"id": "e1", "text": "   "}).encode(),    # empty text
        json.dumps({"id": "big", "text": "w1 " * 400}).encode(),  # too large
        b'{"id": "u1", "text": "w1 \xff\xfe w2"}',           # not UTF-8
        json.dumps({"text": "w5 w6 w7"}).encode(),          # null id
        json.dumps({"id": "g0", "text": "w9 w9 w9 w9"}).encode(),  # duplicate id
    ]
    (corpus / "part-0.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    cfg = index_config(tmp_path, word_tokenizer, corpus, corpus_id="bad")
    cfg.corpus.max_doc_chars = 1000
    stats = build_index(spark, cfg)
    assert stats["skipped"] == {"malformed_record": 1, "null_text": 1, "empty_text": 1, "too_large": 1,
                                "invalid_utf8": 1, "null_id": 1, "duplicate_id": 1}
    assert stats["records_read"] == len(lines)
    assert stats["documents_added"] == 4
    ids = {r.doc_id for r in NgramIndex(spark, cfg).documents().select("doc_id").collect()}
    assert ids == {"g0", "g1", "g2", "g3"}


def test_text_folder_and_parquet_sources(spark, tmp_path, word_tokenizer):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("w1 w2 w3 w4", encoding="utf-8")
    (folder / "b.txt").write_bytes(b"w1 \xff w2")
    (folder / "c.txt").write_text("w1 w2 w3 w4", encoding="utf-8")  # same content: same derived id
    cfg = make_config(tmp_path, model={"path": word_tokenizer},
                      corpus={"id": "txt", "format": "text", "path": str(folder), "id_column": None},
                      index={"n": 3, "bucket_bits": 2})
    stats = build_index(spark, cfg)
    assert stats["documents_added"] == 1
    assert stats["skipped"] == {"invalid_utf8": 1, "duplicate_id": 1}

    pq = tmp_path / "pq"
    spark.createDataFrame([("p1", "w1 w2 w3", "s3://bucket/x"), ("p2", "w3 w2 w1", "s3://bucket/y")],
                          "doc STRING, body STRING, origin STRING").write.parquet(str(pq))
    cfg2 = make_config(tmp_path, model={"path": word_tokenizer},
                       corpus={"id": "pq", "format": "parquet", "path": str(pq), "id_column": "doc",
                               "text_column": "body", "source_column": "origin"},
                       index={"n": 3, "bucket_bits": 2})
    assert build_index(spark, cfg2)["documents_added"] == 2
    docs = NgramIndex(spark, cfg2).documents().orderBy("doc_id").collect()
    assert [d.source for d in docs] == ["s3://bucket/x", "s3://bucket/y"]
    assert [d.n_tokens for d in docs] == [3, 3]

    cfg3 = make_config(tmp_path, model={"path": word_tokenizer},
                       corpus={"id": "pq2", "format": "parquet", "path": str(pq), "text_column": "missing"})
    with pytest.raises(UserFacingError, match="corpus.text_column: column 'missing' not found"):
        build_index(spark, cfg3)


def test_settings_that_do_not_match_the_existing_index_are_refused(spark, tmp_path, word_tokenizer):
    corpus = write_jsonl(tmp_path / "c", [{"id": "a", "text": "w1 w2 w3 w4"}])
    build_index(spark, index_config(tmp_path, word_tokenizer, corpus, corpus_id="fixed", n=3))
    with pytest.raises(UserFacingError, match="already indexed with n=3"):
        build_index(spark, index_config(tmp_path, word_tokenizer, corpus, corpus_id="fixed", n=4))
    index = NgramIndex(spark, index_config(tmp_path, word_tokenizer, corpus, corpus_id="fixed"))
    with pytest.raises(UserFacingError, match="tokenizer mismatch"):
        index.check_tokenizer("gpt2@0000")


def test_the_same_tokenizer_at_another_path_leaves_the_index_row_alone(spark, tmp_path, word_tokenizer):
    """Two models carrying copies of one tokenizer (the demo's target and control) index the
    same unchanged corpus in turn: no commit to corpus_index.  Once the recorded copy is
    gone, the next build records the path that works."""
    import shutil

    from pyspark.sql import functions as F

    copy = str(shutil.copytree(word_tokenizer, tmp_path / "copy-of-tokenizer"))
    corpus = write_jsonl(tmp_path / "c", [{"id": "a", "text": "w1 w2 w3 w4"}])
    first = index_config(tmp_path, copy, corpus, corpus_id="shared")
    build_index(spark, first)
    tables = Tables(spark, first)
    version = tables.delta("corpus_index").history(1).first()["version"]
    again = build_index(spark, index_config(tmp_path, word_tokenizer, corpus, corpus_id="shared"))
    assert again["source_unchanged_since"]
    assert tables.delta("corpus_index").history(1).first()["version"] == version
    row = tables.read("corpus_index").where(F.col("corpus_id") == "shared").first()
    assert row.tokenizer_path == copy
    shutil.rmtree(copy)
    build_index(spark, index_config(tmp_path, word_tokenizer, corpus, corpus_id="shared"))
    row = tables.read("corpus_index").where(F.col("corpus_id") == "shared").first()
    assert row.tokenizer_path == word_tokenizer


def test_empty_corpus_and_missing_tokenizer_are_clear_errors(spark, tmp_path, word_tokenizer):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "part-0.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(UserFacingError, match="has no records"):
        build_index(spark, index_config(tmp_path, word_tokenizer, empty, corpus_id="empty"))
    corpus = write_jsonl(tmp_path / "c", [{"id": "a", "text": "w1 w2 w3"}])
    with pytest.raises(UserFacingError, match="no model or tokenizer at"):
        build_index(spark, index_config(tmp_path, str(tmp_path / "nope"), corpus, corpus_id="x"))


def test_cli_index_and_corpus_stats(spark, tmp_path, word_tokenizer, capsys):
    import yaml

    from extraction_audit.cli import main

    rng = np.random.default_rng(3)
    corpus = write_jsonl(tmp_path / "c", [{"id": f"d{i}", "text": words(rng.integers(0, 60, 40))}
                                          for i in range(20)])
    conf = tmp_path / "conf.yaml"
    conf.write_text(yaml.safe_dump({
        "storage": {"warehouse": str(tmp_path / "wh")},
        "model": {"path": word_tokenizer},
        "corpus": {"id": "cli", "format": "jsonl", "path": str(corpus)},
        "index": {"n": 5, "bucket_bits": 2},
    }))
    assert main(["index", "--config", str(conf)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["documents_added"] == 20 and out["tokens_added"] == 800
    assert main(["corpus-stats", "--config", str(conf), "--count-ngrams"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == 20 and stats["tokens"] == 800 and stats["n"] == 5
    assert stats["distinct_ngrams"] == len({h for h in NgramIndex(spark, make_config(
        tmp_path, corpus={"id": "cli", "path": str(corpus)}, storage={"warehouse": str(tmp_path / "wh")}))
        .ngrams().select("ngram_hash").toPandas()["ngram_hash"]})
    assert stats["layout"] == "anchors-v2" and stats["anchor_k"] == 3 and stats["anchor_window"] == 3
    assert 0 < stats["anchors"] < 800 and stats["index_table_bytes"] > 0 and stats["index_bytes_per_token"] > 0
    assert stats["token_width"] == 2

    conf.write_text(conf.read_text() + "indx:\n  n: 3\n")
    assert main(["index", "--config", str(conf)]) == 2
    assert "indx: unknown key" in capsys.readouterr().err
