"""Corpus index: build, incremental add, metadata, and the matcher's narrow interface.

Reads the corpus source (via ``corpus.py``) and ``corpus_documents``; writes
``corpus_documents``, ``corpus_anchors``, ``corpus_doc_numbers``, ``corpus_index`` and
``corpus_index_builds``.

Layout (``anchors``): per document only its winnowing anchors (``anchors.py``: the
minimum-hash k-gram of every window of w = n - k + 1 k-grams), one row each with the
k-gram hash, a dense integer document number and the offset; document ids live in the
side table ``corpus_doc_numbers``.  Rows are partitioned by ``(corpus_id, bucket)`` (low
``index.bucket_bits`` bits of the hash; the top bits in indexes of layout ``anchors``),
range-partitioned and sorted by hash within files, zstd-compressed.  Every verbatim
match of n or more tokens shares an anchor with each document that contains it, on the
match's diagonal, so the matcher joins the samples' anchors with this table and verifies
every candidate against the document's tokens.  No per-(document, n-gram) row and no
n-gram shuffle: a build costs the tokenization, one pass over the new tokens and a
shuffle of about 2/(w+1) rows per token.

Incremental and crash-safe: a build first appends the new documents (tokenized once) to
``corpus_documents`` tagged with a ``build_id`` and a ``doc_seq`` (their position in that
write), then numbers them densely (``corpus_doc_numbers``, replaced by build id: idempotent),
then appends their anchors in one Delta commit labelled with the build id (commit
``userMetadata``), then records the build.  A re-run finishes any build whose anchors
are not yet committed (found through the table history) and skips documents whose
``doc_id`` is already indexed, so re-indexing the same documents changes nothing.

Everything outside this module sees the index only through ``NgramIndex``.  Its
``ngrams()`` is the exact per-n-gram table (doc counts, first postings) computed from the
documents on demand, for the tests' brute-force comparisons and the probe draw.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from .config import AuditConfig
from .corpus import REJECT_REASONS, classify, read_raw, source_snapshot, tokenize_documents
from .errors import UserFacingError
from .anchors import AnchorConfig, select_anchors
from .hashing import HashConfig, bucket_of, hash_concatenated
from .ids import id_predicate
from .scratch import is_local_path
from .tables import Tables, data_files
from .tokenizer import check_model_location, load_tokenizer, same_tokenizer, tokenizer_fingerprint, vocab_size
from .tokens import decode_tokens, token_width_for_vocab

log = logging.getLogger(__name__)

NGRAM_ROW_SCHEMA = "bucket INT, ngram_hash BIGINT, doc_id STRING, offset INT, occurrences INT"
ANCHOR_ROW_SCHEMA = "bucket INT, anchor_hash BIGINT, doc_number INT, offset INT"
#: Layout of new indexes, and the layouts this version reads, with each one's bucket scheme
#: (``hashing.bucket_of``): ``anchors`` put an anchor in the bucket of its hash's top bits
#: (skewed, since anchors are window minima), ``anchors-v2`` in that of its low bits.
LAYOUT = "anchors-v2"
BUCKET_SCHEME_OF_LAYOUT = {"anchors": "top", "anchors-v2": "low"}
_ROW_BITS = 33  # monotonically_increasing_id: partition id above bit 33, row number below


@dataclass(frozen=True)
class IndexMeta:
    corpus_id: str
    tokenizer: str
    tokenizer_path: str
    n: int
    hash_bits: int
    bucket_bits: int
    max_postings: int
    token_width: int
    anchor_k: int = 0
    layout: str = LAYOUT

    @property
    def hash_config(self) -> HashConfig:
        return HashConfig(n=self.n, bits=self.hash_bits)

    @property
    def anchor_config(self) -> AnchorConfig:
        return AnchorConfig(n=self.n, k=self.anchor_k, bits=self.hash_bits)

    @property
    def bucket_scheme(self) -> str:
        return BUCKET_SCHEME_OF_LAYOUT[self.layout]


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


# --------------------------------------------------------------------------- kernels
def document_ngrams(doc_ids: list[str], token_arrays: list[np.ndarray], hash_cfg: HashConfig,
                    bucket_bits: int, bucket_scheme: str = "low") -> pd.DataFrame:
    """Distinct n-grams per document with occurrence count and first offset (vectorised).

    Windows never cross a document boundary (``hash_concatenated`` masks them)."""
    lengths = np.fromiter((len(t) for t in token_arrays), dtype=np.int64, count=len(token_arrays))
    if len(token_arrays) == 0 or lengths.sum() == 0:
        return pd.DataFrame({"bucket": pd.Series(dtype=np.int32), "ngram_hash": pd.Series(dtype=np.int64),
                             "doc_id": pd.Series(dtype=object), "offset": pd.Series(dtype=np.int32),
                             "occurrences": pd.Series(dtype=np.int32)})
    tokens = np.concatenate(token_arrays) if len(token_arrays) > 1 else token_arrays[0]
    hashes, seq, offsets = hash_concatenated(tokens, lengths, hash_cfg)
    frame = pd.DataFrame({"seq": seq, "ngram_hash": hashes, "offset": offsets})
    grouped = frame.groupby(["seq", "ngram_hash"], sort=False).agg(
        offset=("offset", "min"), occurrences=("offset", "size")).reset_index()
    ids = np.asarray(doc_ids, dtype=object)
    return pd.DataFrame({
        "bucket": bucket_of(grouped["ngram_hash"].to_numpy(), bucket_bits, bucket_scheme),
        "ngram_hash": grouped["ngram_hash"].to_numpy(np.int64),
        "doc_id": ids[grouped["seq"].to_numpy()],
        "offset": grouped["offset"].to_numpy(np.int32),
        "occurrences": grouped["occurrences"].to_numpy(np.int32),
    })


def ngram_rows(docs, meta: IndexMeta):
    """``corpus_documents`` rows -> one row per (document, distinct n-gram)."""
    hash_cfg, bucket_bits, width, scheme = meta.hash_config, meta.bucket_bits, meta.token_width, meta.bucket_scheme

    def explode(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in batches:
            arrays = [decode_tokens(b, width) for b in pdf["token_bytes"]]
            yield document_ngrams(pdf["doc_id"].tolist(), arrays, hash_cfg, bucket_bits, scheme)

    return docs.select("doc_id", "token_bytes").mapInPandas(explode, NGRAM_ROW_SCHEMA)


def document_anchors(doc_numbers: np.ndarray, token_arrays: list[np.ndarray], acfg: AnchorConfig,
                     bucket_bits: int, bucket_scheme: str = "low") -> pd.DataFrame:
    """Anchor rows of a batch of documents (vectorised over the whole batch)."""
    lengths = np.fromiter((len(t) for t in token_arrays), dtype=np.int64, count=len(token_arrays))
    tokens = np.concatenate(token_arrays) if len(token_arrays) else np.empty(0, dtype=np.int32)
    seq, offsets, hashes = select_anchors(tokens, lengths, acfg)
    return pd.DataFrame({
        "bucket": bucket_of(hashes, bucket_bits, bucket_scheme),
        "anchor_hash": hashes.astype(np.int64),
        "doc_number": np.asarray(doc_numbers, dtype=np.int32)[seq],
        "offset": offsets.astype(np.int32),
    })


def anchor_rows(docs, meta: IndexMeta):
    """``(doc_number, token_bytes, token_width)`` rows -> one row per anchor."""
    acfg, bucket_bits, scheme = meta.anchor_config, meta.bucket_bits, meta.bucket_scheme

    def explode(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in batches:
            arrays = [decode_tokens(b, int(w)) for b, w in zip(pdf["token_bytes"], pdf["token_width"])]
            yield document_anchors(pdf["doc_number"].to_numpy(), arrays, acfg, bucket_bits, scheme)

    return docs.select("doc_number", "token_bytes", "token_width").mapInPandas(explode, ANCHOR_ROW_SCHEMA)


def aggregate_ngrams(rows, meta: IndexMeta):
    """One row per hash: doc_count, occurrence_count and the first K postings.

    A window over the hash keeps only K postings per n-gram, so an n-gram found in
    millions of documents (a licence) never builds a million-element array."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    k = meta.max_postings
    key = Window.partitionBy("bucket", "ngram_hash")
    ranked = (rows.withColumn("_rk", F.row_number().over(key.orderBy("doc_id", "offset")))
              .withColumn("_docs", F.count(F.lit(1)).over(key))
              .withColumn("_occ", F.sum("occurrences").over(key)))
    return (ranked.where(F.col("_rk") <= k)
            .groupBy("bucket", "ngram_hash")
            .agg(F.first("_docs").cast("bigint").alias("doc_count"),
                 F.first("_occ").cast("bigint").alias("occurrence_count"),
                 F.array_sort(F.collect_list(F.struct("doc_id", "offset"))).alias("postings"))
            .withColumn("postings_complete", F.col("doc_count") <= F.lit(k))
            .withColumn("corpus_id", F.lit(meta.corpus_id))
            .withColumn("tokenizer", F.lit(meta.tokenizer))
            .withColumn("n", F.lit(meta.n)))


