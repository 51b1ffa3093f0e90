"""The stratified random draw of probe positions, from the index (Spark).

Unit: a distinct continuation.  Every row of the index's exact n-gram table
(``NgramIndex.ngrams()``, computed from the documents) is an n-gram with its document
count and up to ``index.max_postings`` (document, first offset) pointers; a pointer at
offset ``prefix_tokens`` (``probe.positions: document_start``, the model-card convention:
the prompt is the document's opening) or at any offset with room for ``prefix_tokens``
before it (``anywhere``), and ``suffix_tokens`` from it, is a drawable probe (prompt = the
tokens before it, target = the tokens from it).  Each n-gram
contributes one pointer (the one with the smallest seeded key), so a licence repeated in
a thousand documents is one candidate of the ``100+`` class, not a thousand.  Strata are
(document source, document-count class of the continuation); each gets
``probe.per_stratum`` probes (all of it when smaller), chosen by a second seeded hash of
the n-gram: the draw is a pure function of (``probe.seed``, the index), so every run and
its control probe the same positions, and a resumed run draws the same plan.

Cost: the n-gram table computed from the documents (a pass and shuffle of the
corpus's n-grams) with its postings exploded, joined with the
documents' (doc_id, source, n_tokens); the per-stratum top-k runs after a per-stratum
threshold keeps about ``4 x per_stratum`` rows, so no window ever holds a whole stratum.
Token ids are then read for the drawn documents only (broadcast semi-join).

Reads ``corpus_documents``; writes nothing (the stage persists the plan
in its scratch folder).
"""

from __future__ import annotations

from ..config import AuditConfig
from ..errors import UserFacingError
from .kernels import class_column

_U_SCALE = float(1 << 53)
PLAN_COLUMNS = ("probe_id", "doc_id", "source", "start", "ngram_hash", "suffix_doc_count", "doc_count_class",
                "stratum_size", "seed")


def _uniform(*cols):
    """A seeded uniform [0, 1) number from a hash of ``cols`` (Spark Column)."""
    from pyspark.sql import functions as F

    return (F.xxhash64(*cols).bitwiseAND(F.lit((1 << 53) - 1)).cast("double") / F.lit(_U_SCALE))


def candidates(cfg: AuditConfig, ngrams, documents):
    """One drawable (document, offset) per n-gram, with its stratum and the draw key ``u``."""
    from pyspark.sql import functions as F

    p, s = cfg.probe.prefix_tokens, cfg.probe.suffix_tokens
    seed = F.lit(int(cfg.probe.seed))
    posts = (ngrams.select("ngram_hash", "doc_count", F.explode("postings").alias("p"))
             .select("ngram_hash", "doc_count", F.col("p.doc_id").alias("doc_id"), F.col("p.offset").alias("offset")))
    docs = documents.select("doc_id", F.coalesce(F.col("source"), F.lit("")).alias("source"), "n_tokens")
    ok = (posts.join(docs, "doc_id")
          .where(((F.col("offset") == p) if cfg.probe.positions == "document_start" else (F.col("offset") >= p))
                 & (F.col("offset") + s <= F.col("n_tokens")))
          .withColumn("key", F.xxhash64(seed, F.lit("posting"), F.col("ngram_hash"), F.col("doc_id"))))
    one = (ok.groupBy("ngram_hash")
           .agg(F.min(F.struct("key", "doc_id", "offset", "source", "doc_count")).alias("c"))
           .select("ngram_hash", "c.doc_id", "c.offset", "c.source", F.col("c.doc_count").alias("suffix_doc_count")))
    return (one.withColumn("doc_count_class", class_column(F.col("suffix_doc_count"), cfg.probe.class_edges))
            .withColumn("u", _uniform(seed, F.lit("draw"), F.col("ngram_hash"))))


