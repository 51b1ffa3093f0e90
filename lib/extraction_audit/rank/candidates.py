"""The ``rank`` step: score every sample of a run, collapse near-duplicates, rank.

Reads ``samples`` (one run); writes ``candidates`` (that run's slice, replaced atomically,
so a re-run never duplicates rows) and the step's counts into ``runs.step_stats``.

Scoring runs inside ``mapInPandas``: each Python worker loads the target (and, when asked,
the reference) model once, and scores Arrow batches in forward passes of
``rank.batch_size`` padded sequences, on the GPU when one is visible.  Ranks are computed
over near-duplicate representatives only (``dedup.py``); other rows keep their scores
with NULL ranks.  Formulas: ``scores.py``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from functools import partial
from typing import Iterator

import numpy as np

from ..config import AuditConfig
from ..errors import UserFacingError
from ..tables import Tables
from .dedup import near_duplicate_clusters
from .scores import SCORES, combine_scores, token_logprobs

log = logging.getLogger(__name__)

SCORED_SCHEMA = (
    "sample_id BIGINT, target_log_ppl DOUBLE, reference_log_ppl DOUBLE, lowercase_log_ppl DOUBLE, "
    "zlib_entropy INT, reference_ratio DOUBLE, zlib_ratio DOUBLE, lowercase_ratio DOUBLE, "
    "window_min_log_ppl DOUBLE, min_k_prob DOUBLE, n_scored_tokens INT, window_is_whole_sample BOOLEAN"
)
_DOUBLE_COLUMNS = ("target_log_ppl", "reference_log_ppl", "lowercase_log_ppl", "reference_ratio",
                   "zlib_ratio", "lowercase_ratio", "window_min_log_ppl", "min_k_prob")


@dataclass(frozen=True)
class ScoringSettings:
    """Everything a worker needs, small enough to ship in the task closure."""

    scores: tuple[str, ...]
    target_path: str
    tokenizer_path: str
    target_max_length: int | None
    bos_token_id: int
    reference_path: str | None
    reference_max_length: int | None
    reference_tokenizer_path: str | None  # None: reference scores the target's token ids
    reference_bos_token_id: int | None
    device: str
    dtype: str
    batch_size: int
    window: int
    min_k_percent: float

    @property
    def needs(self) -> frozenset[str]:
        return frozenset().union(*(SCORES[s].needs for s in self.scores))


def scoring_settings(cfg: AuditConfig) -> ScoringSettings:
    """Validate models and tokenizers on the driver; fail naming the setting."""
    from ..tokenizer import load_tokenizer
    from .model_cache import describe_model

    scores = tuple(cfg.rank.scores)
    target_path = cfg.resolve(cfg.model.path)
    tokenizer_path = cfg.resolve(cfg.model.tokenizer_path)
    target = describe_model(target_path, "model.path")
    tok = load_tokenizer(tokenizer_path)
    bos = _bos_id(tok, target.bos_token_id, "model.tokenizer")
    needs_reference = any("reference" in SCORES[s].needs for s in scores)
    reference = ref_tok_path = ref_bos = None
    if needs_reference:
        if not cfg.model.reference_path:
            raise UserFacingError("rank.scores includes reference_ratio but model.reference_path is not set "
                                  "(set it, or remove reference_ratio from rank.scores)")
        reference = describe_model(cfg.resolve(cfg.model.reference_path), "model.reference_path")
        ref_bos = bos
        if cfg.rank.reference_tokenizer:
            ref_tok_path = cfg.resolve(cfg.rank.reference_tokenizer)
            ref_bos = _bos_id(load_tokenizer(ref_tok_path), reference.bos_token_id, "rank.reference_tokenizer")
        elif reference.vocab_size < target.vocab_size:
            raise UserFacingError(
                f"model.reference_path has a vocabulary of {reference.vocab_size} but the target has "
                f"{target.vocab_size}: set rank.reference_tokenizer if the reference uses other token ids")
    return ScoringSettings(
        scores=scores, target_path=target_path, tokenizer_path=tokenizer_path,
        target_max_length=target.max_length, bos_token_id=bos,
        reference_path=reference.path if reference else None,
        reference_max_length=reference.max_length if reference else None,
        reference_tokenizer_path=ref_tok_path, reference_bos_token_id=ref_bos,
        device=cfg.model.device, dtype=cfg.model.dtype, batch_size=cfg.rank.batch_size,
        window=cfg.rank.window, min_k_percent=cfg.rank.min_k_percent,
    )


def _bos_id(tok, config_bos: int | None, setting: str) -> int:
    for candidate in (tok.bos_token_id, config_bos, tok.eos_token_id):
        if candidate is not None:
            return int(candidate)
    raise UserFacingError(f"{setting}: the tokenizer has no bos or eos token, so samples with an empty prompt "
                          "cannot be conditioned on anything")


def score_batch(pdf, settings: ScoringSettings):
    """Scores of one pandas batch of samples (columns sample_id, prompt_token_ids,
    token_ids, prompt_text, text): the per-batch kernel, usable without Spark."""
    import pandas as pd

    from ..tokenizer import load_tokenizer
    from .model_cache import load_scoring_model

    model = load_scoring_model(settings.target_path, settings.device, settings.dtype)
    tok = load_tokenizer(settings.tokenizer_path)
    generated = [np.asarray(t, dtype=np.int64) for t in pdf["token_ids"]]
    contexts = [_context(p, settings.bos_token_id) for p in pdf["prompt_token_ids"]]
    texts = [t if isinstance(t, str) else tok.decode(g.tolist()) for t, g in zip(pdf["text"], generated)]
    run = partial(token_logprobs, batch_size=settings.batch_size, pad_id=0)
    target_lp = run(model, contexts, generated, max_length=settings.target_max_length)

    reference_lp = lowercase_lp = None
    if "reference" in settings.needs:
        reference = load_scoring_model(settings.reference_path, settings.device, settings.dtype)
        ref_ctx, ref_ids = contexts, generated
        if settings.reference_tokenizer_path:
            ref_tok = load_tokenizer(settings.reference_tokenizer_path)
            prompts = [p if isinstance(p, str) else "" for p in pdf["prompt_text"]]
            ref_ctx = [np.asarray(ids, dtype=np.int64) if ids else np.array([settings.reference_bos_token_id])
                       for ids in _encode(ref_tok, prompts)]
            ref_ids = [np.asarray(ids, dtype=np.int64) for ids in _encode(ref_tok, texts)]
        reference_lp = run(reference, ref_ctx, ref_ids, max_length=settings.reference_max_length)
    if "lowercase" in settings.needs:
        lowered = [np.asarray(ids, dtype=np.int64) for ids in _encode(tok, [t.lower() for t in texts])]
        lowercase_lp = run(model, contexts, lowered, max_length=settings.target_max_length)

    cols = combine_scores(target_lp, texts, window=settings.window, min_k_percent=settings.min_k_percent,
                          reference_lp=reference_lp, lowercase_lp=lowercase_lp)
    for name in SCORES:
        if name not in settings.scores:
            cols[name] = np.full(len(pdf), np.nan)
    return pd.DataFrame({"sample_id": pdf["sample_id"].to_numpy(), **cols})


def _context(prompt_ids, bos: int) -> np.ndarray:
    ids = np.asarray(prompt_ids if prompt_ids is not None else [], dtype=np.int64)
    return ids if len(ids) else np.array([bos], dtype=np.int64)


def _encode(tok, texts: list[str]) -> list[list[int]]:
    return tok(texts, add_special_tokens=False, truncation=False)["input_ids"] if texts else []


def _score_batches(batches: Iterator, settings: ScoringSettings):
    for pdf in batches:
        yield score_batch(pdf, settings)


def with_ranks(df, score_names: list[str], scratch: str | None = None):
    """Add ``rank_<score>`` columns: 1 = most likely memorised, ties broken by sample_id,
    computed over representatives with a non-NULL score only (others get NULL).

    One pass for every score: a long (sample, score, key) frame ranked per score by range
    partitions (``ordering.ordered``), never a window holding a whole run in one task."""
    from pyspark.sql import functions as F

    from ..ordering import ordered

    if not score_names:
        return df
    long = df.where(F.col("is_representative")).select("sample_id", F.explode(F.array(*[
        F.struct(F.lit(name).alias("score"), (F.col(name) if SCORES[name].ascending else -F.col(name)).alias("key"))
        for name in score_names])).alias("s")).select("sample_id", "s.score", "s.key").where(F.col("key").isNotNull())
    ranked = ordered(long, [F.col("key").asc(), F.col("sample_id").asc()], partition_by=["score"],
                     row_number="rank", scratch=scratch)
    wide = ranked.groupBy("sample_id").agg(*[
        F.max(F.when(F.col("score") == name, F.col("rank"))).cast("int").alias(SCORES[name].rank_column)
        for name in score_names])
    return df.drop(*[SCORES[n].rank_column for n in score_names if SCORES[n].rank_column in df.columns]).join(
        wide, "sample_id", "left")


def _sample_profile(samples):
    """One pass over the run's samples: counts, and the id range the models must cover."""
    from pyspark.sql import functions as F

    ids = F.concat(F.coalesce("token_ids", F.array().cast("array<int>")),
                   F.coalesce("prompt_token_ids", F.array().cast("array<int>")))
    usable = F.coalesce(F.size("token_ids"), F.lit(0)) > 0
    row = samples.agg(
        F.count("*").alias("samples"),
        F.sum(usable.cast("int")).alias("usable"),
        F.max(F.when(usable, F.array_max(ids))).alias("max_id"),
        F.min(F.when(usable, F.array_min(ids))).alias("min_id"),
    ).first()
    return {k: (int(v) if v is not None else None) for k, v in row.asDict().items()}