# --------------------------------------------------------------------------- the index
class NgramIndex:
    """The matcher's view of one corpus index (metadata, n-gram table, documents)."""

    def __init__(self, spark, cfg: AuditConfig, tables: Tables | None = None):
        self.spark = spark
        self.cfg = cfg
        self.tables = tables or Tables(spark, cfg)
        self.corpus_id = cfg.corpus.id

    def meta(self) -> IndexMeta | None:
        """The index's parameters; ``max_postings`` is the configured (match-time) value."""
        from pyspark.sql import functions as F

        rows = (self.tables.read("corpus_index").where(F.col("corpus_id") == self.corpus_id)
                .limit(1).collect())
        if not rows:
            return None
        r = rows[0]
        if r.layout not in BUCKET_SCHEME_OF_LAYOUT:
            raise UserFacingError(
                f"corpus {self.corpus_id!r} was indexed with an earlier layout (full n-gram table); this version "
                f"reads the anchor index: index the corpus again under a new corpus.id")
        return IndexMeta(r.corpus_id, r.tokenizer, r.tokenizer_path, r.n, r.hash_bits, r.bucket_bits,
                         self.cfg.index.max_postings, r.token_width, r.anchor_k, r.layout)

    def require_meta(self) -> IndexMeta:
        meta = self.meta()
        if meta is None:
            raise UserFacingError(
                f"corpus {self.corpus_id!r} has no index yet: run `extraction-audit index` first")
        return meta

    def anchors(self):
        from pyspark.sql import functions as F

        return self.tables.read("corpus_anchors").where(F.col("corpus_id") == self.corpus_id)

    def doc_numbers(self):
        from pyspark.sql import functions as F

        return self.tables.read("corpus_doc_numbers").where(F.col("corpus_id") == self.corpus_id)

    def ngrams(self):
        """The exact n-gram table (``bucket, ngram_hash, doc_count, occurrence_count,
        postings, postings_complete``), computed from the documents: one row per distinct
        n-gram with its first ``index.max_postings`` (doc_id, first offset) postings.  Costs
        a full pass and shuffle of the corpus's n-grams: for tests and the probe draw,
        never for matching."""
        meta = self.require_meta()
        return aggregate_ngrams(ngram_rows(self.documents(), meta), meta)

    def documents(self):
        from pyspark.sql import functions as F

        return self.tables.read("corpus_documents").where(F.col("corpus_id") == self.corpus_id)

    def check_tokenizer(self, fingerprint: str) -> IndexMeta:
        """The samples' tokenizer must be the index's, or every comparison is meaningless."""
        meta = self.require_meta()
        if not same_tokenizer(meta.tokenizer, fingerprint):
            raise UserFacingError(
                f"tokenizer mismatch: corpus {self.corpus_id!r} was indexed with {meta.tokenizer}, "
                f"but the run uses {fingerprint}; index the corpus with the target model's tokenizer "
                f"(new corpus.id) or use the matching model")
        return meta


