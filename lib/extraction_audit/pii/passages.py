"""Link personal data to the extracted passage it sits in.

``passage_occurrences`` stores token offsets into a sample's generated tokens, findings
store character offsets into its text.  Token offsets become character offsets by decoding
the token prefix with the target tokenizer: ``len(decode(ids[:i]))``.  That holds only if
decoding all ids gives back the sample text exactly; samples where it does not (imported
text, a different tokenizer) are skipped and counted, not guessed.

Reads: ``passage_occurrences``, ``samples`` (token_ids, text).
"""

from __future__ import annotations

from typing import Iterator

import pandas as pd

from ..config import AuditConfig
from ..tables import Tables

PASSAGE_SPANS_DDL = "sample_id BIGINT, passage_id STRING, p_char_start INT, p_char_end INT"


def _decoder(decoders, ids, text):
    """A prefix decoder consistent with ``text``, or None when no decoder gives it back.
    ``decoders``: functions ids -> text, tried in order (each built when first tried)."""
    for make in decoders:
        decode = make()
        if decode is not None and decode(ids) == text:
            def prefix_chars(i: int, decode=decode) -> int:
                prefix = decode(ids[:i])
                n = len(prefix)
                while n and prefix[n - 1] == "\ufffd" and (n > len(text) or text[n - 1] != "\ufffd"):
                    n -= 1  # a multi-byte character split across tokens belongs to the next token
                return n
            return prefix_chars
    return None


def _rust_decoder(tokenizer_path: str):
    """The folder's ``tokenizer.json`` decoded with the ``tokenizers`` library alone (built
    once per worker process, not per task), or None."""
    from ..tokenizer import folder_rust_tokenizer

    backend = folder_rust_tokenizer(tokenizer_path)
    return None if backend is None else (lambda ids: backend.decode(ids, skip_special_tokens=False))


def _span_batches(tokenizer_path: str):
    """Each sample's text is decoded first with the Rust tokenizer of the folder's
    ``tokenizer.json`` (no ``transformers`` or ``torch`` import: 3-5 CPU-s per worker
    process), then, only for a sample that decoding does not give back, with the full
    tokenizer without and with clean-up of spaces.  Offsets come only from a decoder whose
    whole decode equals the stored text."""
    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from functools import lru_cache

        from ..tokenizer import load_tokenizer

        rust = lru_cache(maxsize=1)(lambda: _rust_decoder(tokenizer_path))

        def full(cleanup: bool):
            tok = load_tokenizer(tokenizer_path)
            return lambda ids: tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=cleanup)

        decoders = (rust, lambda: full(False), lambda: full(True))
        for batch in batches:
            rows, by_sample = [], {}
            for sample_id, ids, text, start, end, passage_id in zip(
                    batch["sample_id"], batch["token_ids"], batch["text"], batch["start"], batch["end"],
                    batch["passage_id"]):
                if sample_id not in by_sample:
                    by_sample[sample_id] = (_decoder(decoders, [int(t) for t in ids], text)
                                            if ids is not None and text else None)
                prefix_chars = by_sample[sample_id]
                if prefix_chars is None:
                    rows.append((sample_id, passage_id, None, None))
                else:
                    rows.append((sample_id, passage_id, prefix_chars(int(start)), prefix_chars(int(end))))
            yield pd.DataFrame(rows, columns=["sample_id", "passage_id", "p_char_start", "p_char_end"])
    return run


def passage_links(tables: Tables, cfg: AuditConfig, run_id: str, samples, findings):
    """(sample_id, char_start) -> passage_id of the occurrence overlapping the finding most.

    Returns (links_df or None, stats).  None when matching has not run for the run."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from ..tokenizer import check_model_location

    stats = {"passage_occurrences": 0, "samples_offsets_mismatch": 0}
    if not tables.exists("passage_occurrences"):
        stats["status"] = "passage_occurrences table absent"
        return None, stats
    occurrences = (tables.read("passage_occurrences").where(F.col("run_id") == run_id)
                   .select("sample_id", "start", "end", "passage_id")
                   .join(findings.select("sample_id").distinct(), "sample_id", "left_semi"))
    stats["passage_occurrences"] = occurrences.count()
    if stats["passage_occurrences"] == 0:
        stats["status"] = "no passage occurrences in samples with findings"
        return None, stats
    tokenizer_path = check_model_location(cfg.resolve(cfg.model.tokenizer_path), "model.tokenizer")
    spans = (occurrences.join(samples.select("sample_id", "token_ids", "text"), "sample_id")
             .mapInPandas(_span_batches(tokenizer_path), PASSAGE_SPANS_DDL))
    stats["samples_offsets_mismatch"] = (spans.where(F.col("p_char_start").isNull())
                                         .select("sample_id").distinct().count())
    f, p = findings.alias("f"), spans.where(F.col("p_char_start").isNotNull()).alias("p")
    overlap = F.least("f.char_end", "p.p_char_end") - F.greatest("f.char_start", "p.p_char_start")
    joined = (f.join(p, (F.col("f.sample_id") == F.col("p.sample_id"))
                     & (F.col("f.char_start") < F.col("p.p_char_end"))
                     & (F.col("p.p_char_start") < F.col("f.char_end")))
              .select(F.col("f.sample_id").alias("sample_id"), F.col("f.char_start").alias("char_start"),
                      "p.passage_id", overlap.alias("_overlap")))
    best = Window.partitionBy("sample_id", "char_start").orderBy(F.desc("_overlap"), "passage_id")
    links = (joined.withColumn("_rank", F.row_number().over(best)).where("_rank = 1")
             .select("sample_id", "char_start", "passage_id"))
    stats["status"] = "linked"
    return links, stats
