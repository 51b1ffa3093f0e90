"""Chance baseline: how much held-out human text the same matcher calls "extracted".

Boilerplate (licences, legal notices, common phrases) can match the corpus without any
memorisation.  Running the matcher over text the model never produced and that is not in
the corpus (``report.holdout_source``; the demo holds out part of its synthetic corpus)
gives the share of >= n-token matches expected by chance, shown beside the model's share.

The held-out text is tokenized with the target tokenizer (``mapInPandas``, tokenizer
loaded once per worker) and cut into sequences of ``report.holdout_sequence_tokens``
tokens (default: ``generation.sampling.max_new_tokens``, the length of a sample), so each
sequence plays the part of one sample.  Matching is injected (``match_fn``) so this
module does not depend on how the matching stage is built.

Reads: the held-out text file(s).  Writes: ``chance_baseline`` (merge by run_id, source);
the report step records the figures in ``run_steps``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd

from ..config import AuditConfig
from ..errors import UserFacingError

MatchTokenSequences = Callable[..., object]
"""``match_fn(spark, cfg, sequences_df) -> occurrences_df``.

``sequences_df``: ``sequence_id BIGINT, token_ids ARRAY<INT>`` (one row per sequence).
``occurrences_df``: one row per passage occurrence under the match semantics of
TABLES.md (maximal runs of covered positions, verified token by token), with columns
``sequence_id BIGINT, start INT, end INT`` (exclusive) and, when the matcher knows them,
``is_low_entropy BOOLEAN`` (missing: treated as false) and ``passage_id STRING``
(missing: distinct passages are not reported)."""


def default_sequence_matcher(scratch: str) -> MatchTokenSequences:
    """``match_fn`` backed by the matching stage (``extraction_audit.match.match_sequences``),
    so the baseline uses exactly the run's match rule, verification and filler flags."""
    try:
        from ..match import match_sequences
    except ImportError as err:
        raise UserFacingError(f"the chance baseline needs the matching stage (extraction_audit.match): {err}") from None

    def match_with_matching_stage(spark, cfg: AuditConfig, sequences_df):
        from pyspark.sql import functions as F

        sequences = sequences_df.select(F.col("sequence_id").alias("sample_id"), "token_ids")
        occurrences, passages, _, _ = match_sequences(spark, cfg, sequences, scratch)
        flags = passages.select("passage_id", "is_low_entropy")
        return (occurrences.join(flags, "passage_id", "left")
                .select(F.col("sample_id").alias("sequence_id"), "start", "end", "passage_id", "is_low_entropy"))

    return match_with_matching_stage


def read_holdout_text(spark, cfg: AuditConfig, source: str):
    """One column ``text`` from JSONL/JSON (``holdout_text_column``), Parquet, or plain
    text (one document per line)."""
    from pyspark.sql import functions as F

    path = cfg.resolve(source)
    if "://" not in path and not path.startswith("dbfs:") and not Path(path).exists():
        raise UserFacingError(f"report.holdout_source: {source!r} does not exist")
    column = cfg.report.holdout_text_column
    lower = path.lower().rstrip("/")
    if lower.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        df = spark.read.json(path)
    elif lower.endswith(".parquet"):
        df = spark.read.parquet(path)
    else:
        return spark.read.text(path).select(F.col("value").alias("text")).where(F.length("text") > 0)
    if column not in df.columns:
        raise UserFacingError(f"report.holdout_text_column: no column {column!r} in {source} "
                              f"(columns: {', '.join(df.columns)})")
    return df.select(F.col(column).cast("string").alias("text")).where(F.col("text").isNotNull())