# --------------------------------------------------------------------------- build
def resolve_meta(cfg: AuditConfig, existing: IndexMeta | None) -> IndexMeta:
    """Index parameters from config, checked against an existing index of the same corpus."""
    tok_path = check_model_location(cfg.resolve(cfg.model.tokenizer_path), "model.tokenizer (or model.path)")
    tok = load_tokenizer(tok_path)
    meta = IndexMeta(
        corpus_id=cfg.corpus.id,
        tokenizer=tokenizer_fingerprint(tok, cfg.model.tokenizer or cfg.model.path),
        tokenizer_path=tok_path,
        n=cfg.index.n,
        hash_bits=cfg.index.hash_bits,
        bucket_bits=cfg.index.bucket_bits,
        max_postings=cfg.index.max_postings,
        token_width=token_width_for_vocab(vocab_size(tok)),
        anchor_k=cfg.index.effective_anchor_k,
        layout=LAYOUT,
    )
    if existing is not None:
        for field in ("tokenizer", "n", "hash_bits", "bucket_bits", "anchor_k", "token_width"):
            old, new = getattr(existing, field), getattr(meta, field)
            if field == "tokenizer" and same_tokenizer(old, new):
                continue
            if old != new:
                raise UserFacingError(
                    f"corpus {cfg.corpus.id!r} is already indexed with {field}={old}, but the config gives "
                    f"{new}: an index cannot mix settings; use a new corpus.id to build a separate index")
        # An index keeps the layout it was started with: an earlier layout's buckets stay valid.
        meta = IndexMeta(**{**asdict(meta), "tokenizer": existing.tokenizer, "layout": existing.layout})
    return meta