def draw(spark, cfg: AuditConfig, ngrams, documents):
    """The drawn probes (``PLAN_COLUMNS``) and the stratum sizes (pandas: source,
    doc_count_class, size, drawn)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    k = int(cfg.probe.per_stratum)
    cand = candidates(cfg, ngrams, documents).persist()
    sizes = cand.groupBy("source", "doc_count_class").agg(F.count(F.lit(1)).alias("size")).toPandas()
    wanted = int(sizes["size"].clip(upper=k).sum()) if len(sizes) else 0
    if wanted > cfg.probe.max_probes:
        raise UserFacingError(
            f"the probe draw would take {wanted:,} probes ({len(sizes)} strata x up to {k} per stratum), over "
            f"probe.max_probes={cfg.probe.max_probes:,}; lower probe.per_stratum or raise probe.max_probes")
    # Keep about 4k + 20 rows per stratum before the exact top-k (a stratum that comes up
    # short, which is vanishingly rare, is redone with everything).
    sizes["threshold"] = ((4 * k + 20) / sizes["size"].clip(lower=1)).clip(upper=1.0)
    thresholds = spark.createDataFrame(sizes[["source", "doc_count_class", "threshold", "size"]])
    kept = cand.join(F.broadcast(thresholds), ["source", "doc_count_class"]).where(F.col("u") < F.col("threshold"))
    short = kept.groupBy("source", "doc_count_class").count().toPandas()
    merged = sizes.merge(short, on=["source", "doc_count_class"], how="left").fillna({"count": 0})
    redo = merged[merged["count"] < merged["size"].clip(upper=k)]
    if len(redo):
        sizes.loc[sizes.set_index(["source", "doc_count_class"]).index.isin(
            redo.set_index(["source", "doc_count_class"]).index), "threshold"] = 1.0
        thresholds = spark.createDataFrame(sizes[["source", "doc_count_class", "threshold", "size"]])
        kept = cand.join(F.broadcast(thresholds), ["source", "doc_count_class"]).where(F.col("u") < F.col("threshold"))
    order = Window.partitionBy("source", "doc_count_class").orderBy("u", "ngram_hash")
    chosen = (kept.withColumn("rank", F.row_number().over(order)).where(F.col("rank") <= k)
              .withColumn("start", F.col("offset") - F.lit(cfg.probe.prefix_tokens))
              .withColumn("probe_id", F.xxhash64(F.col("doc_id"), F.col("start")))
              .withColumn("seed", F.xxhash64(F.lit(int(cfg.probe.seed)), F.lit("sampled"), F.col("probe_id")))
              .withColumnRenamed("size", "stratum_size")
              .select(*PLAN_COLUMNS))
    sizes["drawn"] = sizes["size"].clip(upper=k)
    return chosen, cand, sizes.drop(columns=["threshold"])


def with_tokens(cfg: AuditConfig, chosen, documents, hash_cfg):
    """Adds prefix_token_ids, suffix_token_ids and suffix_hashes (every index.n-gram hash of
    the suffix) to the drawn probes, reading only the drawn documents."""
    from pyspark.sql import functions as F

    p, s = cfg.probe.prefix_tokens, cfg.probe.suffix_tokens
    docs = documents.select("doc_id", "token_bytes", "token_width").join(
        F.broadcast(chosen.select("doc_id").distinct()), "doc_id")
    w = F.col("token_width").cast("int")
    sliced = chosen.join(docs, "doc_id").select(
        *PLAN_COLUMNS, "token_width",
        F.col("token_bytes").substr(F.col("start") * w + 1, F.lit(p) * w).alias("prefix_bytes"),
        F.col("token_bytes").substr((F.col("start") + p) * w + 1, F.lit(s) * w).alias("suffix_bytes"))
    ddl = ", ".join(f"{c} {t}" for c, t in (
        ("probe_id", "BIGINT"), ("doc_id", "STRING"), ("source", "STRING"), ("start", "INT"), ("ngram_hash", "BIGINT"),
        ("suffix_doc_count", "BIGINT"), ("doc_count_class", "STRING"), ("stratum_size", "BIGINT"), ("seed", "BIGINT"),
        ("prefix_token_ids", "ARRAY<INT>"), ("suffix_token_ids", "ARRAY<INT>"), ("suffix_hashes", "ARRAY<BIGINT>")))

    def decode(batches):
        import numpy as np

        from ..hashing import hash_concatenated
        from ..tokens import decode_tokens

        for pdf in batches:
            prefixes = [decode_tokens(b, int(wd)) for b, wd in zip(pdf["prefix_bytes"], pdf["token_width"])]
            suffixes = [decode_tokens(b, int(wd)) for b, wd in zip(pdf["suffix_bytes"], pdf["token_width"])]
            lengths = np.array([len(x) for x in suffixes], dtype=np.int64)
            hashes, seq, _ = hash_concatenated(np.concatenate(suffixes) if suffixes else np.empty(0, np.int32),
                                               lengths, hash_cfg)
            split = np.split(hashes, np.cumsum(np.bincount(seq, minlength=len(suffixes)))[:-1]) if len(suffixes) else []
            out = pdf[list(PLAN_COLUMNS)].copy()
            out["prefix_token_ids"] = [x.tolist() for x in prefixes]
            out["suffix_token_ids"] = [x.tolist() for x in suffixes]
            out["suffix_hashes"] = [x.tolist() for x in split]
            yield out

    return sliced.mapInPandas(decode, ddl)
