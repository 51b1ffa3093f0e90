"""``import-samples``: bring outputs generated elsewhere (e.g. a deployed API's logs) into a run.

Input: JSONL or Parquet records with ``token_ids`` (a list of ints, used as given) or
``text`` (tokenized with the target tokenizer, no special tokens), optionally ``prompt``
/ ``prompt_text`` (and ``prompt_token_ids``), and optionally a record id: ``sample_id``
(an integer, used as is) or ``id`` (any value, hashed).  When both ``text`` and
``token_ids`` are present the ids win.  ``samples.text`` is always decoded from the ids,
so the same content imported as text or as ids gives the same row.

Sample ids of records without an id are a hash of the content (prompt ids, generated ids)
and its occurrence number among identical records of this import: re-importing a file
is idempotent and repeated identical outputs stay separate samples.  (Identical outputs
in two *separate* imports collapse into one sample unless the records carry ids.)

Bad records are skipped and counted by reason: ``malformed_record``, ``no_content``,
``empty``, ``token_id_out_of_range``, ``duplicate_id``.

Reads the input files and ``samples``; writes ``samples`` (merge on run_id, sample_id)
(the runner records the step and the run's ``generated_tokens``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import AuditConfig
from ..errors import UserFacingError
from ..tables import Tables
from ..tokenizer import WorkerDecoder, WorkerEncoder, load_tokenizer, vocab_size

_POSITIVE63 = 0x7FFFFFFFFFFFFFFF
_PREPARED_DDL = (
    "record_id STRING, explicit_sample_id BIGINT, prompt_text STRING, prompt_token_ids ARRAY<INT>, "
    "token_ids ARRAY<INT>, text STRING, n_tokens INT, skip_reason STRING"
)


def infer_format(path: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix == ".parquet":
        return "parquet"
    raise UserFacingError(f"cannot tell the format of {path!r} from its name; pass --format jsonl or parquet")


def import_samples(spark, cfg: AuditConfig, run_id: str, path: str, fmt: str | None = None,
                   tables: Tables | None = None) -> dict:
    """Import external samples into ``run_id``; returns counts (the runner records them)."""
    started = time.monotonic()
    tables = tables or Tables(spark, cfg)
    resolved, fmt = check_input(cfg, path, fmt)
    tokenizer_path = cfg.resolve(cfg.model.tokenizer_path)
    load_tokenizer(tokenizer_path)  # a missing tokenizer fails here, not inside a task
    stats = _import(spark, tables, run_id, resolved, fmt, tokenizer_path)
    stats["seconds"] = round(time.monotonic() - started, 3)
    return stats


def _import(spark, tables: Tables, run_id: str, resolved: str, fmt: str, tokenizer_path: str) -> dict:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    raw = _read(spark, resolved, fmt).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        selected = _select_inputs(raw, resolved)
        # Built on the driver: workers rebuild the Rust tokenizer without importing transformers.
        codec = (WorkerEncoder(tokenizer_path), WorkerDecoder(tokenizer_path),
                 vocab_size(load_tokenizer(tokenizer_path)))
        prepared = selected.mapInPandas(lambda batches: _prepare_batches(batches, *codec), _PREPARED_DDL)
        keyed = _assign_sample_ids(prepared).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            counts = {r["reason"]: int(r["count"]) for r in
                      keyed.groupBy(F.coalesce("skip_reason", F.lit("")).alias("reason")).count().collect()}
            good = keyed.where(F.col("skip_reason").isNull())
            rows = good.select(
                F.lit(run_id).alias("run_id"), "sample_id", F.lit("imported").alias("prompt_strategy"),
                "prompt_text", "prompt_token_ids", "token_ids", "text", "n_tokens",
                F.lit(None).cast("bigint").alias("seed"), F.lit(None).cast("int").alias("divergence_offset"),
                F.lit("imported").alias("finish_reason"), F.current_timestamp().alias("created_at"))
            tables.merge("samples", rows, update=True, run_id=run_id)
        finally:
            keyed.unpersist()
    finally:
        raw.unpersist()
    imported = counts.pop("", 0)
    total = _run_totals(tables, run_id)
    return {
        "input": resolved,
        "format": fmt,
        "records_read": imported + sum(counts.values()),
        "samples_imported": imported,
        "skipped": dict(sorted(counts.items())),
        "run_samples": total["samples"],
        "run_tokens": total["tokens"],
    }


def check_import_run(tables: Tables, run_id: str) -> None:
    """External samples go into a run of their own, never beside generated ones."""
    from pyspark.sql import functions as F

    generated = (tables.read("samples")
                 .where((F.col("run_id") == run_id) & (F.col("prompt_strategy") != "imported"))
                 .limit(1).count())
    if generated:
        raise UserFacingError(
            f"run {run_id!r} already holds generated samples; import external samples into a separate run")


def check_input(cfg: AuditConfig, path: str, fmt: str | None = None) -> tuple[str, str]:
    """The input's resolved path and format, or one clear error (no table is read)."""
    resolved = cfg.resolve(path)
    fmt = fmt or infer_format(resolved)
    if fmt not in ("jsonl", "parquet"):
        raise UserFacingError(f"--format must be jsonl or parquet, got {fmt!r}")
    if "://" not in resolved and not resolved.startswith("dbfs:") and not Path(resolved).exists():
        raise UserFacingError(f"--input {resolved!r} does not exist")
    return resolved, fmt