def build_index(spark, cfg: AuditConfig, tables: Tables | None = None) -> dict:
    """Index new documents of the configured corpus; returns the build's statistics."""
    from pyspark.sql import functions as F

    started, t0 = _now(), time.time()
    tables = tables or Tables(spark, cfg)
    for name in ("corpus_documents", "corpus_anchors", "corpus_doc_numbers", "corpus_index", "corpus_index_builds"):
        tables.ensure(name)
    index = NgramIndex(spark, cfg, tables)
    stored = index.meta()
    meta = resolve_meta(cfg, stored)
    if stored is None:  # first build: the settings are recorded before any document is written
        _write_meta(spark, tables, meta)

    builds = _recorded_builds(tables, meta)
    finished_builds = _finish_pending_builds(spark, tables, meta, builds)
    # Taken before the source is read: a file changed during this build changes the next
    # build's fingerprint, so that build reads the source again.
    snapshot = source_snapshot(spark, cfg) if cfg.index.skip_unchanged_source else None
    unchanged_since = _build_of_snapshot(builds, snapshot) if snapshot and not finished_builds else None
    if unchanged_since:
        # Every record of this source was indexed (or rejected) by that build: reading it
        # again (a full scan of the corpus, every night) would find nothing new.
        _refresh_meta_counts(spark, tables, meta, added=False)
        stats = {"corpus_id": meta.corpus_id, "build_id": None, "records_read": 0, "documents_added": 0,
                 "documents_already_present": 0, "tokens_added": 0, "skipped": {},
                 "builds_finished_after_crash": [], "source_unchanged_since": unchanged_since,
                 "source_snapshot": snapshot, "seconds": round(time.time() - t0, 2)}
        log.info("index %s: source unchanged since build %s (same files, sizes and modification times); "
                 "nothing read, %.1fs", meta.corpus_id, unchanged_since, stats["seconds"])
        return stats

    # Each record marked with whether the corpus already holds its document, in the pass that
    # counts the rejects: a run that brings nothing new (a nightly audit of an unchanged
    # corpus) then writes no documents and commits nothing to corpus_documents.
    existing_ids = index.documents().select("doc_id").distinct().withColumn("_present", F.lit(True))
    classified = classify(read_raw(spark, cfg), cfg).join(existing_ids, "doc_id", "left").cache()
    build_id = f"build-{started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    try:
        by_state = (classified.groupBy("_reject", F.col("_present").isNotNull().alias("present")).count().collect())
        counts: dict = {}
        for r in by_state:
            counts[r["_reject"]] = counts.get(r["_reject"], 0) + r["count"]
        new = sum(r["count"] for r in by_state if r["_reject"] is None and not r["present"])
        records = int(sum(counts.values()))
        skipped = {reason: int(counts.get(reason, 0)) for reason in REJECT_REASONS if counts.get(reason)}
        if records == 0:
            raise UserFacingError(f"corpus {cfg.corpus.id!r}: the source has no records ({cfg.corpus.path})")
        already = int(counts.get(None, 0))
        if new:
            # Recorded before the documents: how a rerun finds a build that stopped after
            # writing them from this small table, instead of scanning every document's build_id.
            _record_builds_started(spark, tables, meta, [build_id], started)
            new_docs = classified.where(F.col("_reject").isNull() & F.col("_present").isNull()).drop("_present")
            tokenized = (tokenize_documents(new_docs, meta.tokenizer_path, meta.token_width)
                         .withColumn("corpus_id", F.lit(meta.corpus_id))
                         .withColumn("tokenizer", F.lit(meta.tokenizer))
                         .withColumn("build_id", F.lit(build_id))
                         .withColumn("ingested_at", F.lit(started))
                         .withColumn("doc_seq", F.monotonically_increasing_id()))
            tables.append("corpus_documents", tokenized, options=_labelled(build_id))
    finally:
        classified.unpersist()

    docs_added = tokens_added = anchors_added = 0
    if new and _committed_rows(tables, "corpus_documents", build_id):
        docs_added, tokens_added, anchors_added = _add_build_anchors(spark, tables, meta, build_id)
    already -= docs_added
    stats = {
        "corpus_id": meta.corpus_id,
        "build_id": build_id,
        "records_read": records,
        "documents_added": docs_added,
        "documents_already_present": already,
        "tokens_added": tokens_added,
        "skipped": skipped,
        "builds_finished_after_crash": finished_builds,
        "source_snapshot": snapshot,
        "seconds": round(time.time() - t0, 2),
    }
    _record_build(spark, tables, meta, {**stats, "anchors_added": anchors_added}, started)
    _refresh_meta_counts(spark, tables, meta, added=bool(docs_added or finished_builds))
    log.info("index %s: %d records, %d new documents (%d tokens), %d already indexed, skipped %s, %.1fs",
             meta.corpus_id, records, docs_added, tokens_added, already, skipped or "none", stats["seconds"])
    return stats


