"""Verbatim matching: sample n-grams -> corpus index join -> exact verification ->
maximal passages -> document counts -> low-entropy and prompt-copy flags -> metrics.

Reads ``samples``, ``runs``, ``corpus_anchors`` / ``corpus_doc_numbers`` /
``corpus_documents`` (through ``NgramIndex``).
Writes ``passage_occurrences``, ``extracted_passages`` and ``matched_windows`` for one run,
each with ``replaceWhere run_id = R`` so a re-run replaces, never duplicates
(``run_metrics`` is the metrics step's, ``metrics.py``).

The semantics are ``../shared/TABLES.md`` to the letter:

* every window ``g[i:i+n]`` of a sample's generated tokens gets its winnowing anchor (the
  minimum-hash k-gram inside it, ``anchors.py``); the corpus documents holding that anchor
  hash (``corpus_anchors``) are the window's *candidates*: every document that contains
  the window holds the same anchor at the same place, on the window's diagonal;
* a candidate is verified token by token against the document; hits on one diagonal
  (same sample, same document, same offset difference) are chained into one segment that
  is compared once, not once per window.  Per anchor, the first ``index.max_postings + 1``
  documents (K + 1) are verified; a window on a more frequent anchor that fewer of them
  verify is checked against every further posting of its anchor in a second pass, so
  boilerplate anchors shared by thousands of documents lose no match, and a window that
  is itself in more than K documents (a licence line) never costs more than K + 1 checks;
* each verified window gets its document count (exact when every posting of its anchor
  was verified; the anchor's document count, an upper bound, otherwise) and its first
  ``index.max_postings`` verified documents (smallest doc_id first);
* covered positions are the union of verified windows; a maximal run is a passage
  occurrence; a passage is its distinct token sequence (``passage_id`` = sha1 of the
  comma-joined token ids);
* ``doc_count`` counts documents holding the whole passage: candidates are the verified
  documents of the passage's rarest window, each checked by substring search, so the
  count is exact whenever that window is in at most ``index.max_postings`` documents;
  otherwise it is an exact lower bound and ``doc_count_upper_bound`` is the smallest
  window document count.  A run containing a window that is in no document (stitched
  from windows of different documents) gets ``doc_count = 0`` and ``is_stitched``.

Join plan (see README "Matching at scale"): the distinct sample anchors are staged by
hash-prefix bucket; buckets are processed in groups small enough that the group's
anchors are broadcast, so each corpus bucket is scanned once and the corpus side is
never shuffled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
import zlib
from typing import Iterator

import numpy as np
import pandas as pd

from .config import AuditConfig, MatchConfig
from .errors import UserFacingError
from .anchors import AnchorConfig, window_anchors
from .hashing import HashConfig, bucket_of, hash_concatenated
from .index import IndexMeta, NgramIndex
from .scratch import materialise, materialise_counted, read_scratch
from .tables import Tables, data_files
from .tokenizer import WorkerDecoder
from .tokens import decode_tokens

log = logging.getLogger(__name__)

SAMPLE_WINDOW_SCHEMA = "sample_id BIGINT, pos INT, ngram_hash BIGINT, bucket INT, anchor_hash BIGINT, anchor_rel INT"


# =========================================================================== kernels
def sample_windows_frame(sample_ids: np.ndarray, token_lists: list, hash_cfg: HashConfig,
                         bucket_bits: int, anchor_cfg: AnchorConfig, bucket_scheme: str = "low") -> pd.DataFrame:
    """Every n-window of every sample: its n-gram hash and its anchor (hash, offset in the
    window, bucket), vectorised over the batch."""
    arrays = [np.asarray(t if t is not None else [], dtype=np.int64) for t in token_lists]
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
    if len(arrays) == 0 or lengths.sum() == 0:
        return pd.DataFrame({"sample_id": pd.Series(dtype=np.int64), "pos": pd.Series(dtype=np.int32),
                             "ngram_hash": pd.Series(dtype=np.int64), "bucket": pd.Series(dtype=np.int32),
                             "anchor_hash": pd.Series(dtype=np.int64), "anchor_rel": pd.Series(dtype=np.int32)})
    tokens = np.concatenate(arrays)
    hashes, seq, offsets = hash_concatenated(tokens, lengths, hash_cfg)
    a_seq, a_pos, a_hash, a_rel = window_anchors(tokens, lengths, anchor_cfg)
    assert np.array_equal(a_seq, seq) and np.array_equal(a_pos, offsets), "window enumerations differ"
    return pd.DataFrame({
        "sample_id": np.asarray(sample_ids, dtype=np.int64)[seq],
        "pos": offsets.astype(np.int32),
        "ngram_hash": hashes,
        "bucket": bucket_of(a_hash, bucket_bits, bucket_scheme),
        "anchor_hash": a_hash,
        "anchor_rel": a_rel,
    })


_OUT_ROWS = 1 << 18


def _verified_frame(out_s, out_p, out_d, out_o) -> pd.DataFrame:
    return pd.DataFrame({"sample_id": np.asarray(out_s, dtype=np.int64), "pos": np.asarray(out_p, dtype=np.int32),
                         "doc_id": out_d, "doc_pos": np.asarray(out_o, dtype=np.int32)})


def verified_positions(sample_tokens: np.ndarray, doc_tokens: np.ndarray, diag: int,
                       positions: np.ndarray, n: int) -> np.ndarray:
    """Candidate window starts (one diagonal) whose n tokens equal the document's tokens
    at ``pos - diag``: one vectorised comparison per segment, not per window."""
    positions = np.asarray(positions, dtype=np.int64)
    lo, hi = int(positions.min()), int(positions.max()) + n
    d_lo, d_hi = lo - diag, hi - diag
    if d_lo < 0 or d_hi > len(doc_tokens) or hi > len(sample_tokens):
        ok = np.array([p - diag >= 0 and p - diag + n <= len(doc_tokens) and p + n <= len(sample_tokens)
                       and np.array_equal(sample_tokens[p:p + n], doc_tokens[p - diag:p - diag + n])
                       for p in positions], dtype=bool)
        return positions[ok]
    eq = (sample_tokens[lo:hi] == doc_tokens[d_lo:d_hi]).astype(np.int64)
    mismatches = np.concatenate([[0], np.cumsum(1 - eq)])
    rel = positions - lo
    return positions[(mismatches[rel + n] - mismatches[rel]) == 0]


def count_containing(passage: np.ndarray, doc_tokens: np.ndarray) -> bool:
    """Whether ``doc_tokens`` contains ``passage`` contiguously (aligned byte search)."""
    if len(passage) > len(doc_tokens):
        return False
    needle = passage.astype("<i4").tobytes()
    hay = doc_tokens.astype("<i4").tobytes()
    start = hay.find(needle)
    while start != -1:
        if start % 4 == 0:
            return True
        start = hay.find(needle, start + 1)
    return False


def low_entropy_reason(token_ids: np.ndarray, text: str, mc: MatchConfig) -> str | None:
    """Filler rule (documented in README): a passage is low-entropy when

    * its distinct-token share is below ``low_entropy_min_distinct_token_share`` (runs of
      one token or a short cycle: ``= = = =``, ``the the the``), or
    * its text compresses to less than ``low_entropy_max_compression_ratio`` of its UTF-8
      size with zlib (long runs of a character, repeated rows), or
    * fewer than ``low_entropy_min_alpha_share`` of its non-space characters are letters
      (number lists, separator tables, hex dumps).
    """
    ids = np.asarray(token_ids)
    if len(ids) and len(np.unique(ids)) / len(ids) < mc.low_entropy_min_distinct_token_share:
        return "repetitive_tokens"
    raw = text.encode("utf-8")
    if raw and len(zlib.compress(raw, 9)) / len(raw) < mc.low_entropy_max_compression_ratio:
        return "compressible"
    chars = [c for c in text if not c.isspace()]
    if chars and sum(c.isalpha() for c in chars) / len(chars) < mc.low_entropy_min_alpha_share:
        return "few_letters"
    return None


def is_prompt_copy(passage: np.ndarray, prompt: np.ndarray) -> bool:
    """A passage that only reproduces the sample's own prompt is not extraction: it is a
    contiguous part of the prompt, or made only of tokens the prompt contains (the
    repeated word of a divergence prompt and its punctuation)."""
    if prompt is None or len(prompt) == 0:
        return False
    if count_containing(passage, prompt):
        return True
    return bool(np.isin(passage, prompt).all())


def passage_id_of(token_ids) -> str:
    return hashlib.sha1(",".join(str(int(t)) for t in token_ids).encode("ascii")).hexdigest()


# =========================================================================== pipeline
class Matcher:
    """Runs the matching pipeline for DataFrames of ``(sample_id, token_ids, prompt_token_ids)``."""

    def __init__(self, spark, cfg: AuditConfig, tables: Tables, meta: IndexMeta, staging: str):
        self.spark = spark
        self.cfg = cfg
        self.tables = tables
        self.meta = meta
        self.index = NgramIndex(spark, cfg, tables)
        self.staging = staging
        self.stats: dict = {}

    # ---------------------------------------------------------------- candidates
    def sample_windows(self, sequences):
        hash_cfg, bucket_bits, anchor_cfg = self.meta.hash_config, self.meta.bucket_bits, self.meta.anchor_config
        scheme = self.meta.bucket_scheme

        def windows(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            for pdf in batches:
                yield sample_windows_frame(pdf["sample_id"].to_numpy(), list(pdf["token_ids"]), hash_cfg,
                                           bucket_bits, anchor_cfg, scheme)

        return sequences.select("sample_id", "token_ids").mapInPandas(windows, SAMPLE_WINDOW_SCHEMA)

    def corpus_hits(self, windows_path: str):
        """Corpus anchor rows for the distinct sample anchors, bucket group by bucket group,
        with doc ids, each anchor's document count and each document's rank by doc_id.

        Within a group the sample anchors are broadcast, so the corpus bucket files are
        scanned once and never shuffled."""
        from pyspark.sql import Observation, Window
        from pyspark.sql import functions as F

        windows = read_scratch(self.spark, windows_path, SAMPLE_WINDOW_SCHEMA)
        distinct = windows.select("bucket", "anchor_hash").distinct()
        per_bucket = {r["bucket"]: r["count"] for r in distinct.groupBy("bucket").count().collect()}
        total = sum(per_bucket.values())
        cap = self.cfg.match.broadcast_hashes_per_group
        groups: list[list[int]] = [[]]
        size = 0
        for bucket in sorted(per_bucket):
            if groups[-1] and size + per_bucket[bucket] > cap:
                groups.append([])
                size = 0
            groups[-1].append(bucket)
            size += per_bucket[bucket]
        raw_path = f"{self.staging}/anchor_hits"
        anchors = self.index.anchors()
        corpus = anchors.select("bucket", "anchor_hash", "doc_number", "offset")
        mode = "overwrite"
        read = {"index_rows_read": 0, "index_files_read": 0, "index_bytes_read": 0}
        for i, group in enumerate(g for g in groups if g):
            in_group = F.col("bucket").isin(group)
            scanned = Observation()
            scan = corpus.where(in_group).observe(scanned, F.count(F.lit(1)).alias("rows"))
            hits = scan.join(F.broadcast(distinct.where(in_group)), ["bucket", "anchor_hash"])
            hits.write.format("parquet").mode(mode).save(raw_path)
            mode = "append"
            rows = int(scanned.get.get("rows") or 0)
            files, size = data_files(anchors.where(in_group))
            read["index_rows_read"] += rows
            read["index_files_read"] += files
            read["index_bytes_read"] += size
            log.info("match: bucket group %d/%d (%d buckets, %d sample anchors) joined; index read: %d rows in "
                     "%d files, %.1f MB", i + 1, len(groups), len(group), sum(per_bucket[b] for b in group),
                     rows, files, size / 1e6)
        if mode == "overwrite":  # no sample windows at all
            corpus.limit(0).write.format("parquet").mode("overwrite").save(raw_path)
        raw = read_scratch(self.spark, raw_path, corpus.schema)
        # Documents ranked by doc_id, so the first K + 1 verified are the smallest ids (the
        # example documents of a bounded count), whatever order the build numbered them in.
        by_doc = Window.partitionBy("anchor_hash").orderBy("doc_id")
        per_anchor = Window.partitionBy("anchor_hash")
        ranked = (raw.join(self.index.doc_numbers().select("doc_number", "doc_id"), "doc_number")
                  .withColumn("doc_rank", F.dense_rank().over(by_doc))
                  .withColumn("anchor_docs", F.max("doc_rank").over(per_anchor)))
        hits = materialise(ranked.select("bucket", "anchor_hash", "doc_id", "offset", "doc_rank", "anchor_docs"),
                           f"{self.staging}/hits")
        self.stats.update(distinct_sample_anchors=int(total), bucket_groups=len([g for g in groups if g]), **read)
        return hits

    def explode_candidates(self, windows, hits):
        """``(sample_id, pos, doc_id, diag)`` for each window and candidate posting."""
        from pyspark.sql import functions as F

        start = F.col("offset") - F.col("anchor_rel")  # the window's start in the document
        return (windows.join(hits, ["bucket", "anchor_hash"]).where(start >= 0)
                .select("sample_id", "pos", "doc_id", (F.col("pos") - start).cast("int").alias("diag")))

    def documents_for(self, exploded):
        """Tokens of every document a candidate points to: the document table is filtered
        by a broadcast of the (few) needed ids, so it is scanned once, not shuffled."""
        from pyspark.sql import functions as F

        ids = exploded.select("doc_id").distinct()
        return (self.index.documents().select("doc_id", "token_bytes", "token_width")
                .join(F.broadcast(ids), "doc_id"))

    def verify(self, exploded, sequences, docs):
        """Verified windows ``(sample_id, pos, doc_id, doc_pos)`` from candidate postings."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        n = self.meta.n
        w = Window.partitionBy("sample_id", "doc_id", "diag").orderBy("pos")
        segments = (exploded.withColumn("seg", F.col("pos") - F.row_number().over(w))
                    .groupBy("sample_id", "doc_id", "diag", "seg")
                    .agg(F.collect_list("pos").alias("positions")))
        tokens = sequences.select("sample_id", "token_ids")
        joined = (segments.join(tokens.join(F.broadcast(segments.select("sample_id").distinct()), "sample_id"),
                                "sample_id")
                  .join(docs, "doc_id"))

        def check(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            for pdf in batches:
                out_s, out_p, out_d, out_o = [], [], [], []
                for sid, toks, did, blob, width, diag, positions in zip(
                        pdf["sample_id"], pdf["token_ids"], pdf["doc_id"], pdf["token_bytes"],
                        pdf["token_width"], pdf["diag"], pdf["positions"]):
                    ok = verified_positions(np.asarray(toks, dtype=np.int64),
                                            decode_tokens(blob, int(width)).astype(np.int64),
                                            int(diag), np.asarray(positions), n)
                    out_s.extend([sid] * len(ok))
                    out_p.extend(ok.tolist())
                    out_d.extend([did] * len(ok))
                    out_o.extend((ok - int(diag)).tolist())
                    if len(out_s) >= _OUT_ROWS:  # bounded Arrow batches, however long the segments
                        yield _verified_frame(out_s, out_p, out_d, out_o)
                        out_s, out_p, out_d, out_o = [], [], [], []
                if out_s:  # never an empty frame: pyspark cannot convert an empty object column
                    yield _verified_frame(out_s, out_p, out_d, out_o)

        return joined.mapInPandas(check, "sample_id BIGINT, pos INT, doc_id STRING, doc_pos INT")

    def window_counts(self, windows, verified, second_pass):
        """Per verified window: ``ngram_hash``, ``doc_count`` (exact when every posting of its
        anchor was verified, else the anchor's document count: an upper bound), the first
        ``index.max_postings`` verified documents, and whether that list is complete."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        k = self.meta.max_postings
        per_doc = verified.groupBy("sample_id", "pos", "doc_id").agg(F.min("doc_pos").alias("offset"))
        by_doc = Window.partitionBy("sample_id", "pos").orderBy("doc_id")
        per_window = Window.partitionBy("sample_id", "pos")
        first = (per_doc.withColumn("_rk", F.row_number().over(by_doc))
                 .withColumn("verified_docs", F.count(F.lit(1)).over(per_window))
                 .where(F.col("_rk") <= k)
                 .groupBy("sample_id", "pos")
                 .agg(F.first("verified_docs").alias("verified_docs"),
                      F.array_sort(F.collect_list(F.struct("doc_id", "offset"))).alias("postings")))
        info = windows.select("sample_id", "pos", "ngram_hash", "anchor_docs")
        complete = F.col("anchor_docs") <= F.lit(k + 1)  # every posting was in the first pass
        if second_pass is not None:  # or the second pass checked every further posting
            info = info.join(second_pass.withColumn("_second", F.lit(True)), ["sample_id", "pos"], "left")
            complete = complete | F.coalesce(F.col("_second"), F.lit(False))
        return (first.join(info, ["sample_id", "pos"])
                .select("sample_id", "pos", "ngram_hash",
                        F.when(complete, F.col("verified_docs")).otherwise(F.col("anchor_docs"))
                        .cast("bigint").alias("doc_count"),
                        "postings",
                        (complete & (F.col("verified_docs") <= F.lit(k))).alias("postings_complete")))

    @staticmethod
    def source_of_windows(verified):
        """One corpus location ``(doc_id, doc_pos)`` per verified window, so extracted text can be
        rolled up by source region: the document holding the longest verified chain of the
        window's sample on one diagonal (the copy the sample was following), ties by smallest
        doc_id and offset.  Duplicated corpus text is thus attributed to one copy."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        chain = Window.partitionBy("sample_id", "doc_id", "_diag")
        return (verified.withColumn("_diag", F.col("pos") - F.col("doc_pos"))
                .withColumn("_chain", F.count(F.lit(1)).over(chain))
                .groupBy("sample_id", "pos")
                .agg(F.min(F.struct((-F.col("_chain")).alias("c"), "doc_id", "doc_pos")).alias("_src"))
                .select("sample_id", "pos", "_src.doc_id", "_src.doc_pos"))

    # ---------------------------------------------------------------- passages
    def occurrences(self, verified_windows):
        """Maximal runs of covered positions per sample (gaps and islands over window starts)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        n = self.meta.n
        w = Window.partitionBy("sample_id").orderBy("pos")
        islands = (verified_windows
                   .withColumn("_new", F.coalesce((F.col("pos") > F.lag("pos").over(w) + n).cast("int"), F.lit(1)))
                   .withColumn("_island", F.sum("_new").over(w.rowsBetween(Window.unboundedPreceding, 0))))
        return (islands.groupBy("sample_id", "_island")
                .agg(F.min("pos").alias("start"), (F.max("pos") + n).alias("end"),
                     F.count(F.lit(1)).alias("n_windows"),
                     F.min_by(F.struct("doc_count", "postings", "postings_complete"), "doc_count").alias("rarest"))
                .drop("_island"))

    def passages(self, occurrences, sequences):
        """Occurrence token sequences, passage ids and prompt-copy flags."""
        from pyspark.sql import functions as F

        n = self.meta.n
        seq = sequences.select("sample_id", "token_ids", "prompt_token_ids")
        occ = occurrences.join(seq.join(F.broadcast(occurrences.select("sample_id").distinct()), "sample_id"),
                               "sample_id")

        def tag(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            for pdf in batches:
                ids, copies, seqs = [], [], []
                for toks, prompt, start, end in zip(pdf["token_ids"], pdf["prompt_token_ids"], pdf["start"],
                                                    pdf["end"]):
                    p = np.asarray(toks[start:end], dtype=np.int64)
                    seqs.append(p.astype(np.int32))
                    ids.append(passage_id_of(p))
                    copies.append(is_prompt_copy(p, np.asarray(prompt if prompt is not None else [],
                                                               dtype=np.int64)))
                out = pdf.drop(columns=["token_ids", "prompt_token_ids"])
                out["passage_id"] = ids
                out["passage_tokens"] = seqs
                out["is_prompt_copy"] = copies
                yield out

        schema = ("sample_id BIGINT, start INT, end INT, n_windows BIGINT, "
                  "rarest STRUCT<doc_count: BIGINT, postings: ARRAY<STRUCT<doc_id: STRING, offset: INT>>, "
                  "postings_complete: BOOLEAN>, passage_id STRING, passage_tokens ARRAY<INT>, "
                  "is_prompt_copy BOOLEAN")
        tagged = occ.select("sample_id", "start", "end", "n_windows", "rarest", "token_ids",
                            "prompt_token_ids").mapInPandas(tag, schema)
        return tagged.withColumn("all_windows_in_corpus",
                                 F.col("n_windows") == F.col("end") - F.col("start") - F.lit(n) + 1)

    def doc_counts(self, passage_rows, docs):
        """Exact document counts by substring search in the rarest n-gram's postings."""
        from pyspark.sql import functions as F

        candidates = (passage_rows.where("all_windows_in_corpus")
                      .select("passage_id", "passage_tokens", F.explode("rarest.postings.doc_id").alias("doc_id"))
                      .join(docs, "doc_id"))

        def contains(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            for pdf in batches:
                hit = [count_containing(np.asarray(p, dtype=np.int32), decode_tokens(b, int(w)))
                       for p, b, w in zip(pdf["passage_tokens"], pdf["token_bytes"], pdf["token_width"])]
                yield pd.DataFrame({"passage_id": pdf["passage_id"], "doc_id": pdf["doc_id"], "hit": hit})

        checked = candidates.mapInPandas(contains, "passage_id STRING, doc_id STRING, hit BOOLEAN")
        k = self.cfg.match.example_doc_ids
        return (checked.where("hit").groupBy("passage_id")
                .agg(F.count(F.lit(1)).alias("verified_docs"),
                     F.slice(F.array_sort(F.collect_list("doc_id")), 1, k).alias("example_doc_ids")))

    def describe(self, passages):
        """Decoded text, low-entropy flag and reason for each distinct passage."""
        mc = self.cfg.match
        decoder = WorkerDecoder(self.meta.tokenizer_path, clean_up=False)  # a bad tokenizer fails here

        def decode(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            for pdf in batches:
                texts = decoder.decode(list(pdf["token_ids"]))
                reasons = [low_entropy_reason(np.asarray(t), s, mc) for t, s in zip(pdf["token_ids"], texts)]
                yield pd.DataFrame({"passage_id": pdf["passage_id"], "text": texts,
                                    "is_low_entropy": [r is not None for r in reasons],
                                    "low_entropy_reason": reasons})

        return passages.select("passage_id", "token_ids").mapInPandas(
            decode, "passage_id STRING, text STRING, is_low_entropy BOOLEAN, low_entropy_reason STRING")


def match_sequences(spark, cfg: AuditConfig, sequences, staging: str, tables: Tables | None = None,
                    meta: IndexMeta | None = None):
    """Match arbitrary token sequences ``(sample_id, token_ids, prompt_token_ids)`` against the
    configured corpus; returns ``(occurrences, passages, verified_windows, stats)`` DataFrames
    (occurrences carry the passage flags).  Used by ``run_match`` and the chance baseline.
    ``meta``: the index's metadata when the caller already read it."""
    from pyspark.sql import functions as F

    tables = tables or Tables(spark, cfg)
    meta = meta or NgramIndex(spark, cfg, tables).require_meta()
    # Decode passages with this run's copy of the tokenizer (same ids, checked by fingerprint).
    meta = dataclasses.replace(meta, tokenizer_path=cfg.resolve(cfg.model.tokenizer_path) or meta.tokenizer_path)
    m = Matcher(spark, cfg, tables, meta, staging)
    if "prompt_token_ids" not in sequences.columns:
        sequences = sequences.withColumn("prompt_token_ids", F.array().cast("array<int>"))
    sequences = sequences.select("sample_id", "token_ids", "prompt_token_ids")

    windows_path = f"{staging}/sample_windows"
    windows = materialise(m.sample_windows(sequences).repartition("bucket"), windows_path, partition_by=("bucket",))
    hits = m.corpus_hits(windows_path)
    # First pass: each window against its anchor's first K + 1 documents.  A window verified
    # in K + 1 of them is in more than K documents (its count is a bound either way); one
    # verified in fewer, on an anchor with more documents, is checked against every further
    # posting in the second pass (boilerplate anchors lose no match).
    first_docs = meta.max_postings + 1
    first = m.explode_candidates(windows, hits.where(F.col("doc_rank") <= first_docs))
    docs = m.documents_for(first).persist()
    persisted = [docs]
    try:
        verified = materialise(m.verify(first, sequences, docs), f"{staging}/verified_first")
        found = verified.groupBy("sample_id", "pos").agg(F.countDistinct("doc_id").alias("_found"))
        frequent = hits.where(F.col("anchor_docs") > first_docs).select("anchor_hash").distinct()
        pending = (windows.join(frequent, "anchor_hash").join(found, ["sample_id", "pos"], "left")
                   .where(F.coalesce(F.col("_found"), F.lit(0)) < first_docs).drop("_found"))
        pending, pending_windows = materialise_counted(pending, f"{staging}/second_pass_windows")
        second_pass = None
        if pending_windows:
            second = m.explode_candidates(pending, hits.where(F.col("doc_rank") > first_docs))
            more_docs = m.documents_for(second).persist()
            persisted.append(more_docs)
            verified = verified.unionByName(m.verify(second, sequences, more_docs))
            first = first.unionByName(second)
            docs = docs.unionByName(more_docs).dropDuplicates(["doc_id"])
            second_pass = pending.select("sample_id", "pos")
        anchor_docs = hits.select("anchor_hash", "anchor_docs").distinct()
        candidates = m.window_counts(windows.join(anchor_docs, "anchor_hash"), verified, second_pass)
        verified_path = f"{staging}/verified"
        verified_windows, n_verified = materialise_counted(
            m.source_of_windows(verified).join(candidates, ["sample_id", "pos"]), verified_path)
        m.stats.update(candidate_windows=first.select("sample_id", "pos").distinct().count(),
                       second_pass_windows=int(pending_windows))

        occ_path = f"{staging}/occurrences"
        occ, n_occurrences = materialise_counted(m.passages(m.occurrences(verified_windows), sequences), occ_path)

        distinct = (occ.groupBy("passage_id")
                    .agg(F.first("passage_tokens").alias("token_ids"),
                         F.countDistinct("sample_id").alias("n_samples"),
                         F.count(F.lit(1)).alias("n_occurrences"),
                         F.min("is_prompt_copy").alias("is_prompt_copy"),
                         F.max("all_windows_in_corpus").alias("all_windows_in_corpus"),
                         F.first("rarest").alias("rarest")))
        counts = m.doc_counts(occ.dropDuplicates(["passage_id"]), docs)
        passages = (distinct.join(counts, "passage_id", "left")
                    .join(m.describe(distinct), "passage_id")
                    .select(
                        "passage_id", "token_ids", "text", F.size("token_ids").alias("n_tokens"), "n_samples",
                        "n_occurrences",
                        F.coalesce("verified_docs", F.lit(0)).cast("bigint").alias("doc_count"),
                        (~F.col("all_windows_in_corpus") | F.col("rarest.postings_complete")).alias(
                            "doc_count_is_exact"),
                        F.when(F.col("all_windows_in_corpus"), F.col("rarest.doc_count")).otherwise(F.lit(0))
                        .cast("bigint").alias("doc_count_upper_bound"),
                        F.coalesce("example_doc_ids", F.array().cast("array<string>")).alias("example_doc_ids"),
                        "is_low_entropy", "low_entropy_reason", "is_prompt_copy",
                        (F.coalesce("verified_docs", F.lit(0)) == 0).alias("is_stitched"),
                    ))
        passages_path = f"{staging}/passages"
        passages, n_passages = materialise_counted(passages, passages_path)
    finally:
        for frame in persisted:
            frame.unpersist()
    # Row counts observed by the scratch writes themselves, not by counting them again.
    stats = {**m.stats, "verified_windows": n_verified, "occurrences": n_occurrences, "passages": n_passages}
    return occ, passages, verified_windows, stats


# =========================================================================== run-level
def run_match(spark, cfg: AuditConfig, run_id: str, tables: Tables | None = None, run: dict | None = None,
              scratch: str | None = None) -> dict:
    """Match one run's samples and (re)write its findings tables; returns the step statistics."""
    from pyspark.sql import functions as F

    from .scratch import step_scratch

    t0 = time.time()
    tables = tables or Tables(spark, cfg)
    run = run if run is not None else _run_row(tables, run_id)
    if not run:
        raise UserFacingError(f"run {run_id!r} does not exist; generate or import samples first")
    index = NgramIndex(spark, cfg, tables)
    meta = index.check_tokenizer(run["tokenizer"]) if run.get("tokenizer") else index.require_meta()
    samples = tables.read("samples").where(F.col("run_id") == run_id)
    n_samples = samples.count()
    if n_samples == 0:
        raise UserFacingError(f"run {run_id!r} has no samples to match")
    scratch = scratch or step_scratch(cfg, run_id, "match")
    occ, passages, verified, stats = match_sequences(spark, cfg, samples, scratch, tables, meta)

    run_col = F.lit(run_id)
    tables.replace_run("passage_occurrences", occ.select(
        run_col.alias("run_id"), "sample_id", "start", "end", "passage_id", "is_prompt_copy"), run_id)

    family = run.get("model_family") or run.get("model")
    earlier = _first_seen(spark, tables, family, run_id)
    out = (passages.withColumn("run_id", run_col)
           .join(earlier, "passage_id", "left")
           .withColumn("first_seen_run_id", F.coalesce("first_seen_run_id", run_col))
           .withColumn("emission_rate", F.col("n_samples") / F.lit(n_samples)))
    tables.replace_run("extracted_passages", out, run_id)
    tables.replace_run("matched_windows", verified.select(run_col.alias("run_id"), "sample_id", "pos",
                                                          "ngram_hash", "doc_id", "doc_pos"), run_id)
    # occurrences and passages: the rows the scratch writes observed (the rows just written).
    stats.update(samples=n_samples, seconds=round(time.time() - t0, 2))
    log.info("match %s: %s", run_id, stats)
    return stats


def _run_row(tables: Tables, run_id: str) -> dict | None:
    from pyspark.sql import functions as F

    rows = tables.read("runs").where(F.col("run_id") == run_id).limit(1).collect()
    return rows[0].asDict(recursive=True) if rows else None


def _first_seen(spark, tables: Tables, family: str, run_id: str):
    """Earliest other run of the same model family (by start time) holding each passage."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    runs = tables.read("runs").where(F.coalesce("model_family", "model") == family).select("run_id", "started_at")
    prior = (tables.read("extracted_passages").where(F.col("run_id") != run_id)
             .select("run_id", "passage_id").join(runs, "run_id"))
    w = Window.partitionBy("passage_id").orderBy("started_at", "run_id")
    return (prior.withColumn("_r", F.row_number().over(w)).where("_r = 1")
            .select("passage_id", F.col("run_id").alias("first_seen_run_id")))
