"""The probe stage: known-prefix probes of the run's model (discoverable memorisation).

Why: sampling from short public prompts finds only part of what a model reproduces when
given a passage's true opening words (one study: about a third), so the sampling route's
rate is a lower bound of unknown slack.  Probes measure the other number, the one
open-weight model cards report: for a stratified sample of corpus positions, how often the
model continues the true ``prefix_tokens`` with the true next ``suffix_tokens`` verbatim
(greedy) or nearly so, and, per probe, whether the sampling route of the same run found
that passage (``found_by_sampling``, ``found_at_tokens``), so the report can give the
share of the reproducible passages that sampling recovered at each budget checkpoint.

Generation reuses ``generate`` as is: the same backends (``generation.backend``), batch
size, tasks per chunk, GPU resource profile and per-sample seeded sampler.  Greedy is the
sampler with ``top_k = 1``; sampled is the run's ``generation.sampling`` with
``max_new_tokens = suffix_tokens`` and a seed per probe from (``probe.seed``, probe_id).

Resumable and idempotent like ``samples``: the plan is a pure function of the seed and
the index; each round generates the missing (probe, mode) rows of one chunk and commits
them with one insert-only MERGE keyed (run_id, probe_id, mode), so a kill loses at most
the chunk in flight and a rerun adds only what is missing.  When rows were already there
(a resumed or redone step), the ``found_*`` columns are refreshed with one
``replaceWhere run_id`` write from the current match results.

Reads ``corpus_documents``, ``samples``, ``matched_windows``, ``probes``;
writes ``probes``.
"""

from __future__ import annotations

import logging
import math
import time

from ..config import AuditConfig, SamplingConfig
from ..errors import UserFacingError
from ..tables import Tables

log = logging.getLogger(__name__)

GREEDY = SamplingConfig(temperature=1.0, top_k=1, top_p=None, typical_p=None, repetition_penalty=None)


def mode_sampling(cfg: AuditConfig, mode: str) -> SamplingConfig:
    """The sampling settings of a probe mode, generating exactly ``suffix_tokens`` tokens."""
    base = GREEDY if mode == "greedy" else cfg.generation.sampling
    return base.model_copy(update={"max_new_tokens": int(cfg.probe.suffix_tokens)})


def _after_commit(run_id: str, mode: str, chunk: int) -> None:
    """Hook called after each committed chunk (tests inject a failure here)."""


def run_probe(spark, cfg: AuditConfig, run_id: str, tables: Tables | None = None, scratch: str | None = None) -> dict:
    """Draw the probes, generate the missing ones in each mode, score and commit them; returns
    the step statistics."""
    from pyspark.sql import functions as F

    from ..generate.backends import BackendSpec
    from ..generate.job import _resource_profile, generate_on_executors, model_context_length
    from ..generate.worker import WorkerSpec
    from ..index import NgramIndex
    from ..scratch import delete_path, materialise
    from ..tokenizer import check_model_location
    from .draw import draw, with_tokens

    started = time.monotonic()
    tables = tables or Tables(spark, cfg)
    pc, gen = cfg.probe, cfg.generation
    scratch = (scratch or f"{cfg.resolve(cfg.storage.warehouse)}/_staging/{run_id}/probe").rstrip("/")
    model_path = check_model_location(cfg.resolve(cfg.model.path), "model.path")
    context = model_context_length(model_path)
    if context is not None and pc.prefix_tokens + pc.suffix_tokens > context:
        raise UserFacingError(f"probe.prefix_tokens + probe.suffix_tokens = {pc.prefix_tokens + pc.suffix_tokens} "
                              f"exceeds the model's context ({context})")
    index = NgramIndex(spark, cfg, tables)
    meta = index.require_meta()

    chosen, cand, sizes = draw(spark, cfg, index.ngrams(), index.documents())
    plan = materialise(with_tokens(cfg, chosen, index.documents(), meta.hash_config), f"{scratch}/plan")
    cand.unpersist()
    log.info("probe %s: plan drawn in %.1f s", run_id, time.monotonic() - started)
    found = materialise(found_by_sampling(spark, tables, run_id, plan, scratch), f"{scratch}/found")
    n_probes = plan.count()
    log.info("probe %s: %d probes, found_by_sampling in %.1f s", run_id, n_probes, time.monotonic() - started)
    n_chunks = max(1, math.ceil(n_probes / pc.chunk_probes))
    plan = plan.withColumn("chunk", F.pmod(F.col("probe_id"), F.lit(n_chunks)))
    run_rows = tables.read("probes").where(F.col("run_id") == run_id)
    present_before = run_rows.count()

    profile = _resource_profile(gen)
    generated = 0
    gen_seconds = 0.0
    for mode in pc.modes:
        spec = WorkerSpec(backend=BackendSpec(backend=gen.backend, model_path=model_path,
                                              tokenizer_path=cfg.resolve(cfg.model.tokenizer_path),
                                              dtype=cfg.model.dtype, device=cfg.model.device,
                                              sampling_json=mode_sampling(cfg, mode).model_dump_json()),
                          batch_size=gen.batch_size)
        have = run_rows.where(F.col("mode") == mode).select("probe_id")
        for chunk in range(n_chunks):
            pending = plan.where(F.col("chunk") == chunk).join(have, "probe_id", "left_anti").drop("chunk")
            pending = pending.join(found, "probe_id", "left").persist()
            try:
                n = pending.count()
                if n == 0:
                    continue
                t0 = time.monotonic()
                gen_plan = pending.select(
                    F.col("probe_id").alias("sample_id"), F.lit("probe").alias("prompt_strategy"),
                    F.lit(None).cast("string").alias("prompt_text"),
                    F.col("prefix_token_ids").alias("prompt_token_ids"),
                    "seed", F.lit(int(pc.suffix_tokens)).alias("max_new_tokens"),
                    F.lit(None).cast("string").alias("repeat_word"))
                out = generate_on_executors(gen_plan, n, spec, gen.samples_per_task, profile)
                rows = score_rows(pending.join(out.select(F.col("sample_id").alias("probe_id"),
                                                          F.col("token_ids").alias("continuation_ids")), "probe_id"))
                rows = (rows.withColumn("run_id", F.lit(run_id)).withColumn("mode", F.lit(mode))
                        .withColumn("created_at", F.current_timestamp()))
                # Generated once: Delta's MERGE plans a persisted source again (and would run
                # the generation a second time); it reads this written copy instead.
                written = materialise(rows, f"{scratch}/chunk_rows")
                try:
                    tables.merge("probes", written, update=False, run_id=run_id)
                finally:
                    delete_path(spark, f"{scratch}/chunk_rows")
                gen_seconds += time.monotonic() - t0
                generated += n
                log.info("probe %s: %s chunk %d/%d committed (+%d probes)", run_id, mode, chunk + 1, n_chunks, n)
                _after_commit(run_id, mode, chunk)
            finally:
                pending.unpersist()
    refreshed = False
    if present_before:
        refreshed = refresh_found(spark, tables, run_id, found, scratch)
    stats = probe_stats(tables, run_id, cfg)
    seconds = time.monotonic() - started
    stats.update({
        "probes_drawn": n_probes, "strata": int(len(sizes)), "chunks": n_chunks,
        "rows_added": generated, "rows_already_present": present_before, "found_refreshed": refreshed,
        "strata_sizes": sizes.to_dict(orient="records"), "seconds": round(seconds, 3),
        "probes_per_second": round(generated / gen_seconds, 2) if gen_seconds > 0 else None,
    })
    return stats