def _number_documents(spark, tables: Tables, meta: IndexMeta, build_id: str):
    """The build's documents with dense ``doc_number``s, written to ``corpus_doc_numbers``;
    returns them with the build's document and token counts.

    Numbers continue after the corpus's earlier builds: ``base + (rows of earlier write
    partitions) + row within partition``, all from the stored ``doc_seq``, so a re-run after
    a crash gives every document the same number (the side table is replaced by build id)."""
    from pyspark.sql import functions as F

    docs = (tables.read("corpus_documents")
            .where((F.col("corpus_id") == meta.corpus_id) & (F.col("build_id") == build_id)))
    earlier = (tables.read("corpus_doc_numbers")
               .where((F.col("corpus_id") == meta.corpus_id) & (F.col("build_id") != build_id))
               .agg(F.max("doc_number")).collect()[0][0])
    base = 0 if earlier is None else int(earlier) + 1
    part = F.shiftright("doc_seq", _ROW_BITS)
    # One row per Spark partition of the documents' write: small, collected; it also gives
    # the build's counts (no second pass over its documents).
    sizes = docs.groupBy(part.alias("part")).agg(
        F.max(F.col("doc_seq").bitwiseAND((1 << _ROW_BITS) - 1)).alias("last"),
        F.count(F.lit(1)).alias("docs"), F.sum("n_tokens").alias("tokens")).orderBy("part").collect()
    starts, total = [], base
    for row in sizes:
        starts.append((int(row["part"]), total))
        total += int(row["last"]) + 1
    if total > 2**31 - 1:
        raise UserFacingError(f"corpus {meta.corpus_id!r} would hold {total:,} documents: more than the anchor "
                              f"index's 32-bit document numbers allow; split it into several corpus ids")
    offsets = spark.createDataFrame(starts or [(0, 0)], "part BIGINT, start BIGINT")
    numbered = (docs.withColumn("part", part).join(F.broadcast(offsets), "part")
                .withColumn("doc_number", (F.col("start") + F.col("doc_seq").bitwiseAND((1 << _ROW_BITS) - 1))
                            .cast("int")))
    predicate = (f"{id_predicate('corpus_id', meta.corpus_id, 'corpus id')} AND "
                 f"{id_predicate('build_id', build_id, 'build id')}")
    tables._replace_where("corpus_doc_numbers", numbered.select("corpus_id", "doc_number", "doc_id", "build_id"),
                          predicate)
    counts = (sum(int(r["docs"]) for r in sizes), sum(int(r["tokens"] or 0) for r in sizes))
    return numbered, counts


def _add_build_anchors(spark, tables: Tables, meta: IndexMeta, build_id: str) -> tuple[int, int, int]:
    """Number one build's documents and append their anchors in one commit labelled
    ``build_id``; returns the build's (documents, tokens, anchors)."""
    from pyspark.sql import functions as F

    numbered, (docs, tokens) = _number_documents(spark, tables, meta, build_id)
    rows = anchor_rows(numbered, meta)
    parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    # Hash-partitioned by bucket (a range partitioner would run the anchor UDF twice: once
    # to sample), then sorted by hash: each file holds whole buckets in hash order.
    ordered = (rows.repartition(parts, "bucket")
               .sortWithinPartitions("bucket", "anchor_hash", "doc_number", "offset")
               .withColumn("corpus_id", F.lit(meta.corpus_id)))
    tables.append("corpus_anchors", ordered, options=_labelled(build_id))
    return docs, tokens, _committed_rows(tables, "corpus_anchors", build_id) or 0