def _read(spark, path: str, fmt: str):
    try:
        if fmt == "jsonl":
            return (spark.read.option("mode", "PERMISSIVE")
                    .option("columnNameOfCorruptRecord", "_corrupt_record").json(path))
        return spark.read.parquet(path)
    except Exception as err:  # noqa: BLE001 - Spark raises many types for unreadable input
        raise UserFacingError(f"cannot read {path!r} as {fmt}: {str(err).splitlines()[0]}") from None


def _select_inputs(raw, path: str):
    """Normalise the input columns (text, token_ids, prompt, ids) and their types."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, IntegralType, StringType

    fields = {f.name: f.dataType for f in raw.schema.fields}
    if "text" not in fields and "token_ids" not in fields:
        raise UserFacingError(f"{path!r} needs a 'text' or a 'token_ids' column (found {sorted(fields)})")

    def int_array(name: str):
        if name not in fields:
            return F.lit(None).cast("array<bigint>")
        dtype = fields[name]
        if not (isinstance(dtype, ArrayType) and isinstance(dtype.elementType, IntegralType)):
            raise UserFacingError(f"{path!r}: column {name!r} must be a list of integers, found {dtype.simpleString()}")
        return F.col(name).cast("array<bigint>")

    def text(name: str):
        if name not in fields:
            return F.lit(None).cast("string")
        if not isinstance(fields[name], StringType):
            raise UserFacingError(f"{path!r}: column {name!r} must be text, found {fields[name].simpleString()}")
        return F.col(name)

    prompt = "prompt" if "prompt" in fields else "prompt_text"
    if "sample_id" in fields and not isinstance(fields["sample_id"], IntegralType):
        raise UserFacingError(f"{path!r}: column 'sample_id' must be an integer, found {fields['sample_id']}")
    return raw.select(
        (F.col("_corrupt_record") if "_corrupt_record" in fields else F.lit(None).cast("string")).alias("corrupt"),
        text("text").alias("text"),
        int_array("token_ids").alias("token_ids"),
        text(prompt).alias("prompt"),
        int_array("prompt_token_ids").alias("prompt_token_ids"),
        (F.col("id").cast("string") if "id" in fields else F.lit(None).cast("string")).alias("record_id"),
        (F.col("sample_id").cast("bigint") if "sample_id" in fields else F.lit(None).cast("bigint"))
        .alias("explicit_sample_id"),
    )


def _prepare_batches(batches, encoder: WorkerEncoder, decoder: WorkerDecoder, vocab: int):
    """mapInPandas: ids (given, or tokenized from text), decoded text, skip reasons."""
    for pdf in batches:
        yield prepare_records(pdf, encoder, decoder, vocab)


def prepare_records(pdf: pd.DataFrame, encoder: WorkerEncoder, decoder: WorkerDecoder, vocab: int) -> pd.DataFrame:
    """One batch of normalised input records -> prepared rows (pure pandas, testable)."""
    n = len(pdf)
    reason = pd.Series(np.where(pdf["corrupt"].notna(), "malformed_record", None), index=pdf.index, dtype=object)
    ids = pdf["token_ids"].copy()
    from_text = ids.isna() & pdf["text"].notna()
    if from_text.any():
        ids[from_text] = pd.Series(encoder.encode(pdf["text"][from_text].tolist()), index=ids.index[from_text])
    present = ids.notna()
    lengths = np.zeros(n, dtype=np.int64)
    lengths[present.to_numpy()] = [len(x) for x in ids[present]]
    bad_range = np.zeros(n, dtype=bool)
    nonempty = np.flatnonzero(lengths > 0)
    if len(nonempty):
        flat = np.concatenate([np.asarray(x, dtype=np.int64) for x in ids.iloc[nonempty]])
        starts = np.concatenate([[0], np.cumsum(lengths[nonempty])[:-1]])
        bad_range[nonempty] = (np.minimum.reduceat(flat, starts) < 0) | (np.maximum.reduceat(flat, starts) >= vocab)
    for condition, label in ((~present.to_numpy(), "no_content"), (present.to_numpy() & (lengths == 0), "empty"),
                             (bad_range, "token_id_out_of_range")):
        reason[reason.isna() & condition] = label
    ok = reason.isna().to_numpy()
    prompt_ids = pdf["prompt_token_ids"].where(ok, None)
    tokenize_prompt = ok & prompt_ids.isna().to_numpy() & pdf["prompt"].notna().to_numpy()
    if tokenize_prompt.any():
        prompt_ids[tokenize_prompt] = pd.Series(encoder.encode(pdf["prompt"][tokenize_prompt].tolist()),
                                                index=pdf.index[tokenize_prompt])
    token_ids = ids.where(ok, None)
    text = pd.Series(None, index=pdf.index, dtype=object)
    if ok.any():
        text[ok] = decoder.decode(list(token_ids[ok]))
    return pd.DataFrame({
        "record_id": pdf["record_id"],
        "explicit_sample_id": pdf["explicit_sample_id"],
        "prompt_text": pdf["prompt"].where(ok, None),
        "prompt_token_ids": prompt_ids,
        "token_ids": token_ids,
        "text": text,
        "n_tokens": pd.Series(np.where(ok, lengths, 0), index=pdf.index).where(ok, None),
        "skip_reason": reason,
    })


def _assign_sample_ids(prepared):
    """sample_id: the record's own (``sample_id``, or a hash of ``id``), else a hash of the
    content and its occurrence number; later duplicates of an explicit id are skipped."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    content = [F.col("prompt_token_ids"), F.col("token_ids")]
    occurrence = F.row_number().over(Window.partitionBy(*content).orderBy(*content))
    by_content = F.xxhash64(*content, occurrence)
    explicit = F.coalesce(F.col("explicit_sample_id"), F.xxhash64(F.col("record_id")))
    has_explicit = F.col("explicit_sample_id").isNotNull() | F.col("record_id").isNotNull()
    keyed = prepared.withColumn(
        "sample_id", F.when(has_explicit, explicit).otherwise(by_content).bitwiseAND(F.lit(_POSITIVE63)))
    keyed = keyed.withColumn("sample_id", F.when(F.col("skip_reason").isNull(), F.col("sample_id")))
    dup_rank = F.row_number().over(Window.partitionBy("sample_id").orderBy(F.xxhash64(*content), *content))
    return keyed.withColumn(
        "skip_reason",
        F.when(F.col("skip_reason").isNull() & F.col("sample_id").isNotNull() & (dup_rank > 1), F.lit("duplicate_id"))
        .otherwise(F.col("skip_reason")))


def _run_totals(tables: Tables, run_id: str) -> dict:
    from pyspark.sql import functions as F

    row = (tables.read("samples").where(F.col("run_id") == run_id)
           .agg(F.count("*").alias("n"), F.sum("n_tokens").alias("t")).collect()[0])
    return {"samples": int(row["n"] or 0), "tokens": int(row["t"] or 0)}