def score_rows(df):
    """Adds exact, longest_match and edit_similarity (``kernels.score_frame`` per Arrow batch)."""
    from pyspark.sql.types import BooleanType, DoubleType, IntegerType, StructField, StructType

    from .kernels import score_frame

    schema = StructType(df.schema.fields + [StructField("exact", BooleanType()),
                                            StructField("longest_match", IntegerType()),
                                            StructField("edit_similarity", DoubleType())])

    def run(batches):
        for pdf in batches:
            yield score_frame(pdf)

    return df.mapInPandas(run, schema).drop("suffix_hashes", "ngram_hash")


def found_by_sampling(spark, tables: Tables, run_id: str, plan, scratch: str):
    """Per probe: ``found_by_sampling`` (every n-gram window of the suffix is a verified
    matched window of the run) and ``found_at_tokens`` (the run's cumulative generated tokens,
    samples in sample_id order, by which the last of those windows had been emitted)."""
    from pyspark.sql import functions as F

    from ..ordering import ordered

    windows = plan.select("probe_id", F.explode("suffix_hashes").alias("ngram_hash"))
    matched = tables.read("matched_windows").where(F.col("run_id") == run_id)
    if matched.limit(1).count() == 0:  # nothing matched (or no samples): nothing found
        return plan.select("probe_id", F.lit(False).alias("found_by_sampling"),
                           F.lit(None).cast("bigint").alias("found_at_tokens"))
    samples = tables.read("samples").where(F.col("run_id") == run_id).select("sample_id", "n_tokens")
    cum = ordered(samples, [F.col("sample_id").asc()], running_sums={"cum_tokens": F.col("n_tokens")},
                  scratch=scratch)
    first = (matched.select("sample_id", "ngram_hash")
             .join(cum.select("sample_id", "cum_tokens"), "sample_id")
             .groupBy("ngram_hash").agg(F.min("cum_tokens").alias("first_tokens")))
    return (windows.join(first, "ngram_hash", "left").groupBy("probe_id")
            .agg(F.count(F.lit(1)).alias("_w"), F.count("first_tokens").alias("_f"),
                 F.max("first_tokens").alias("_t"))
            .select("probe_id", (F.col("_w") == F.col("_f")).alias("found_by_sampling"),
                    F.when(F.col("_w") == F.col("_f"), F.col("_t")).alias("found_at_tokens")))


def refresh_found(spark, tables: Tables, run_id: str, found, scratch: str) -> bool:
    """Rewrite the run's probes with the current ``found_*`` columns (rows written by an
    earlier attempt, before match was redone, may hold old values)."""
    from pyspark.sql import functions as F

    from ..scratch import materialise

    rows = tables.read("probes").where(F.col("run_id") == run_id).drop("found_by_sampling", "found_at_tokens")
    fresh = materialise(rows.join(found, "probe_id", "left"), f"{scratch}/refreshed")
    tables.replace_run("probes", fresh, run_id)
    return True


def probe_stats(tables: Tables, run_id: str, cfg: AuditConfig) -> dict:
    """Rates per mode over the run's probes (pooled, unweighted) for the step record."""
    from pyspark.sql import functions as F

    rows = (tables.read("probes").where(F.col("run_id") == run_id).groupBy("mode")
            .agg(F.count(F.lit(1)).alias("probes"), F.avg(F.col("exact").cast("double")).alias("exact_rate"),
                 F.avg((F.col("edit_similarity") >= cfg.probe.approx_similarity).cast("double")).alias("approx_rate"),
                 F.avg(F.col("found_by_sampling").cast("double")).alias("found_by_sampling_rate"))
            .collect())
    return {"by_mode": {r["mode"]: {k: (round(float(r[k]), 4) if isinstance(r[k], float) else r[k])
                                    for k in ("probes", "exact_rate", "approx_rate", "found_by_sampling_rate")}
                        for r in rows}}