def _labelled(build_id: str) -> dict[str, str]:
    """Writer options: zstd, and ``build_id`` as the commit's ``userMetadata``: how a re-run
    finds what a crashed build committed, and how a build reads its row counts back from its
    own commit instead of counting the table.  A writer option, not the session setting, so
    commits made meanwhile by other threads of the session are not labelled."""
    return {"compression": "zstd", "userMetadata": build_id}


def _committed_rows(tables: Tables, name: str, build_id: str) -> int | None:
    """Rows written by the commit of ``name`` labelled ``build_id`` (its operation metrics,
    read from the Delta log on the driver, no job); None when there is no such commit."""
    from pyspark.sql import functions as F

    table = tables.delta(name)
    for history in (table.history(8), table.history()):
        rows = (history.where(F.col("userMetadata") == build_id)
                .select(F.col("operationMetrics").getItem("numOutputRows").alias("rows")).collect())
        if rows:
            return int(rows[0]["rows"] or 0)
    return None


def _anchor_commits(tables: Tables) -> dict[str, int]:
    """``{build_id: rows}`` of every labelled ``corpus_anchors`` commit in the table history."""
    from pyspark.sql import functions as F

    hist = (tables.delta("corpus_anchors").history().where(F.col("userMetadata").isNotNull())
            .select("userMetadata", F.col("operationMetrics").getItem("numOutputRows").alias("rows")))
    return {r["userMetadata"]: int(r["rows"] or 0) for r in hist.collect()}


def _recorded_builds(tables: Tables, meta: IndexMeta) -> list[dict]:
    """The corpus's rows of ``corpus_index_builds`` (one small row per build), read once."""
    from pyspark.sql import functions as F

    rows = (tables.read("corpus_index_builds").where(F.col("corpus_id") == meta.corpus_id)
            .select("build_id", "state", "source_snapshot", "started_at", "finished_at").collect())
    return [r.asDict() for r in rows]


def _pending_build_ids(tables: Tables, meta: IndexMeta, builds: list[dict]) -> list[str]:
    """Builds that may have written documents without being recorded done.

    Every build of this version records itself ``started`` before its documents, so once a
    corpus has such a row the started ones are all there is to look at.  A corpus whose
    builds were all recorded by an earlier version (``state`` NULL) may hold documents of a
    build that stopped before recording itself: only its documents name it, so they are
    scanned, once (the first build of this version finishes them before it records its
    own start)."""
    from pyspark.sql import functions as F

    if any(b["state"] is not None for b in builds):
        return sorted(b["build_id"] for b in builds if b["state"] == "started")
    recorded = {b["build_id"] for b in builds}
    written = (tables.read("corpus_documents").where(F.col("corpus_id") == meta.corpus_id)
               .select("build_id").distinct().collect())
    return sorted(r[0] for r in written if r[0] not in recorded)


def _finish_pending_builds(spark, tables: Tables, meta: IndexMeta, builds: list[dict]) -> list[str]:
    """Finish builds that stopped after writing their documents (a crash): their anchors
    are added unless their anchor commit is there, and they are recorded done.  A started
    build none of whose documents are stored stopped before writing them: recorded
    abandoned.  Returns the builds finished."""
    from pyspark.sql import functions as F

    pending = _pending_build_ids(tables, meta, builds)
    legacy = all(b["state"] is None for b in builds)
    if legacy and pending:
        # Found by the scan: recorded started first, so a crash while finishing them leaves
        # them where the next build looks.
        _record_builds_started(spark, tables, meta, pending, _now())
    finished = _finish_builds(spark, tables, meta, builds, pending) if pending else []
    if builds and legacy:
        # Recorded by an earlier version: marked done, so the next build reads this table
        # instead of scanning the documents.
        tables.update("corpus_index_builds", (F.col("corpus_id") == meta.corpus_id) & F.col("state").isNull(),
                      {"state": F.lit("done")})
    return finished


