"""Table names, schemas, comments, and the read / idempotent-write helpers.

These tables are a public API for SQL analysts (``../shared/TABLES.md``): names and the
required columns never change; columns may be added.  Every write goes through
``merge`` (keyed upsert) or ``replace_where`` (atomic overwrite of one run's slice), so
a retried task or a re-run never duplicates rows.

Local mode stores each table as a Delta folder ``<warehouse>/<name>`` and registers a
temporary view of the same name for SQL; cluster mode (``storage.database`` set) uses
catalog tables ``<database>.<name>``.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Callable, TypeVar
from pathlib import Path

from .config import AuditConfig
from .ids import id_predicate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableSpec:
    name: str
    comment: str
    columns: tuple[tuple[str, str, str], ...]  # (name, type, comment)
    key: tuple[str, ...]
    partition_by: tuple[str, ...] = ()
    # Columns holding generated or personal text: kept out of Delta's per-file statistics,
    # which live in the _delta_log (kept 30 days) where `purge` + VACUUM cannot reach them.
    private_columns: tuple[str, ...] = ()

    @property
    def stats_columns(self) -> str | None:
        if not self.private_columns:
            return None
        return ",".join(c for c, t, _ in self.columns
                        if c not in self.private_columns and c not in self.partition_by
                        and t in ("STRING", "INT", "BIGINT", "DOUBLE", "TIMESTAMP", "TINYINT"))

    @property
    def ddl(self) -> str:
        return ", ".join(f"`{c}` {t} COMMENT '{_q(d)}'" for c, t, d in self.columns)

    @property
    def column_names(self) -> list[str]:
        return [c for c, _, _ in self.columns]

    @property
    def schema(self):
        """Spark StructType of the table (for createDataFrame and UDF return types)."""
        from pyspark.sql.types import StructType

        return StructType.fromDDL(", ".join(f"`{c}` {t}" for c, t, _ in self.columns))


def _q(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


RUN_ID = ("run_id", "STRING", "Audit run identifier; every findings row carries it")

TABLES: dict[str, TableSpec] = {}


def _table(spec: TableSpec) -> TableSpec:
    TABLES[spec.name] = spec
    return spec


CORPUS_DOCUMENTS = _table(TableSpec(
    "corpus_documents",
    "Training-corpus documents tokenized with the target tokenizer (one row per document).",
    (
        ("corpus_id", "STRING", "Corpus identifier from corpus.id"),
        ("doc_id", "STRING", "Document id: the configured id column, or sha1 of the text when absent"),
        ("source", "STRING", "Where the text came from (file path, table, or the configured source column)"),
        ("text", "STRING", "Document text as ingested"),
        ("token_bytes", "BINARY", "Token ids, little-endian uint16 (token_width=2) or int32 (token_width=4); "
                                  "decode with extraction_audit.tokens.decode_tokens"),
        ("token_width", "TINYINT", "Bytes per token id in token_bytes (2 or 4)"),
        ("n_tokens", "INT", "Number of tokens (no special tokens added)"),
        ("n_chars", "INT", "Number of characters of text"),
        ("tokenizer", "STRING", "Tokenizer fingerprint used for token_bytes"),
        ("build_id", "STRING", "Index build that added the document"),
        ("ingested_at", "TIMESTAMP", "When the document was added"),
        ("doc_seq", "BIGINT", "Position in its build's write (Spark partition << 33 | row): the build's dense "
                              "doc_number (corpus_doc_numbers) is derived from it"),
    ),
    key=("corpus_id", "doc_id"),
    partition_by=("corpus_id",),
))

CORPUS_ANCHORS = _table(TableSpec(
    "corpus_anchors",
    "Sampled corpus index: one row per winnowing anchor (the minimum-hash k-gram of every n-token window "
    "of a document), partitioned by hash-prefix bucket and sorted by hash within files.",
    (
        ("corpus_id", "STRING", "Corpus identifier"),
        ("bucket", "INT", "Low bucket_bits bits of anchor_hash (top bits in indexes of layout 'anchors'): "
                          "partition and join unit"),
        ("anchor_hash", "BIGINT", "64-bit hash of the anchor's k token ids (extraction_audit.hashing, n = anchor_k)"),
        ("doc_number", "INT", "Dense document number (corpus_doc_numbers maps it to doc_id)"),
        ("offset", "INT", "Token offset of the anchor k-gram in the document"),
    ),
    key=("corpus_id", "bucket", "anchor_hash", "doc_number", "offset"),
    partition_by=("corpus_id", "bucket"),
))

CORPUS_DOC_NUMBERS = _table(TableSpec(
    "corpus_doc_numbers",
    "Side table of the anchor index: dense document numbers (0, 1, 2, ... per corpus) and their doc_id.",
    (
        ("corpus_id", "STRING", "Corpus identifier"),
        ("doc_number", "INT", "Dense document number used by corpus_anchors"),
        ("doc_id", "STRING", "corpus_documents.doc_id"),
        ("build_id", "STRING", "Index build that numbered the document"),
    ),
    key=("corpus_id", "doc_number"),
    partition_by=("corpus_id",),
))

CORPUS_INDEX = _table(TableSpec(
    "corpus_index",
    "Index metadata: one row per corpus (tokenizer identity, n, sizes).",
    (
        ("corpus_id", "STRING", "Corpus identifier"),
        ("tokenizer", "STRING", "Tokenizer fingerprint (name plus hash of its vocabulary)"),
        ("tokenizer_path", "STRING", "Tokenizer path or hub id used"),
        ("n", "INT", "n-gram length"),
        ("hash_bits", "INT", "Hash precision in bits"),
        ("bucket_bits", "INT", "Bits of hash prefix used for buckets"),
        ("max_postings", "INT", "index.max_postings at the last build: passages in at most this many documents "
                                "get exact document counts (a match-time setting; the index keeps every anchor)"),
        ("token_width", "TINYINT", "Bytes per token id in corpus_documents"),
        ("documents", "BIGINT", "Documents indexed"),
        ("tokens", "BIGINT", "Tokens indexed"),
        ("distinct_ngrams", "BIGINT", "Distinct n-grams (NULL for the anchor layout, which does not store them; "
                                      "`corpus-stats --count-ngrams` counts them from the documents)"),
        ("updated_at", "TIMESTAMP", "Last build that changed this row (one that added nothing leaves it)"),
        ("layout", "STRING", "Index layout: 'anchors-v2' (winnowing anchors in corpus_anchors, bucket = low "
                             "hash bits); 'anchors' (the same, bucket = top hash bits: earlier indexes, still read)"),
        ("anchor_k", "INT", "Anchor k-gram length (w = n - anchor_k + 1 k-grams per window)"),
        ("anchors", "BIGINT", "Rows in corpus_anchors for this corpus"),
    ),
    key=("corpus_id",),
))

CORPUS_INDEX_BUILDS = _table(TableSpec(
    "corpus_index_builds",
    "One row per index build: what was read, added, skipped by reason, and how long it took.",
    (
        ("corpus_id", "STRING", "Corpus identifier"),
        ("build_id", "STRING", "Build identifier"),
        ("started_at", "TIMESTAMP", "Build start"),
        ("finished_at", "TIMESTAMP", "Build end"),
        ("records_read", "BIGINT", "Input records read"),
        ("documents_added", "BIGINT", "New documents indexed"),
        ("documents_already_present", "BIGINT", "Documents skipped because their doc_id was already indexed"),
        ("tokens_added", "BIGINT", "Tokens of the new documents"),
        ("skipped", "MAP<STRING, BIGINT>", "Records skipped, by reason (null_text, empty_text, too_large, "
                                             "invalid_utf8, malformed_record, duplicate_id)"),
        ("seconds", "DOUBLE", "Wall-clock seconds"),
        ("anchors_added", "BIGINT", "Rows the build appended to corpus_anchors (from its Delta commit)"),
        ("source_snapshot", "STRING", "Fingerprint of the source as the build read it (its files' paths, sizes "
                                      "and modification times, or its Delta version, and the corpus settings); "
                                      "a later build that finds the same fingerprint reads nothing"),
        ("state", "STRING", "started (recorded before the build writes documents), done, or abandoned (started, "
                            "no documents committed: stopped before its first write); NULL: recorded by an "
                            "earlier version, done"),
    ),
    key=("corpus_id", "build_id"),
))

RUNS = _table(TableSpec(
    "runs",
    "One row per audit run: model, settings, budget, status and per-step statistics.",
    (
        RUN_ID,
        ("status", "STRING", "created, running:<step>, failed:<step>, or complete"),
        ("started_at", "TIMESTAMP", "Run start"),
        ("finished_at", "TIMESTAMP", "Run completion (NULL until complete)"),
        ("model", "STRING", "Model path or hub id"),
        ("model_name", "STRING", "Readable model name: model.name from the config, else the model's own "
                                 "config (_name_or_path / model_type), else the last part of its path"),
        ("model_family", "STRING", "Model family for first-seen comparisons across runs"),
        ("tokenizer", "STRING", "Tokenizer fingerprint"),
        ("corpus_id", "STRING", "Corpus the run is matched against"),
        ("prompt_strategy", "STRING", "Prompt strategies and shares, e.g. empty:0.5,public_prefix:0.5"),
        ("sampling", "STRING", "Sampling settings as JSON"),
        ("budget_tokens", "BIGINT", "Generation budget in generated tokens"),
        ("generated_tokens", "BIGINT", "Generated tokens so far"),
        ("config_json", "STRING", "Full validated configuration as JSON"),
        ("steps_done", "ARRAY<STRING>", "Steps completed"),
        ("step_stats", "STRING", "Per-step counts and seconds as JSON"),
        ("control_run_id", "STRING", "Run of the control (e.g. base) model, when any"),
        ("error", "STRING", "Last error message, when failed"),
        ("steps_planned", "ARRAY<STRING>", "Steps the run must finish to be complete (configured steps plus "
                                           "the derived metrics/calibrate steps)"),
    ),
    key=("run_id",),
    partition_by=("run_id",),
))

RUN_STEPS = _table(TableSpec(
    "run_steps",
    "One row per run and step: the runner's record of what ran, how often, how long, and what it did. "
    "runs.status, steps_done and step_stats are derived from it.",
    (
        RUN_ID,
        ("step", "STRING", "Step name (index, generate, import_samples, match, pii, metrics, rank, calibrate, "
                           "report)"),
        ("status", "STRING", "running, done, failed, or stale (an input step was redone after it finished)"),
        ("attempt", "INT", "Number of times the step was started for this run"),
        ("started_at", "TIMESTAMP", "Start of the latest attempt"),
        ("finished_at", "TIMESTAMP", "End of the latest attempt (NULL while running or after a crash)"),
        ("seconds", "DOUBLE", "Wall-clock seconds of the latest attempt"),
        ("spark_jobs", "INT", "Spark jobs the latest attempt ran (driver job group)"),
        ("stats", "STRING", "The step's statistics as JSON (counts in, out, skipped by reason)"),
        ("error", "STRING", "Error of the latest failed attempt"),
        ("attempt_id", "STRING", "Id of the process attempt that claimed the latest attempt (derived steps are "
                                 "claimed atomically, so two processes never run the same one)"),
    ),
    key=("run_id", "step"),
    partition_by=("run_id",),
))

RUN_ARTIFACTS = _table(TableSpec(
    "run_artifacts",
    "Files a run wrote outside the tables (report HTML/Markdown/JSON, review exports): what purge deletes.",
    (
        RUN_ID,
        ("path", "STRING", "File or folder path as written"),
        ("kind", "STRING", "report or review_export"),
        ("written_at", "TIMESTAMP", "When written"),
    ),
    key=("run_id", "path"),
    partition_by=("run_id",),
))

SAMPLES = _table(TableSpec(
    "samples",
    "Generated (or imported) samples; token_ids are the generated ids exactly as sampled.",
    (
        RUN_ID,
        ("sample_id", "BIGINT", "Deterministic sample number within the run"),
        ("prompt_strategy", "STRING", "empty, public_prefix, repeat_word, file, or imported"),
        ("prompt_text", "STRING", "Prompt text as given to the model (after any chat template)"),
        ("prompt_token_ids", "ARRAY<INT>", "Prompt token ids"),
        ("token_ids", "ARRAY<INT>", "Generated token ids only (prompt excluded)"),
        ("text", "STRING", "Decoded generated text"),
        ("n_tokens", "INT", "Number of generated tokens"),
        ("seed", "BIGINT", "Sampling seed of this sample"),
        ("divergence_offset", "INT", "repeat_word: generated token offset just after the last repetition of the word before the output diverges (0: never repeated, NULL: never diverged)"),
        ("finish_reason", "STRING", "length, eos, or imported"),
        ("created_at", "TIMESTAMP", "When generated"),
    ),
    key=("run_id", "sample_id"),
    partition_by=("run_id",),
    private_columns=("prompt_text", "text"),
))

PASSAGE_OCCURRENCES = _table(TableSpec(
    "passage_occurrences",
    "Maximal runs of generated tokens covered by verified corpus n-gram matches.",
    (
        RUN_ID,
        ("sample_id", "BIGINT", "Sample"),
        ("start", "INT", "First covered token offset into the sample's generated tokens"),
        ("end", "INT", "Exclusive end offset"),
        ("passage_id", "STRING", "Passage (sha1 of the token sequence)"),
        ("is_prompt_copy", "BOOLEAN", "The occurrence only reproduces the sample's own prompt (not counted)"),
    ),
    key=("run_id", "sample_id", "start"),
    partition_by=("run_id",),
))

EXTRACTED_PASSAGES = _table(TableSpec(
    "extracted_passages",
    "Distinct extracted passages with the number of corpus documents containing each.",
    (
        RUN_ID,
        ("passage_id", "STRING", "sha1 of the passage's token ids"),
        ("token_ids", "ARRAY<INT>", "Passage token ids"),
        ("text", "STRING", "Decoded passage text"),
        ("n_tokens", "INT", "Passage length in tokens"),
        ("n_samples", "BIGINT", "Samples that emitted the passage"),
        ("doc_count", "BIGINT", "Corpus documents containing the whole passage (exact or lower bound)"),
        ("doc_count_is_exact", "BOOLEAN", "Whether doc_count is exact"),
        ("doc_count_upper_bound", "BIGINT", "Smallest doc_count among the passage's n-grams"),
        ("example_doc_ids", "ARRAY<STRING>", "Some documents containing the passage"),
        ("is_low_entropy", "BOOLEAN", "Low-entropy filler; excluded from headline metrics"),
        ("first_seen_run_id", "STRING", "Earliest run of the same model family that emitted the passage"),
        ("n_occurrences", "BIGINT", "Occurrences of the passage in the run's samples"),
        ("low_entropy_reason", "STRING", "repetitive_tokens, compressible or few_letters (NULL when not filler)"),
        ("is_prompt_copy", "BOOLEAN", "Every occurrence only reproduces its sample's prompt; excluded from metrics"),
        ("is_stitched", "BOOLEAN", "No single document holds the whole passage (doc_count = 0)"),
        ("emission_rate", "DOUBLE", "n_samples / samples in the run: estimated probability that one sample "
                                    "at the run's sampling settings emits the passage"),
    ),
    key=("run_id", "passage_id"),
    partition_by=("run_id",),
    private_columns=("text",),
))

PII_FINDINGS = _table(TableSpec(
    "pii_findings",
    "Personal data tagged in samples and looked up in the corpus. Raw values only when allowed by config.",
    (
        RUN_ID,
        ("sample_id", "BIGINT", "Sample"),
        ("entity_type", "STRING", "email, phone, card, iban, nhs_number, person_name, ..."),
        ("char_start", "INT", "Start character offset in the sample text"),
        ("char_end", "INT", "Exclusive end character offset"),
        ("value_redacted", "STRING", "Redacted value safe to show"),
        ("value_key", "STRING", "HMAC-SHA256 of the normalised value (keyed, never the raw value)"),
        ("value", "STRING", "Raw value; NULL unless storage.allow_raw_pii"),
        ("in_corpus", "BOOLEAN", "Whether the normalised value occurs in the corpus"),
        ("corpus_doc_count", "BIGINT", "Corpus documents containing the value in any surface form (by-value "
                                       "text search; NULL when not searched)"),
        ("detector", "STRING", "Detector name"),
        ("corpus_lookup", "STRING", "How in_corpus was decided: search (the value searched for in the "
                                    "corpus text in all its surface forms; corpus_doc_count exact), not_found "
                                    "(searched, 0 documents), index_only (over pii.corpus_search_limit but "
                                    "tagged by the corpus-side detectors: present, count NULL), or "
                                    "not_searched (over the limit; in_corpus is NULL)"),
        ("example_doc_ids", "ARRAY<STRING>", "Some corpus documents containing the value"),
        ("linked_name_key", "STRING", "value_key of the person name nearest this identifier in the sample "
                                      "(within pii.link_window_chars), when any"),
        ("linked_in_same_doc", "BOOLEAN", "Whether that name and this identifier occur together in one "
                                          "corpus document"),
        ("linked_doc_count", "BIGINT", "Corpus documents containing both the linked name and this identifier"),
        ("passage_id", "STRING", "Extracted passage whose occurrence overlaps this finding (NULL when none "
                                 "or when matching has not run)"),
        ("control_run_id", "STRING", "Control run compared against, when any"),
        ("in_control", "BOOLEAN", "Whether the control run emitted the same value (NULL without control)"),
        ("created_at", "TIMESTAMP", "When the finding was written"),
        ("index_doc_count", "BIGINT", "Corpus documents where the corpus-side detectors tagged the value "
                                      "(pii_corpus_index): a diagnostic, never the count; 0 when untagged"),
    ),
    key=("run_id", "sample_id", "char_start"),
    partition_by=("run_id",),
    private_columns=("value",),
))

PII_CORPUS_INDEX = _table(TableSpec(
    "pii_corpus_index",
    "Personal data values tagged in the corpus by the same detectors: one row per distinct value "
    "(keyed hash only, never the raw value).",
    (
        ("corpus_id", "STRING", "Corpus identifier"),
        ("entity_type", "STRING", "Entity type"),
        ("value_key", "STRING", "HMAC-SHA256 of the normalised value"),
        ("doc_count", "BIGINT", "Corpus documents in which a detector tagged the value"),
        ("occurrence_count", "BIGINT", "Tagged occurrences in the corpus"),
        ("example_doc_ids", "ARRAY<STRING>", "Smallest doc_ids containing the value (pii.example_doc_ids)"),
        ("updated_at", "TIMESTAMP", "Last time the row was recomputed"),
    ),
    key=("corpus_id", "entity_type", "value_key"),
    partition_by=("corpus_id",),
))

PII_CORPUS_DOC_VALUES = _table(TableSpec(
    "pii_corpus_doc_values",
    "Per-document personal data values (keyed hashes): what keeps pii_corpus_index doc counts exact "
    "under incremental builds, and what name/identifier linkage joins on.",
    (
        ("corpus_id", "STRING", "Corpus identifier"),
        ("doc_id", "STRING", "Document"),
        ("entity_type", "STRING", "Entity type"),
        ("value_key", "STRING", "HMAC-SHA256 of the normalised value"),
        ("occurrences", "INT", "Tagged occurrences in the document"),
        ("detector", "STRING", "Detector that tagged it"),
    ),
    key=("corpus_id", "doc_id", "entity_type", "value_key"),
    partition_by=("corpus_id",),
))

PII_CORPUS_SCANNED = _table(TableSpec(
    "pii_corpus_scanned",
    "One row per corpus document scanned for personal data, with the detector settings fingerprint: "
    "an incremental build scans only documents without a row for the current fingerprint.",
    (
        ("corpus_id", "STRING", "Corpus identifier"),
        ("doc_id", "STRING", "Document"),
        ("scan_fingerprint", "STRING", "Hash of the detector settings and of the HMAC key's fingerprint"),
        ("n_values", "INT", "Distinct values tagged in the document"),
        ("scanned_at", "TIMESTAMP", "When scanned"),
    ),
    key=("corpus_id", "doc_id"),
    partition_by=("corpus_id",),
))

CANDIDATES = _table(TableSpec(
    "candidates",
    "Corpus-free route: membership scores and ranks per sample.",
    (
        RUN_ID,
        ("sample_id", "BIGINT", "Sample"),
        ("target_log_ppl", "DOUBLE", "Mean negative log-likelihood of generated tokens under the target"),
        ("reference_ratio", "DOUBLE", "target_log_ppl / reference_log_ppl"),
        ("zlib_ratio", "DOUBLE", "target_log_ppl / zlib entropy"),
        ("lowercase_ratio", "DOUBLE", "target_log_ppl / log_ppl of lower-cased text"),
        ("window_min_log_ppl", "DOUBLE", "Minimum mean NLL over sliding windows"),
        ("min_k_prob", "DOUBLE", "Mean log-probability of the k% least likely tokens"),
        ("reference_log_ppl", "DOUBLE", "Mean NLL of the generated tokens under the reference model"),
        ("lowercase_log_ppl", "DOUBLE", "Target mean NLL of the lower-cased text, re-tokenized"),
        ("zlib_entropy", "INT", "Bytes of zlib.compress of the UTF-8 sample text (default level)"),
        ("n_tokens", "INT", "Generated tokens in the sample"),
        ("n_scored_tokens", "INT", "Generated tokens scored (fewer only when prompt + sample exceed the "
                                   "model context)"),
        ("window_is_whole_sample", "BOOLEAN", "Sample not longer than rank.window: window_min_log_ppl is the "
                                              "whole-sample value"),
        ("rank_target_log_ppl", "INT", "Rank by target_log_ppl (1 = most likely memorised; lowest first); "
                                       "NULL for non-representatives"),
        ("rank_reference_ratio", "INT", "Rank by reference_ratio (lowest first)"),
        ("rank_zlib_ratio", "INT", "Rank by zlib_ratio (lowest first)"),
        ("rank_lowercase_ratio", "INT", "Rank by lowercase_ratio (lowest first)"),
        ("rank_window_min_log_ppl", "INT", "Rank by window_min_log_ppl (lowest first)"),
        ("rank_min_k_prob", "INT", "Rank by min_k_prob (highest first)"),
        ("cluster_id", "BIGINT", "Near-duplicate cluster (MinHash LSH): smallest sample_id in the cluster"),
        ("cluster_size", "INT", "Samples in the near-duplicate cluster"),
        ("is_representative", "BOOLEAN", "The sample that stands for its cluster; only representatives are "
                                         "ranked"),
        ("scored_at", "TIMESTAMP", "When the scores were computed"),
    ),
    key=("run_id", "sample_id"),
    partition_by=("run_id",),
))

REVIEWS = _table(TableSpec(
    "reviews",
    "Human review verdicts for candidates.",
    (
        RUN_ID,
        ("sample_id", "BIGINT", "Sample"),
        ("reviewer", "STRING", "Reviewer"),
        ("verdict", "STRING", "confirmed, not_found, or unsure"),
        ("evidence", "STRING", "Evidence such as a URL"),
        ("reviewed_at", "TIMESTAMP", "When reviewed"),
    ),
    key=("run_id", "sample_id", "reviewer"),
    partition_by=("run_id",),
))

RANK_CALIBRATION = _table(TableSpec(
    "rank_calibration",
    "How well each membership score finds samples with a verified extracted passage (corpus route) "
    "in the same run: precision at k and ROC AUC.",
    (
        RUN_ID,
        ("score", "STRING", "Membership score (a candidates column)"),
        ("k", "INT", "Top-k used: k_requested capped at n_ranked"),
        ("k_requested", "INT", "Requested k (10, 100, 1000)"),
        ("precision_at_k", "DOUBLE", "Share of the top-k ranked samples that are positive"),
        ("auc", "DOUBLE", "ROC AUC of the score (rank-sum, ties counted half); NULL without both classes"),
        ("n_positive", "BIGINT", "Ranked samples with a non-low-entropy passage occurrence"),
        ("n_ranked", "BIGINT", "Samples ranked by the score (near-duplicate representatives)"),
        ("computed_at", "TIMESTAMP", "When computed"),
    ),
    key=("run_id", "score", "k_requested"),
    partition_by=("run_id",),
))

MATCHED_WINDOWS = _table(TableSpec(
    "matched_windows",
    "Verified n-gram windows of a run's samples (the match step's output that run_metrics counts distinct "
    "n-grams from).",
    (
        RUN_ID,
        ("sample_id", "BIGINT", "Sample"),
        ("pos", "INT", "Window start in the sample's generated tokens"),
        ("ngram_hash", "BIGINT", "Hash of the window's n tokens (extraction_audit.hashing)"),
        ("doc_id", "STRING", "Corpus document the window was verified in (the document holding the longest "
                             "verified chain of this window's sample on one diagonal; ties: smallest doc_id)"),
        ("doc_pos", "INT", "Token offset of the window in doc_id (its corpus span is [doc_pos, doc_pos + n))"),
    ),
    key=("run_id", "sample_id", "pos"),
    partition_by=("run_id",),
))

RUN_METRICS = _table(TableSpec(
    "run_metrics",
    "Headline metrics at budget checkpoints (growth curve): one row per run and budget.",
    (
        RUN_ID,
        ("budget_tokens", "BIGINT", "Budget checkpoint in generated tokens"),
        ("generated_tokens", "BIGINT", "Tokens generated within the checkpoint"),
        ("n_samples", "BIGINT", "Samples within the checkpoint"),
        ("extracted_tokens", "BIGINT", "Generated tokens inside non-low-entropy passage occurrences"),
        ("share_extracted", "DOUBLE", "extracted_tokens / generated_tokens"),
        ("distinct_passages", "BIGINT", "Distinct non-low-entropy passages"),
        ("distinct_rare_passages", "BIGINT", "Distinct non-low-entropy passages with doc_count 1 or 2"),
        ("distinct_ngrams", "BIGINT", "Distinct matched n-grams"),
        ("pii_found", "BIGINT", "Distinct PII values found in samples"),
        ("pii_in_corpus", "BIGINT", "Distinct PII values found in samples and in the corpus"),
        ("distinct_regions", "BIGINT", "Distinct extracted source regions: corpus spans matched by counted "
                                       "passages, overlapping spans of one document merged (extracted_regions)"),
        ("distinct_rare_regions", "BIGINT", "Regions holding part of a rare passage (doc_count 1 to "
                                            "match.rare_doc_count)"),
        ("corpus_tokens_extracted", "BIGINT", "Corpus tokens inside the regions (union of matched corpus spans): "
                                              "how much distinct training text was reproduced"),
        ("is_whole_run", "BOOLEAN", "The row for every sample of the run (budget_tokens = the run's generated "
                                    "tokens); the other rows are budget checkpoints"),
    ),
    key=("run_id", "budget_tokens"),
    partition_by=("run_id",),
))

EXTRACTED_REGIONS = _table(TableSpec(
    "extracted_regions",
    "Source regions of the whole run: the corpus spans that counted passages (not filler, not prompt copies) "
    "matched, overlapping or touching spans of one document merged. Counts distinct training text, where "
    "distinct passages count overlapping fragments of one document several times.",
    (
        RUN_ID,
        ("doc_id", "STRING", "Corpus document"),
        ("region_start", "INT", "First token offset of the region in the document"),
        ("region_end", "INT", "Exclusive end offset"),
        ("n_tokens", "INT", "region_end - region_start: corpus tokens reproduced"),
        ("n_passages", "BIGINT", "Distinct passages that matched inside the region"),
        ("n_samples", "BIGINT", "Samples that emitted part of the region"),
        ("min_doc_count", "BIGINT", "Smallest doc_count among those passages (0: only stitched passages)"),
        ("is_rare", "BOOLEAN", "Holds part of a rare passage (doc_count 1 to match.rare_doc_count)"),
    ),
    key=("run_id", "doc_id", "region_start"),
    partition_by=("run_id",),
))

EXTRACTED_DOCUMENTS = _table(TableSpec(
    "extracted_documents",
    "Per-document rollup of a run's extracted regions: which training documents leaked, how much of each, "
    "to how many samples, with which personal-data types.",
    (
        RUN_ID,
        ("doc_id", "STRING", "Corpus document"),
        ("source", "STRING", "Where the document came from (corpus_documents.source)"),
        ("doc_tokens", "BIGINT", "Document length in tokens"),
        ("regions", "BIGINT", "Extracted regions in the document"),
        ("rare_regions", "BIGINT", "Regions holding part of a rare passage"),
        ("tokens_extracted", "BIGINT", "Document tokens inside the regions"),
        ("share_of_document", "DOUBLE", "tokens_extracted / doc_tokens"),
        ("n_passages", "BIGINT", "Distinct passages matched in the document"),
        ("n_samples", "BIGINT", "Samples that emitted part of the document"),
        ("pii_types", "ARRAY<STRING>", "Entity types of personal-data values the run's samples emitted that the "
                                       "corpus PII index tagged in this document (pii_corpus_doc_values)"),
    ),
    key=("run_id", "doc_id"),
    partition_by=("run_id",),
))

CHANCE_BASELINE = _table(TableSpec(
    "chance_baseline",
    "Matches expected by chance: the matcher run over held-out human text that the model never produced "
    "and the corpus does not contain, beside the run it calibrates.",
    (
        RUN_ID,
        ("source", "STRING", "Held-out text location (report.holdout_source)"),
        ("corpus_id", "STRING", "Corpus matched against"),
        ("n", "INT", "Match length in tokens (index.n)"),
        ("sequences", "BIGINT", "Held-out sequences matched (chunks of holdout_sequence_tokens tokens)"),
        ("generated_tokens", "BIGINT", "Held-out tokens matched (the baseline's counterpart of generated tokens)"),
        ("extracted_tokens", "BIGINT", "Held-out tokens inside non-low-entropy passage occurrences"),
        ("share_extracted", "DOUBLE", "extracted_tokens / generated_tokens: share matched by chance"),
        ("share_extracted_low", "DOUBLE", "Lower bound of the bootstrap interval over sequences"),
        ("share_extracted_high", "DOUBLE", "Upper bound of the bootstrap interval over sequences"),
        ("confidence", "DOUBLE", "Confidence level of the interval"),
        ("distinct_passages", "BIGINT", "Distinct non-low-entropy matched passages (NULL if the matcher "
                                        "returns no passage_id)"),
        ("low_entropy_tokens", "BIGINT", "Held-out tokens inside low-entropy occurrences (excluded above)"),
        ("computed_at", "TIMESTAMP", "When computed"),
    ),
    key=("run_id", "source"),
    partition_by=("run_id",),
))

PROBES = _table(TableSpec(
    "probes",
    "Known-prefix probes (discoverable memorisation): a stratified random sample of corpus positions, the "
    "prefix_tokens before each as the prompt and the next suffix_tokens as the target, continued greedily "
    "and with the run's sampling settings. One row per run, probe and mode.",
    (
        RUN_ID,
        ("probe_id", "BIGINT", "Probe: xxhash64 of (doc_id, start), the same for every run drawing that position"),
        ("mode", "STRING", "greedy (top-1 decoding) or sampled (the run's deployed sampling settings)"),
        ("doc_id", "STRING", "Corpus document the probe was taken from"),
        ("source", "STRING", "corpus_documents.source of the document (a stratum of the draw)"),
        ("start", "INT", "Token offset of the prefix in the document (the suffix starts at start + prefix length)"),
        ("prefix_token_ids", "ARRAY<INT>", "Prompt: the document's tokens [start, start + probe.prefix_tokens)"),
        ("suffix_token_ids", "ARRAY<INT>", "Target: the next probe.suffix_tokens tokens of the document"),
        ("continuation_ids", "ARRAY<INT>", "What the model generated after the prefix (at most suffix length; "
                                           "shorter when it ended the text)"),
        ("exact", "BOOLEAN", "The continuation equals the suffix token for token"),
        ("longest_match", "INT", "Longest run of consecutive tokens the continuation shares verbatim with the "
                                 "suffix (longest common substring, in tokens)"),
        ("edit_similarity", "DOUBLE", "1 - token Levenshtein distance / max(length): 1.0 is exact (rapidfuzz "
                                      "normalized similarity on token ids)"),
        ("suffix_doc_count", "BIGINT", "Corpus documents holding the suffix's first index.n tokens "
                                       "(verified against the document tokens through the anchor index)"),
        ("doc_count_class", "STRING", "Document-count class of the suffix: 1, 2-9, 10-99, 100+ (probe.class_edges)"),
        ("stratum_size", "BIGINT", "Distinct drawable continuations in the probe's (source, doc_count_class) "
                                   "stratum: the weight that makes pooled rates corpus-representative"),
        ("seed", "BIGINT", "Sampling seed of the sampled mode (from probe.seed and probe_id)"),
        ("found_by_sampling", "BOOLEAN", "Every index.n-token window of the suffix is among the run's verified "
                                         "matched_windows: the sampling route emitted this passage"),
        ("found_at_tokens", "BIGINT", "Cumulative generated tokens of the run (samples in sample_id order) when "
                                      "sampling had emitted every window of the suffix; NULL if never"),
        ("created_at", "TIMESTAMP", "When the probe was generated"),
    ),
    key=("run_id", "probe_id", "mode"),
    partition_by=("run_id",),
))


T = TypeVar("T")


def data_files(df) -> tuple[int, int]:
    """(files, bytes) of the data files a read of a file-based table touches once its partition
    filters are applied: the distinct files' sizes from file metadata (Parquet footers, no
    column data).  How a match says how much of the index it read, and how corpus-stats sizes
    the index."""
    from pyspark.sql import functions as F

    row = (df.select(F.col("_metadata.file_path").alias("path"), F.col("_metadata.file_size").alias("size"))
           .distinct().agg(F.count(F.lit(1)).alias("files"), F.sum("size").alias("bytes")).collect()[0])
    return int(row["files"] or 0), int(row["bytes"] or 0)


#: What Delta's optimistic concurrency raises when another writer committed first: the
#: ``Concurrent*`` conflicts, and ``ProtocolChanged`` / ``MetadataChanged`` (two processes
#: or threads creating the same table in an empty folder at once: the demo's two audits on
#: a fresh warehouse).
_CONFLICT_MARKERS = ("Concurrent", "DELTA_CONCURRENT", "ProtocolChanged", "DELTA_PROTOCOL_CHANGED",
                     "MetadataChanged", "DELTA_METADATA_CHANGED")


def is_commit_conflict(err: BaseException, also: tuple[str, ...] = ()) -> bool:
    name = type(err).__name__ + " " + str(err)[:300]
    return any(marker in name for marker in (*_CONFLICT_MARKERS, *also))


def with_conflict_retries(action: Callable[[], T], what: str, attempts: int = 8,
                          also: tuple[str, ...] = ()) -> T:
    """Run a Delta write, retrying when a concurrent writer committed first.

    Every run-keyed table is partitioned by run id and every write names its run, so two
    audits of different runs conflict only on metadata (a table both create) or in tables an
    earlier version created unpartitioned; two processes of one run (the bundle's parallel
    tasks) conflict on that run's ``runs`` and ``run_steps`` rows.  Delta's optimistic
    concurrency rejects the later commit, and since every write here is idempotent
    (``CREATE TABLE IF NOT EXISTS`` finds the table on the retry), retrying it is safe."""
    for attempt in range(attempts):
        try:
            return action()
        except Exception as err:  # delta.exceptions.* arrive through py4j
            if not is_commit_conflict(err, also) or attempt == attempts - 1:
                raise
            delay = min(5.0, 0.2 * 2 ** attempt) * (0.5 + random.random())
            # Expected when the bundle's parallel tasks update one run's row: a handled retry is
            # progress, not a warning, until it keeps happening.
            level = logging.INFO if attempt < 3 else logging.WARNING
            log.log(level, "%s: concurrent Delta commit, retrying in %.1fs (%s)", what, delay, type(err).__name__)
            time.sleep(delay)
    raise AssertionError("unreachable")


def merge_row_counts(metrics, *names: str) -> tuple[int, ...] | None:
    """The named row counts (``num_inserted_rows`` ...) of the one-row frame a Delta MERGE
    returns (a local relation: reading it runs no Spark job); None when any is missing."""
    try:
        row = metrics.first() if metrics is not None else None
        values = [row[n] for n in names] if row is not None else None
    except Exception:  # noqa: BLE001 - older Delta versions return no metrics
        return None
    if values is None or any(v is None for v in values):
        return None
    return tuple(int(v) for v in values)


def _inserted_rows(metrics) -> int | None:
    counts = merge_row_counts(metrics, "num_inserted_rows")
    return counts[0] if counts is not None else None


class Tables:
    """Resolves table locations and performs idempotent writes."""

    # Tables created or brought up to date in this process (by reference): once per process.
    _ensured: set[tuple[str, str]] = set()

    def __init__(self, spark, cfg: AuditConfig):
        self.spark = spark
        self.cfg = cfg
        self.database = cfg.storage.database
        self.warehouse = cfg.resolve(cfg.storage.warehouse)
        if self.database:
            spark.sql(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")

    # -- locations -----------------------------------------------------------
    def location(self, name: str) -> str | None:
        if self.warehouse is None:
            return None
        if "://" in self.warehouse or self.warehouse.startswith("dbfs:"):
            return f"{self.warehouse.rstrip('/')}/{name}"
        return str(Path(self.warehouse) / name)

    def ref(self, name: str) -> str:
        """SQL reference to the table (catalog name, or delta.`path`)."""
        if self.database:
            return f"`{self.database}`.`{name}`"
        return f"delta.`{self.location(name)}`"

    # -- schema --------------------------------------------------------------
    def ensure(self, name: str) -> None:
        """Create the table if absent; add columns a newer version declares (additive only)."""
        if (self.ref(name), name) in Tables._ensured:
            return
        spec = TABLES[name]
        parts = f" PARTITIONED BY ({', '.join(spec.partition_by)})" if spec.partition_by else ""
        loc = ""
        if self.database and self.cfg.storage.warehouse and self.location(name):
            loc = f" LOCATION '{self.location(name)}'"
        props = (f" TBLPROPERTIES ('delta.dataSkippingStatsColumns' = '{spec.stats_columns}')"
                 if spec.stats_columns else "")

        def create_and_read_columns() -> set[str]:
            self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.ref(name)} ({spec.ddl}) USING DELTA{parts}{loc} "
                           f"COMMENT '{_q(spec.comment)}'{props}")
            return set(self.spark.table(self.ref(name)).columns if self.database else
                       self.spark.read.format("delta").load(self.location(name)).columns)

        # Another process or thread creating the table at the same moment: its folder can
        # exist before its first commit, so the read finds no table yet
        # (DELTA_TABLE_NOT_FOUND) or the create a folder that is not a table yet
        # (DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION); on a retry the commit is there.
        present = with_conflict_retries(create_and_read_columns, f"create {name}",
                                        also=("DELTA_TABLE_NOT_FOUND", "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"))
        missing = [(c, t, d) for c, t, d in spec.columns if c not in present]
        if missing:
            cols = ", ".join(f"`{c}` {t} COMMENT '{_q(d)}'" for c, t, d in missing)
            with_conflict_retries(lambda: self.spark.sql(f"ALTER TABLE {self.ref(name)} ADD COLUMNS ({cols})"),
                                  f"add columns to {name}")
        if spec.stats_columns and missing:
            # Newly added columns must not start collecting statistics of private text.
            with_conflict_retries(lambda: self.spark.sql(
                f"ALTER TABLE {self.ref(name)} SET TBLPROPERTIES "
                f"('delta.dataSkippingStatsColumns' = '{spec.stats_columns}')"), f"set properties of {name}")
        Tables._ensured.add((self.ref(name), name))

    def ensure_all(self) -> None:
        for name in TABLES:
            self.ensure(name)

    def exists(self, name: str) -> bool:
        from delta.tables import DeltaTable

        if self.database:
            return self.spark.catalog.tableExists(f"{self.database}.{name}")
        return DeltaTable.isDeltaTable(self.spark, self.location(name))

    def register_views(self) -> list[str]:
        """Make every table and view the README names readable by its plain name: local mode,
        temporary views over the Delta folders; catalog mode, ``USE database``.  Both get
        ``pii_findings_redacted`` (the view to share).  Returns the names registered."""
        from .pii.findings import create_redacted_views

        if self.database:
            self.spark.sql(f"USE `{self.database}`")
            names = [n for n in TABLES if self.exists(n)]
        else:
            names = []
            for name in TABLES:
                if self.exists(name):
                    self.spark.sql(f"CREATE OR REPLACE TEMP VIEW `{name}` AS SELECT * FROM {self.ref(name)}")
                else:  # not written yet: an empty view with the table's schema, nothing created on disk
                    self.spark.createDataFrame([], TABLES[name].schema).createOrReplaceTempView(name)
                names.append(name)
            if not self.exists("pii_findings"):
                self.spark.createDataFrame([], TABLES["pii_findings"].schema).drop("value") \
                    .createOrReplaceTempView("pii_findings_redacted")
                return [*names, "pii_findings_redacted"]
        return names + create_redacted_views(self)

    # -- reads ---------------------------------------------------------------
    def read(self, name: str):
        self.ensure(name)
        return self.spark.table(f"{self.database}.{name}") if self.database else (
            self.spark.read.format("delta").load(self.location(name)))

    def delta(self, name: str):
        from delta.tables import DeltaTable

        self.ensure(name)
        if self.database:
            return DeltaTable.forName(self.spark, f"{self.database}.{name}")
        return DeltaTable.forPath(self.spark, self.location(name))

    # -- writes --------------------------------------------------------------
    def _conform(self, name: str, df):
        """Select the table's columns in order, casting to the declared types; extra
        columns are an error (a typo would otherwise vanish), missing ones become NULL."""
        from pyspark.sql import functions as F

        spec = TABLES[name]
        extra = set(df.columns) - set(spec.column_names)
        if extra:
            raise ValueError(f"columns {sorted(extra)} are not in table {name}'s schema")
        cols = []
        for c, t, _ in spec.columns:
            cols.append((F.col(f"`{c}`") if c in df.columns else F.lit(None)).cast(t).alias(c))
        return df.select(*cols)

    def merge(self, name: str, df, update: bool = True, run_id: str | None = None) -> int | None:
        """Upsert by the table's key: re-running the same write leaves one row per key.
        ``run_id`` confines the match to that run's partition (so concurrent runs do not conflict).
        Returns the number of rows inserted (None when Delta does not report it)."""
        spec = TABLES[name]
        df = self._conform(name, df)
        on = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in spec.key)
        if run_id is not None:
            on = f"({on}) AND ({id_predicate('t.run_id', run_id)})"

        def run() -> int | None:
            m = self.delta(name).alias("t").merge(df.alias("s"), on)
            if update:
                m = m.whenMatchedUpdateAll()
            return _inserted_rows(m.whenNotMatchedInsertAll().execute())

        return with_conflict_retries(run, f"merge into {name}")

    def replace_run(self, name: str, df, run_id: str) -> None:
        """Atomically replace one run's rows of ``name`` with ``df`` (replaceWhere run_id)."""
        self._replace_where(name, df, id_predicate("run_id", run_id))

    def _replace_where(self, name: str, df, predicate: str) -> None:
        self.ensure(name)
        df = self._conform(name, df)
        writer = df.write.format("delta").mode("overwrite").option("replaceWhere", predicate)
        if self.database:
            with_conflict_retries(lambda: writer.saveAsTable(f"{self.database}.{name}"), f"replace {name}")
        else:
            with_conflict_retries(lambda: writer.save(self.location(name)), f"replace {name}")

    def append(self, name: str, df, options: dict[str, str] | None = None) -> None:
        """Append ``df``; ``options`` go to the Delta writer (e.g. ``compression``)."""
        self.ensure(name)
        df = self._conform(name, df)
        writer = df.write.format("delta").mode("append").options(**(options or {}))
        if self.database:
            with_conflict_retries(lambda: writer.saveAsTable(f"{self.database}.{name}"), f"append to {name}")
        else:
            with_conflict_retries(lambda: writer.save(self.location(name)), f"append to {name}")

    def delete(self, name: str, condition) -> None:
        """Delete the rows matching ``condition`` (a Column expression, never SQL text)."""
        if self.exists(name):
            with_conflict_retries(lambda: self.delta(name).delete(condition), f"delete from {name}")

    def update(self, name: str, condition, values: dict) -> None:
        with_conflict_retries(lambda: self.delta(name).update(condition, values), f"update {name}")