def holdout_sequences(spark, cfg: AuditConfig, texts_df, sequence_tokens: int | None = None):
    """``text`` rows -> ``sequence_id BIGINT, token_ids ARRAY<INT>``: each text tokenized
    whole (no special tokens) and cut into chunks of ``sequence_tokens`` tokens.

    ``sequence_id`` is ``xxhash64(text, chunk index)``: deterministic across re-runs.  Repeated
    texts are matched once (a duplicated held-out document says nothing new about chance)."""
    from ..tokenizer import encode_batch, load_tokenizer

    tokenizer_path = cfg.resolve(cfg.model.tokenizer_path)
    length = int(sequence_tokens or cfg.report.holdout_sequence_tokens or cfg.generation.sampling.max_new_tokens)

    def tokenize(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        tok = load_tokenizer(tokenizer_path)
        for pdf in batches:
            texts, chunks = [], []
            for text, ids in zip(pdf["text"].tolist(), encode_batch(tok, pdf["text"].tolist())):
                for k in range(0, len(ids), length):
                    texts.append(text)
                    chunks.append((k // length, list(ids[k:k + length])))
            yield pd.DataFrame({"text": texts, "chunk": [c for c, _ in chunks],
                                "token_ids": [ids for _, ids in chunks]})

    from pyspark.sql import functions as F

    tokenized = texts_df.select("text").dropDuplicates(["text"]).mapInPandas(tokenize, "text STRING, chunk INT, token_ids ARRAY<INT>")
    return tokenized.select(F.xxhash64("text", "chunk").alias("sequence_id"), "token_ids")


def compute_chance_baseline(spark, cfg: AuditConfig, run_id: str, match_fn: MatchTokenSequences | None = None,
                            source: str | None = None, sequences_df=None, scratch: str | None = None) -> dict:
    """Match held-out sequences, write the ``chance_baseline`` row for ``run_id``, return it.

    ``sequences_df`` (``sequence_id, token_ids``) skips reading and tokenizing ``source``
    (then ``source`` is only the label)."""
    from pyspark.sql import functions as F

    from ..tables import Tables
    from .bootstrap import SampleSummaries, interval

    started = time.time()
    source = source or cfg.report.holdout_source
    if not source:
        raise UserFacingError("no held-out text for the chance baseline: set report.holdout_source")
    if match_fn is None:
        from ..scratch import step_scratch

        match_fn = default_sequence_matcher(scratch or step_scratch(cfg, run_id, "chance_baseline"))
    if sequences_df is None:
        sequences_df = holdout_sequences(spark, cfg, read_holdout_text(spark, cfg, source))
    sequences = sequences_df.select("sequence_id", F.size("token_ids").alias("n_tokens")).persist()
    try:
        occurrences = match_fn(spark, cfg, sequences_df.select("sequence_id", "token_ids"))
        if "is_low_entropy" not in occurrences.columns:
            occurrences = occurrences.withColumn("is_low_entropy", F.lit(False))
        has_passages = "passage_id" in occurrences.columns
        length = F.col("end") - F.col("start")
        low = F.coalesce(F.col("is_low_entropy"), F.lit(False))
        per_sequence = occurrences.groupBy("sequence_id").agg(
            F.sum(F.when(~low, length).otherwise(0)).alias("extracted_tokens"),
            F.sum(F.when(low, length).otherwise(0)).alias("low_entropy_tokens"),
            (F.collect_set(F.when(~low, F.xxhash64("passage_id"))) if has_passages
             else F.array().cast("array<bigint>")).alias("passage_keys"),
        )
        # One row per held-out sequence: bounded by the held-out text's size.
        pdf = (sequences.join(per_sequence, "sequence_id", "left")
               .select(F.col("sequence_id").alias("sample_id"), "n_tokens",
                       F.coalesce("extracted_tokens", F.lit(0)).alias("extracted_tokens"),
                       F.coalesce("low_entropy_tokens", F.lit(0)).alias("low_entropy_tokens"),
                       F.coalesce("passage_keys", F.array().cast("array<bigint>")).alias("passage_keys"))
               .toPandas())
    finally:
        sequences.unpersist()
    if pdf.empty:
        raise UserFacingError(f"report.holdout_source: {source} holds no text")
    summaries = SampleSummaries(pdf)
    point = summaries.point()
    reps = summaries.replicates(cfg.report.bootstrap_samples, cfg.report.bootstrap_seed)
    share = interval("share_extracted", point["share_extracted"], reps["share_extracted"], cfg.report.confidence)
    row = {
        "run_id": run_id,
        "source": str(source),
        "corpus_id": cfg.corpus.id,
        "n": cfg.index.n,
        "sequences": int(len(pdf)),
        "generated_tokens": int(pdf["n_tokens"].sum()),
        "extracted_tokens": int(pdf["extracted_tokens"].sum()),
        "share_extracted": float(share.value),
        "share_extracted_low": share.low,
        "share_extracted_high": share.high,
        "confidence": cfg.report.confidence,
        "distinct_passages": int(point["distinct_passages"]) if has_passages else None,
        "low_entropy_tokens": int(pdf["low_entropy_tokens"].sum()),
        "computed_at": pd.Timestamp.now(tz="UTC").tz_localize(None).to_pydatetime(),
    }
    tables = Tables(spark, cfg)
    from ..tables import CHANCE_BASELINE

    tables.merge("chance_baseline", spark.createDataFrame([row], schema=CHANCE_BASELINE.schema), run_id=run_id)
    logging.getLogger(__name__).info("chance baseline for %s: %.4f share matched by chance (%.1fs)", run_id,
                                     row["share_extracted"], time.time() - started)
    return row