def _finish_builds(spark, tables: Tables, meta: IndexMeta, builds: list[dict], pending: list[str]) -> list[str]:
    from pyspark.sql import functions as F

    started_at = {b["build_id"]: b["started_at"] for b in builds}
    merged = _anchor_commits(tables)
    finished = []
    for build_id in pending:
        # Each documents file holds one build (one append), so its build_id statistics let
        # Delta skip every other build's files.
        docs_of_build = tables.read("corpus_documents").where(
            (F.col("corpus_id") == meta.corpus_id) & (F.col("build_id") == build_id))
        if build_id in merged:
            added = docs_of_build.agg(F.count(F.lit(1)).alias("d"), F.sum("n_tokens").alias("t")).collect()[0]
            docs, tokens, anchors = int(added["d"]), int(added["t"] or 0), merged[build_id]
        elif not docs_of_build.limit(1).collect():
            log.warning("index build %s stopped before writing documents: recorded abandoned", build_id)
            _record_build(spark, tables, meta, {
                "build_id": build_id, "records_read": 0, "documents_added": 0, "documents_already_present": 0,
                "tokens_added": 0, "anchors_added": 0, "skipped": {}, "seconds": 0.0},
                started_at.get(build_id) or _now(), state="abandoned")
            continue
        else:
            log.warning("finishing interrupted index build %s", build_id)
            docs, tokens, anchors = _add_build_anchors(spark, tables, meta, build_id)
        _record_build(spark, tables, meta, {
            "build_id": build_id, "records_read": 0, "documents_added": docs,
            "documents_already_present": 0, "tokens_added": tokens, "anchors_added": anchors,
            "skipped": {"finished_after_crash": 0}, "seconds": 0.0}, started_at.get(build_id) or _now())
        finished.append(build_id)
    return finished


def _build_of_snapshot(builds: list[dict], snapshot: str) -> str | None:
    """The latest build of this corpus recorded done that read the source in this state."""
    done = [b for b in builds if b["source_snapshot"] == snapshot and b["state"] in (None, "done")]
    return max(done, key=lambda b: b["finished_at"])["build_id"] if done else None


def _record_builds_started(spark, tables: Tables, meta: IndexMeta, build_ids: list[str], started: datetime) -> None:
    """Append the builds' ``started`` rows (ids with no row yet: nothing to match, so an
    append, which no other writer's commit conflicts with)."""
    from .tables import CORPUS_INDEX_BUILDS

    rows = [{"corpus_id": meta.corpus_id, "build_id": build_id, "started_at": started, "finished_at": None,
             "records_read": 0, "documents_added": 0, "documents_already_present": 0, "tokens_added": 0,
             "skipped": {}, "seconds": None, "anchors_added": 0, "source_snapshot": None, "state": "started"}
            for build_id in build_ids]
    tables.append("corpus_index_builds", spark.createDataFrame(rows, CORPUS_INDEX_BUILDS.schema))


def _record_build(spark, tables: Tables, meta: IndexMeta, stats: dict, started: datetime,
                  state: str = "done") -> None:
    """Record the build (a keyed MERGE: it replaces the build's ``started`` row)."""
    from .tables import CORPUS_INDEX_BUILDS

    row = {
        "corpus_id": meta.corpus_id, "build_id": stats["build_id"], "started_at": started,
        "finished_at": _now(), "records_read": stats["records_read"],
        "documents_added": stats["documents_added"],
        "documents_already_present": stats["documents_already_present"],
        "tokens_added": stats["tokens_added"], "skipped": stats["skipped"], "seconds": stats["seconds"],
        "anchors_added": stats.get("anchors_added"), "source_snapshot": stats.get("source_snapshot"),
        "state": state,
    }
    tables.merge("corpus_index_builds", spark.createDataFrame([row], CORPUS_INDEX_BUILDS.schema))


def _write_meta(spark, tables: Tables, meta: IndexMeta) -> None:
    """Record a new corpus's settings (insert if absent); its totals follow its builds."""
    from .tables import CORPUS_INDEX

    row = {**asdict(meta), "documents": 0, "tokens": 0, "distinct_ngrams": None, "anchors": 0,
           "updated_at": _now()}
    tables.merge("corpus_index", spark.createDataFrame([row], CORPUS_INDEX.schema), update=False)


def _still_holds_a_tokenizer(path: str | None) -> bool:
    """A recorded tokenizer path is kept while it can still be used: a local folder that
    still exists, or a remote location (not checked from the driver)."""
    if not path:
        return False
    if not is_local_path(path):
        return True
    return Path(path.removeprefix("file://").removeprefix("file:")).is_dir()


