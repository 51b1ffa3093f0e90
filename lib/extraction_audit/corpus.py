"""Corpus ingestion and tokenization.

Reads the configured source (JSONL, Parquet, a folder of text files, a Delta folder or a
catalog table), classifies every record as indexable or rejected by reason, and
tokenizes indexable documents with the target tokenizer inside ``mapInPandas`` (Arrow
batches, the Rust tokenizer rebuilt once per Python worker from its definition, no
truncation, no special tokens).

Reads: the corpus source, ``corpus_documents`` (to skip documents already indexed).
``source_snapshot`` fingerprints what the source holds without reading a record: the
files' paths, sizes and modification times (one listing job), or a Delta table's version,
with the settings that decide how records are read and classified.
Writes: nothing itself; ``index.py`` writes ``corpus_documents`` from ``tokenize_documents``.

Reject reasons: ``malformed_record`` (unparseable JSON line), ``null_text``,
``empty_text`` (blank after trimming), ``too_large`` (more than ``corpus.max_doc_chars``
characters, or a text file larger than 4x that in bytes), ``invalid_utf8`` (bytes that
are not UTF-8, checked on the raw bytes before parsing),
``null_id`` (the configured id column is null) and ``duplicate_id`` (the same id twice
in one input; the copy with the smallest text hash is kept).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from .config import AuditConfig
from .errors import UserFacingError
from .tokenizer import WorkerEncoder
from .tokens import encode_tokens

REJECT_REASONS = (
    "malformed_record", "null_text", "empty_text", "too_large", "invalid_utf8", "null_id", "duplicate_id",
)
_CORRUPT = "_corrupt_record"


def _source_path(cfg: AuditConfig) -> str:
    path = cfg.resolve(cfg.corpus.path)
    if "://" not in path and not path.startswith("dbfs:") and not Path(path).exists():
        raise UserFacingError(f"corpus.path: {path!r} does not exist")
    return path


def read_raw(spark, cfg: AuditConfig):
    """Source records as ``(doc_id_raw, text, source, _reject)``; ``_reject`` is a reason
    string for records that cannot be parsed or decoded, else NULL."""
    from pyspark.sql import functions as F

    c = cfg.corpus
    fmt = c.format
    if fmt == "jsonl":
        path = _source_path(cfg)
        fields = [f"`{c.text_column}` STRING"]
        if c.id_column:
            fields.append(f"`{c.id_column}` STRING")
        if c.source_column:
            fields.append(f"`{c.source_column}` STRING")
        fields.append(f"`{_CORRUPT}` STRING")
        schema = ", ".join(fields)
        lines = (spark.read.option("recursiveFileLookup", "true").text(path)
                 .withColumn("_file", F.input_file_name()))
        # Bytes that are not UTF-8 are rejected before parsing (Spark keeps raw bytes).
        valid = F.expr("is_valid_utf8(value)")
        lines = lines.where(~valid | (F.trim("value") != ""))
        parsed = lines.withColumn(
            "j", F.from_json("value", schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}))
        df = parsed.select(
            F.when(valid, F.col(f"j.`{c.text_column}`")).alias("text"),
            (F.col(f"j.`{c.id_column}`") if c.id_column else F.lit(None).cast("string")).alias("doc_id_raw"),
            (F.col(f"j.`{c.source_column}`") if c.source_column else F.col("_file")).alias("source"),
            F.when(~valid, F.lit("invalid_utf8"))
            .when(F.col(f"j.`{_CORRUPT}`").isNotNull() | F.col("j").isNull(), F.lit("malformed_record"))
            .alias("_reject"),
        )
        return df
    if fmt == "text":
        path = _source_path(cfg)
        files = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(path)
                 .select("path", "length", "content"))
        max_bytes = 4 * c.max_doc_chars
        return files.mapInPandas(
            lambda it: _decode_files(it, max_bytes),
            "text STRING, doc_id_raw STRING, source STRING, _reject STRING",
        )
    if fmt in ("parquet", "delta", "table"):
        if fmt == "table":
            try:
                df = spark.table(c.table)
            except Exception as err:  # AnalysisException: table not found
                raise UserFacingError(f"corpus.table: cannot read table {c.table!r}: {_first_line(err)}") from None
        else:
            df = spark.read.format(fmt).load(_source_path(cfg))
        _require_columns(df, cfg)
        return df.select(
            F.col(f"`{c.text_column}`").cast("string").alias("text"),
            (F.col(f"`{c.id_column}`").cast("string") if c.id_column else F.lit(None).cast("string")).alias(
                "doc_id_raw"),
            (F.col(f"`{c.source_column}`").cast("string") if c.source_column
             else F.lit(c.table or cfg.resolve(c.path))).alias("source"),
            F.lit(None).cast("string").alias("_reject"),
        )
    raise UserFacingError(f"corpus.format: unsupported format {fmt!r}")


def source_snapshot(spark, cfg: AuditConfig) -> str | None:
    """A fingerprint that changes whenever the source's records or their classification
    can: the listing of its data files (path, size, modification time) or a Delta table's
    version, and the corpus settings.  None where no cheap fingerprint exists (a catalog
    table that is not Delta): such a source is always read."""
    import hashlib
    import json

    from pyspark.sql import functions as F

    c = cfg.corpus
    if c.format in ("jsonl", "text", "parquet"):
        path = _source_path(cfg)
        # The same files the readers above see (recursive lookup, hidden files skipped);
        # the binaryFile source lists them without reading content when content is pruned.
        row = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(path)
               .select("path", "length", "modificationTime")
               .agg(F.count(F.lit(1)).alias("files"), F.sum("length").alias("bytes"),
                    F.bit_xor(F.xxhash64("path", "length", "modificationTime")).alias("listing"))
               .first())
        state = {"files": row["files"], "bytes": row["bytes"], "listing": row["listing"]}
    elif c.format in ("delta", "table"):
        from delta.tables import DeltaTable

        try:
            table = (DeltaTable.forName(spark, c.table) if c.format == "table"
                     else DeltaTable.forPath(spark, _source_path(cfg)))
            state = {"version": table.history(1).select("version").first()["version"]}
        except Exception:  # noqa: BLE001 - not a Delta table: no version to compare, read it
            return None
    else:
        return None
    settings = c.model_dump(mode="json")
    settings["path"] = cfg.resolve(c.path) if c.path else None
    digest = hashlib.sha256(json.dumps({"settings": settings, "state": state}, sort_keys=True).encode())
    return digest.hexdigest()[:32]


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _require_columns(df, cfg: AuditConfig) -> None:
    c = cfg.corpus
    for setting, col in (("corpus.text_column", c.text_column), ("corpus.id_column", c.id_column),
                         ("corpus.source_column", c.source_column)):
        if col and col not in df.columns:
            raise UserFacingError(f"{setting}: column {col!r} not found; the corpus has columns {df.columns}")


def _decode_files(batches: Iterator[pd.DataFrame], max_bytes: int) -> Iterator[pd.DataFrame]:
    for pdf in batches:
        texts, rejects = [], []
        for length, content in zip(pdf["length"].to_numpy(), pdf["content"]):
            if length > max_bytes:
                texts.append(None)
                rejects.append("too_large")
                continue
            try:
                texts.append(bytes(content).decode("utf-8"))
                rejects.append(None)
            except UnicodeDecodeError:
                texts.append(None)
                rejects.append("invalid_utf8")
        yield pd.DataFrame({"text": texts, "doc_id_raw": None, "source": pdf["path"], "_reject": rejects})


def classify(raw, cfg: AuditConfig):
    """Add ``doc_id`` and the final ``_reject`` reason (first applicable reason wins)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    c = cfg.corpus
    text_sha = F.sha1(F.encode(F.coalesce(F.col("text"), F.lit("")), "UTF-8"))
    doc_id = F.col("doc_id_raw") if c.id_column else text_sha
    df = raw.withColumn("text_sha1", text_sha).withColumn("doc_id", doc_id)
    reason = (
        F.when(F.col("_reject").isNotNull(), F.col("_reject"))
        .when(F.col("text").isNull(), F.lit("null_text"))
        .when(F.trim(F.col("text")) == "", F.lit("empty_text"))
        .when(F.length("text") > c.max_doc_chars, F.lit("too_large"))
        .when(F.length("text") < c.min_doc_chars, F.lit("empty_text"))
        .when(F.col("doc_id").isNull(), F.lit("null_id"))
    )
    df = df.withColumn("_reject", reason)
    # Same id twice in one input: keep one deterministically, count the rest.
    w = Window.partitionBy("doc_id").orderBy("text_sha1", "source")
    dup_rank = F.when(F.col("_reject").isNull(), F.row_number().over(w))
    df = df.withColumn("_reject", F.when(dup_rank > 1, F.lit("duplicate_id")).otherwise(F.col("_reject")))
    return df


def tokenize_documents(docs, tokenizer_path: str, token_width: int):
    """``(doc_id, source, text)`` -> plus ``token_bytes``, ``token_width``, ``n_tokens``, ``n_chars``."""

    encoder = WorkerEncoder(tokenizer_path)  # loaded here: a bad tokenizer fails on the driver

    def tokenize(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in batches:
            ids = encoder.encode(pdf["text"].tolist())
            out = pdf[["doc_id", "source", "text"]].copy()
            out["token_bytes"] = [encode_tokens(x, token_width) for x in ids]
            out["token_width"] = np.int8(token_width)
            out["n_tokens"] = np.array([len(x) for x in ids], dtype=np.int32)
            out["n_chars"] = pdf["text"].str.len().astype(np.int32)
            yield out

    schema = ("doc_id STRING, source STRING, text STRING, token_bytes BINARY, token_width TINYINT, "
              "n_tokens INT, n_chars INT")
    return docs.select("doc_id", "source", "text").mapInPandas(tokenize, schema)