def _check_token_ids(samples, profile: dict, vocab_size: int, setting: str, run_id: str) -> None:
    """Token ids outside the model's vocabulary would fail deep inside a task: name a sample instead."""
    from pyspark.sql import functions as F

    if profile["max_id"] is None or (profile["max_id"] < vocab_size and profile["min_id"] >= 0):
        return
    bad = F.exists(F.concat(F.coalesce("token_ids", F.array().cast("array<int>")),
                            F.coalesce("prompt_token_ids", F.array().cast("array<int>"))),
                   lambda t: (t >= vocab_size) | (t < 0))
    row = samples.where(bad).select("sample_id").orderBy("sample_id").limit(1).first()
    value = profile["max_id"] if profile["max_id"] >= vocab_size else profile["min_id"]
    raise UserFacingError(
        f"run {run_id!r} sample {row['sample_id'] if row else '?'} has token ids outside the vocabulary "
        f"(size {vocab_size}) of {setting} (e.g. {value}): were the samples made with another tokenizer?")


def run_rank(spark, cfg: AuditConfig, run_id: str, tables: Tables | None = None, scratch: str | None = None) -> dict:
    """Fill ``candidates`` for one run; returns the step's counts (the runner records them)."""
    from pyspark.sql import functions as F

    from ..scratch import materialise, step_scratch
    from .model_cache import describe_model

    started = time.time()
    tables = tables or Tables(spark, cfg)
    scratch = scratch or step_scratch(cfg, run_id, "rank")
    samples = tables.read("samples").where(F.col("run_id") == run_id)
    profile = _sample_profile(samples)
    n_in = profile["samples"]
    if n_in == 0:
        raise UserFacingError(f"run {run_id!r} has no samples: run `extraction-audit generate` (or import "
                              "samples) first")
    settings = scoring_settings(cfg)
    usable = samples.where(F.coalesce(F.size("token_ids"), F.lit(0)) > 0)
    _check_token_ids(usable, profile, describe_model(settings.target_path, "model.path").vocab_size,
                     "model.path", run_id)
    if settings.reference_path and not settings.reference_tokenizer_path:
        _check_token_ids(usable, profile, describe_model(settings.reference_path, "model.reference_path").vocab_size,
                         "model.reference_path", run_id)

    dedup_started = time.time()
    clusters, dedup_stats = near_duplicate_clusters(
        usable, threshold=cfg.rank.minhash_threshold, num_perm=cfg.rank.minhash_num_perm,
        shingle_tokens=cfg.rank.shingle_tokens)
    dedup_stats["seconds"] = round(time.time() - dedup_started, 3)

    score_started = time.time()
    scored = usable.select("sample_id", "prompt_token_ids", "token_ids", "prompt_text", "text") \
        .mapInPandas(partial(_score_batches, settings=settings), SCORED_SCHEMA)
    scored = scored.select(*[
        F.when(F.isnan(c), None).otherwise(F.col(c)).alias(c) if c in _DOUBLE_COLUMNS else F.col(c)
        for c in scored.columns])
    candidates = (
        usable.select("run_id", "sample_id", F.size("token_ids").alias("n_tokens"))
        .join(scored, "sample_id")
        .join(clusters, "sample_id")
        .withColumn("scored_at", F.current_timestamp())
    )
    # Scores computed once, read by the rank pass and the write.
    candidates = materialise(candidates, f"{scratch}/scored")
    candidates = with_ranks(candidates, list(settings.scores), scratch=scratch)
    tables.replace_run("candidates", candidates, run_id)
    score_seconds = round(time.time() - score_started, 3)

    written = tables.read("candidates").where(F.col("run_id") == run_id)
    counts = written.agg(
        F.count("*").alias("scored"),
        F.sum(F.col("is_representative").cast("int")).alias("representatives"),
        F.countDistinct("cluster_id").alias("clusters"),
        F.sum((F.col("n_scored_tokens") < F.col("n_tokens")).cast("int")).alias("truncated_to_context"),
        F.sum(F.col("window_is_whole_sample").cast("int")).alias("window_is_whole_sample"),
        *[F.sum(F.col(s).isNull().cast("int")).alias(f"null_{s}") for s in settings.scores],
    ).first().asDict()
    stats = {
        "samples_in": n_in,
        "scored": int(counts["scored"] or 0),
        "skipped": {"no_generated_tokens": n_in - (profile["usable"] or 0)},
        "representatives": int(counts["representatives"] or 0),
        "clusters": int(counts["clusters"] or 0),
        "collapsed_duplicates": int((counts["scored"] or 0) - (counts["representatives"] or 0)),
        "truncated_to_context": int(counts["truncated_to_context"] or 0),
        "window_is_whole_sample": int(counts["window_is_whole_sample"] or 0),
        "null_scores": {s: int(counts[f"null_{s}"] or 0) for s in settings.scores},
        "scores": list(settings.scores),
        "device": cfg.model.device,
        "dedup": dedup_stats,
        "scoring_seconds": score_seconds,
        "seconds": round(time.time() - started, 3),
        "settings": {k: v for k, v in asdict(settings).items() if k in ("window", "min_k_percent", "batch_size")},
    }
    log.info("rank %s: %d samples, %d representatives, %.1fs", run_id, stats["scored"],
             stats["representatives"], stats["seconds"])
    return stats