def _refresh_meta_counts(spark, tables: Tables, meta: IndexMeta, added: bool = True) -> None:
    """The corpus totals, summed over its recorded builds (one small row each): a build
    never re-counts the corpus's documents or anchors.  Builds recorded before
    ``anchors_added`` existed are counted from the table once.  The row is rewritten only
    when something changed (``added``: this build added documents or finished a crashed
    one; else only the settings can differ)."""
    from pyspark.sql import functions as F

    columns = ("documents", "tokens", "anchors", "max_postings", "tokenizer_path")
    stored = (tables.read("corpus_index").where(F.col("corpus_id") == meta.corpus_id)
              .select(*columns).limit(1).collect())
    stored = stored[0].asDict() if stored else None
    settings = {"max_postings": int(meta.max_postings), "tokenizer_path": meta.tokenizer_path}
    if stored and _still_holds_a_tokenizer(stored["tokenizer_path"]):
        # The same tokenizer (resolve_meta checked its fingerprint) reached through another
        # path, as the demo's target and control models each carry a copy: the recorded path
        # stays, or audits alternating between the two would rewrite the row every run.
        settings["tokenizer_path"] = stored["tokenizer_path"]
    if not added and stored and all(stored[k] == v for k, v in settings.items()):
        return  # a build that added nothing: no UPDATE commit, updated_at stays
    builds = (tables.read("corpus_index_builds").where(F.col("corpus_id") == meta.corpus_id)
              .agg(F.sum("documents_added").alias("d"), F.sum("tokens_added").alias("t"),
                   F.sum("anchors_added").alias("a"),
                   F.count(F.when(F.col("anchors_added").isNull(), 1)).alias("unknown")).collect()[0])
    anchors = int(builds["a"] or 0)
    if builds["unknown"]:
        anchors = tables.read("corpus_anchors").where(F.col("corpus_id") == meta.corpus_id).count()
    values = {"documents": int(builds["d"] or 0), "tokens": int(builds["t"] or 0), "anchors": anchors, **settings}
    if stored == values:
        return
    from .tables import CORPUS_INDEX

    types = {c: t for c, t, _ in CORPUS_INDEX.columns}
    tables.update("corpus_index", F.col("corpus_id") == meta.corpus_id,
                  {**{k: F.lit(v).cast(types[k]) for k, v in values.items()},
                   "updated_at": F.lit(_now()).cast("timestamp")})


def corpus_stats(spark, cfg: AuditConfig, tables: Tables | None = None, count_ngrams: bool = False) -> dict:
    """Index metadata and size: rows, bytes on disk, bytes per corpus token.
    ``count_ngrams``: also count the corpus's distinct n-grams (a full pass over its tokens)."""
    from pyspark.sql import functions as F

    tables = tables or Tables(spark, cfg)
    index = NgramIndex(spark, cfg, tables)
    meta = index.require_meta()
    row = tables.read("corpus_index").where(F.col("corpus_id") == cfg.corpus.id).collect()[0].asDict()

    def bytes_of(name: str) -> int:
        return data_files(tables.read(name).where(F.col("corpus_id") == cfg.corpus.id))[1]

    anchor_bytes, number_bytes = bytes_of("corpus_anchors"), bytes_of("corpus_doc_numbers")
    doc_bytes = bytes_of("corpus_documents")
    index_bytes = anchor_bytes + number_bytes
    builds = (tables.read("corpus_index_builds").where(F.col("corpus_id") == cfg.corpus.id)
              .orderBy("started_at").collect())
    tokens = row["tokens"] or 0
    distinct = row["distinct_ngrams"]
    if count_ngrams:
        distinct = index.ngrams().count()
    return {
        **{k: row[k] for k in ("corpus_id", "layout", "tokenizer", "tokenizer_path", "n", "anchor_k", "hash_bits",
                               "bucket_bits", "token_width", "documents", "tokens", "anchors")},
        "anchor_window": meta.anchor_config.w,
        "max_postings": cfg.index.max_postings,
        "distinct_ngrams": distinct,
        "updated_at": str(row["updated_at"]),
        "anchor_table_bytes": anchor_bytes,
        "doc_number_table_bytes": number_bytes,
        "index_table_bytes": index_bytes,
        "document_table_bytes": doc_bytes,
        "anchors_per_token": round(row["anchors"] / tokens, 4) if tokens and row["anchors"] is not None else None,
        "index_bytes_per_token": round(index_bytes / tokens, 3) if tokens else None,
        "document_bytes_per_token": round(doc_bytes / tokens, 3) if tokens else None,
        "builds": [{"build_id": b.build_id, "documents_added": b.documents_added,
                    "documents_already_present": b.documents_already_present,
                    "tokens_added": b.tokens_added, "skipped": dict(b.skipped or {}), "seconds": b.seconds,
                    "state": b.state or "done"}
                   for b in builds],
        "hash": asdict(meta.hash_config),
    }
