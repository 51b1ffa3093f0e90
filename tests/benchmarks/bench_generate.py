"""Generated tokens per second: the Spark generation path vs plain in-process generation.

Same model, same batch size, same samples (empty prompts, the same seeds, so the very
same tokens), measured in one process:

- ``in_process``: ``HFBackend.generate`` called batch after batch on the driver;
- ``spark_udf``: the plan DataFrame through ``mapInArrow`` (one task, warm Python
  worker with the model already loaded), counted with an aggregate, no table write;
- ``end_to_end``: ``run_generation`` (plan, Spark job, Delta commit, runs update);
- ``worker``: the function those Spark tasks run (``generate_batches``: plan Arrow batches
  in, sample Arrow batches out, text decoded, batches sorted by length) called directly,
  without a JVM: what the executor's Python does, less the Arrow transfer to and from Spark;
- ``hf_sample``: Hugging Face's own sampler (``do_sample=True``, top-k 40, constant
  temperature) on the same prompts and batch size, without our seeded per-sample
  sampler: the price of reproducible samples and of the temperature schedule.

``--without-spark`` measures ``in_process``, ``worker`` and ``hf_sample`` only, for a GPU
machine that has PyTorch but no Java or pyspark (the ``device`` machine).

Ratios are against ``in_process``.  With ``--device cuda`` the script also reports the
memory-bandwidth bound of decoding (every step must read all weights plus each row's
KV cache once) and the measured share of it, e.g. on one H200::

    python tests/benchmarks/bench_generate.py --device cuda --model-size 124m \\
        --batch-sizes 64,128,256,512 --max-new-tokens 256 --samples-per-batch 2 --bandwidth-gbs 4800

CPU (default) uses a small random GPT-2 (4 layers, 256 wide; a few minutes on two cores);
``--model-size tiny --batch-sizes 8 --max-new-tokens 32`` is a quick smoke run.  Add ``--vllm``
to measure the vLLM backend too when it is installed (without the temperature schedule,
which vLLM's V1 engine cannot apply).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import numpy as np  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--model-size", choices=["tiny", "small", "124m", "1.5b"], default="small",
                   help="random-weight GPT-2 shape (ignored with --model-dir)")
    p.add_argument("--model-dir", default=None, help="an existing model folder instead of a random one")
    p.add_argument("--tokenizer-dir", default=None)
    p.add_argument("--batch-sizes", default="16,64", help="comma-separated, e.g. 64,128,256,512")
    p.add_argument("--samples-per-batch", type=int, default=4, help="batches per measurement")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch (both paths)")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--bandwidth-gbs", type=float, default=4800.0, help="GPU memory bandwidth (H200: 4800)")
    p.add_argument("--no-schedule", action="store_true", help="constant temperature (no 10->1 decay)")
    p.add_argument("--skip-end-to-end", action="store_true")
    p.add_argument("--without-spark", action="store_true",
                   help="no JVM on this machine: measure in-process, the worker function and HF's own sampler only")
    p.add_argument("--vllm", action="store_true", help="also measure the vLLM backend when installed")
    p.add_argument("--work-dir", default=None)
    p.add_argument("--json-out", default=None, help="write the results as JSON here")
    p.add_argument("--full-path-budget", type=int, default=None,
                   help="instead of the per-batch rows: the whole `generate` step (runner, chunks, Delta "
                        "commits) with the product's default generation settings on local[*] up to this "
                        "many tokens, against in-process generation of the same samples (e.g. 200000)")
    return p.parse_args(argv)


def _sampling(args, schedule=True):
    from extraction_audit.config import SamplingConfig

    extra = {} if (args.no_schedule or not schedule) else {"temperature_start": 10.0, "temperature_decay_tokens": 20}
    return SamplingConfig(top_k=40, max_new_tokens=args.max_new_tokens, **extra)


def _plan(n, tok, sampling, seed=0):
    from extraction_audit.config import GenerationConfig, PromptStrategyConfig
    from extraction_audit.generate.prompts import PlanContext, build_plan

    gen = GenerationConfig(seed=seed, sampling=sampling, prompts=[PromptStrategyConfig(strategy="empty")])
    return build_plan(np.arange(n), PlanContext(gen, tok))


def measure_in_process(backend, plan, batch_size, max_new_tokens):
    prompts = [np.asarray(p) for p in plan["prompt_token_ids"]]
    seeds = plan["seed"].to_numpy()

    def run(n):
        return sum(int(backend.generate(prompts[i:i + batch_size], seeds[i:i + batch_size], max_new_tokens)
                       .lengths.sum()) for i in range(0, n, batch_size))

    return _throughput(lambda: run(batch_size), lambda: run(len(prompts)))


def _throughput(warm_up, measure) -> dict:
    """Tokens per second of ``measure()`` (which returns the tokens it generated), after one
    ``warm_up()``.  Every path warms up with a full-length batch: kernels for every sequence
    length, and the CUDA caching allocator's blocks for a whole batch's KV cache (a first
    batch at a new size pays cudaMalloc for each growth, 3x slower on the H200 than the
    batches after it)."""
    warm_up()
    _sync()
    start = time.perf_counter()
    tokens = measure()
    _sync()
    seconds = time.perf_counter() - start
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def measure_worker(plan, spec):
    """``generate_batches`` (the mapInArrow function) fed the plan as Arrow batches in this
    process: the executor's Python work without the JVM."""
    import pyarrow as pa

    from extraction_audit.generate.worker import generate_batches

    def run(p):
        batches = pa.Table.from_pandas(p, preserve_index=False).to_batches()
        out = generate_batches(iter(batches), spec)
        return sum(int(pa.compute.sum(b.column("n_tokens")).as_py() or 0) for b in out)

    return _throughput(lambda: run(plan.head(spec.batch_size)), lambda: run(plan))


def measure_hf_sample(backend, plan, batch_size, max_new_tokens, top_k=40):
    """Hugging Face's built-in sampling (one global RNG, constant temperature) on the same
    prompts: the baseline our seeded sampler is compared with.  EOS is disabled so every row
    runs ``max_new_tokens`` steps, as random weights rarely emit it anyway."""
    import torch

    from extraction_audit.generate.backends.hf import left_pad

    prompts = [np.asarray(p) for p in plan["prompt_token_ids"]]

    def batch(rows, steps):
        input_ids, mask, _ = left_pad(rows, backend.pad_id)
        with torch.inference_mode():
            out = backend.model.generate(
                input_ids=torch.from_numpy(input_ids).to(backend.device),
                attention_mask=torch.from_numpy(mask).to(backend.device),
                do_sample=True, top_k=top_k, temperature=1.0, max_new_tokens=steps, min_new_tokens=steps,
                pad_token_id=backend.pad_id, eos_token_id=None)
        return int((out.shape[1] - input_ids.shape[1]) * out.shape[0])

    return _throughput(lambda: batch(prompts[:batch_size], max_new_tokens),
                       lambda: sum(batch(prompts[i:i + batch_size], max_new_tokens)
                                   for i in range(0, len(prompts), batch_size)))


def measure_spark_udf(spark, plan, spec):
    from functools import partial

    from pyspark.sql import functions as F

    from extraction_audit.generate.job import PLAN_DDL
    from extraction_audit.generate.worker import WORKER_OUTPUT_DDL, generate_batches

    def run(p):
        df = spark.createDataFrame(p, schema=PLAN_DDL).repartition(1)
        out = df.mapInArrow(partial(generate_batches, spec=spec), WORKER_OUTPUT_DDL)
        return out.agg(F.sum("n_tokens")).collect()[0][0]

    run(plan.head(spec.batch_size).assign(max_new_tokens=np.int32(4)))  # warm worker: model loaded once
    start = time.perf_counter()
    tokens = int(run(plan))
    seconds = time.perf_counter() - start
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def measure_end_to_end(spark, cfg, run_id, budget):
    from extraction_audit.generate import run_generation

    start = time.perf_counter()
    stats = run_generation(spark, cfg, run_id, budget_tokens=budget)
    seconds = time.perf_counter() - start
    return {"tokens": stats["tokens_added"], "seconds": seconds, "tokens_per_s": stats["tokens_added"] / seconds,
            "chunks": stats["chunks"]}


def measure_full_path(args, model_dir, tokenizer_dir, work):
    """The product's ``generate`` step as the CLI runs it (runner, chunk rounds, one Delta
    commit per chunk, run state), counted from the moment the Spark session is up, against
    the same samples generated in this process with the same settings.  Default
    generation settings (batch size, samples per task, chunks) and all cores: what a user
    of the local default gets.  In-process runs with torch's own thread count (all cores)
    and with one thread, batch after batch; the ratio is against the faster of the two."""
    import torch

    from extraction_audit.config import parse_config
    from extraction_audit.generate.backends import BackendSpec, get_backend
    from extraction_audit.runner import Runner
    from extraction_audit.spark import get_spark
    from extraction_audit.tables import Tables

    sampling = _sampling(args)
    cfg = parse_config({
        "storage": {"warehouse": str(work / "full-path-warehouse"), "cache_dir": str(work / "cache"),
                    "allow_raw_pii": True},
        "spark": {"log_file": str(work / "spark.log")},
        "model": {"path": model_dir, "tokenizer": tokenizer_dir, "device": args.device, "dtype": args.dtype},
        "generation": {"sampling": sampling.model_dump(), "prompts": [{"strategy": "empty"}],
                       "budget_tokens": args.full_path_budget},
    })
    cfg.base_dir = str(work)
    start = time.perf_counter()
    spark = get_spark(cfg)
    session_s = time.perf_counter() - start
    start = time.perf_counter()
    tables = Tables(spark, cfg)
    tables.ensure_all()
    tables_s = time.perf_counter() - start
    start = time.perf_counter()
    stats = Runner(spark, cfg, tables).run_step("bench-full-path", "generate",
                                               {"budget_tokens": args.full_path_budget})
    full_s = time.perf_counter() - start
    gen = cfg.generation
    full = {"tokens": stats["tokens_added"], "samples": stats["samples"], "chunks": stats["chunks"],
            "seconds": full_s, "tokens_per_s": stats["tokens_added"] / full_s,
            "session_start_s": session_s, "table_creation_s": tables_s,
            "master": spark.sparkContext.master, "batch_size": gen.batch_size,
            "samples_per_task": gen.samples_per_task}
    spark.stop()

    spec = BackendSpec("hf", model_dir, tokenizer_dir, args.dtype, args.device, sampling.model_dump_json())
    backend = get_backend(spec)
    plan = _plan(stats["samples"], backend.tokenizer, sampling, seed=gen.seed)
    in_process = {}
    for threads in sorted({os.cpu_count() or 1, 1}, reverse=True):
        torch.set_num_threads(threads)
        in_process[threads] = measure_in_process(backend, plan, gen.batch_size, sampling.max_new_tokens)
    best = max(in_process.values(), key=lambda r: r["tokens_per_s"])
    return {"full_path": full, "in_process_by_threads": in_process,
            "ratio_to_in_process": full["tokens_per_s"] / best["tokens_per_s"]}


def bandwidth_bound(model, batch_size, prompt_len, max_new_tokens, bandwidth_gbs):
    """Tokens/s if each decode step only had to stream the weights and the KV cache once."""
    import torch

    params = sum(p.numel() for p in model.parameters())
    tied = getattr(model.config, "tie_word_embeddings", True)
    weight_bytes = params * next(model.parameters()).element_size()
    cfg = model.config
    layers = getattr(cfg, "n_layer", None) or cfg.num_hidden_layers
    width = getattr(cfg, "n_embd", None) or cfg.hidden_size
    elem = torch.finfo(next(model.parameters()).dtype).bits // 8
    mean_context = prompt_len + max_new_tokens / 2
    kv_bytes_per_row = 2 * layers * width * elem * mean_context
    step_seconds = (weight_bytes + batch_size * kv_bytes_per_row) / (bandwidth_gbs * 1e9)
    return {"params": params, "tied_embeddings": tied, "weight_bytes": weight_bytes,
            "kv_bytes_per_row_mean": kv_bytes_per_row, "tokens_per_s": batch_size / step_seconds}


def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import torch

    from extraction_audit.config import parse_config
    from extraction_audit.generate.backends import BackendSpec, get_backend
    from extraction_audit.generate.random_model import build_random_assets
    from extraction_audit.generate.worker import WorkerSpec

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda but no CUDA device is visible")
    torch.set_num_threads(args.threads)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench-generate-"))
    if args.model_dir:
        model_dir, tokenizer_dir = args.model_dir, args.tokenizer_dir or args.model_dir
    else:
        model_dir, tokenizer_dir = build_random_assets(work / "assets", shape=args.model_size)
    if args.full_path_budget:
        result = measure_full_path(args, model_dir, tokenizer_dir, work)
        full = result["full_path"]
        print(f"full generate path on {full['master']}: {full['tokens']:,} tokens, {full['samples']:,} samples in "
              f"{full['chunks']} chunks, {full['seconds']:.1f} s = {full['tokens_per_s']:,.0f} tok/s "
              f"(session start {full['session_start_s']:.1f} s and table creation {full['table_creation_s']:.1f} s "
              "not counted)")
        for threads, r in result["in_process_by_threads"].items():
            print(f"in-process, torch threads {threads}: {r['tokens']:,} tokens in {r['seconds']:.1f} s = "
                  f"{r['tokens_per_s']:,.0f} tok/s")
        print(f"full path / best in-process: x{result['ratio_to_in_process']:.2f}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(result, indent=2, default=float))
        return 0
    sampling = _sampling(args)
    spark_conf = {"spark.task.cpus": str(args.threads)} if args.device == "cpu" else {}
    base = {
        "storage": {"warehouse": str(work / "warehouse"), "cache_dir": str(work / "cache")},
        "spark": {"master": f"local[{args.threads}]", "shuffle_partitions": 1, "conf": spark_conf},
        "model": {"path": model_dir, "tokenizer": tokenizer_dir, "device": args.device, "dtype": args.dtype},
        "generation": {"sampling": sampling.model_dump(), "prompts": [{"strategy": "empty"}]},
    }
    spark = None
    if not args.without_spark:
        from extraction_audit.spark import get_spark

        spark = get_spark(parse_config(base))
    spec = BackendSpec("hf", model_dir, tokenizer_dir, args.dtype, args.device, sampling.model_dump_json())
    backend = get_backend(spec)
    n_params = sum(p.numel() for p in backend.model.parameters())
    print(f"model {Path(model_dir).name}: {n_params / 1e6:.1f}M parameters, {backend.model.dtype}, "
          f"device {backend.device}, torch threads {torch.get_num_threads()}, max_new_tokens {args.max_new_tokens}, "
          f"sampling {'constant T' if args.no_schedule else 'T 10->1 over 20'} top_k 40")
    results = []
    for batch_size in [int(b) for b in args.batch_sizes.split(",")]:
        n = batch_size * args.samples_per_batch
        plan = _plan(n, backend.tokenizer, sampling)
        row = {"batch_size": batch_size, "samples": n}
        row["in_process"] = measure_in_process(backend, plan, batch_size, args.max_new_tokens)
        row["worker"] = measure_worker(plan, WorkerSpec(spec, batch_size))
        row["hf_sample"] = measure_hf_sample(backend, plan, batch_size, args.max_new_tokens)
        if spark is not None:
            row["spark_udf"] = measure_spark_udf(spark, plan, WorkerSpec(spec, batch_size))
        if spark is not None and not args.skip_end_to_end:
            cfg = parse_config({**base, "generation": {
                **base["generation"], "batch_size": batch_size, "samples_per_task": n, "chunk_samples": n,
                "budget_tokens": n * args.max_new_tokens}})
            cfg.base_dir = str(work)
            row["end_to_end"] = measure_end_to_end(spark, cfg, f"bench-b{batch_size}", n * args.max_new_tokens)
        if args.device == "cuda":
            row["bandwidth_bound"] = bandwidth_bound(backend.model, batch_size, 1, args.max_new_tokens,
                                                     args.bandwidth_gbs)
        if args.vllm:
            row["vllm"] = _measure_vllm(args, model_dir, tokenizer_dir, plan, batch_size)
        base_rate = row["in_process"]["tokens_per_s"]
        for key in ("worker", "hf_sample", "spark_udf", "end_to_end", "vllm"):
            if isinstance(row.get(key), dict) and "tokens_per_s" in row[key]:
                row[key]["ratio_to_in_process"] = row[key]["tokens_per_s"] / base_rate
        if "bandwidth_bound" in row:
            bound = row["bandwidth_bound"]["tokens_per_s"]
            row["bandwidth_bound"]["in_process_share"] = base_rate / bound
            for key in ("worker", "spark_udf"):
                if key in row:
                    row["bandwidth_bound"][f"{key}_share"] = row[key]["tokens_per_s"] / bound
        results.append(row)
        _print_row(row)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2, default=float))
    print(json.dumps(results, default=float))
    return 0


def _measure_vllm(args, model_dir, tokenizer_dir, plan, batch_size):
    from extraction_audit.errors import UserFacingError
    from extraction_audit.generate.backends import BackendSpec, get_backend

    spec = BackendSpec("vllm", model_dir, tokenizer_dir, args.dtype, args.device,
                       _sampling(args, schedule=False).model_dump_json())
    try:
        backend = get_backend(spec)
    except UserFacingError as err:
        return {"skipped": str(err)}
    return measure_in_process(backend, plan, batch_size, args.max_new_tokens)


def _print_row(row):
    parts = [f"batch {row['batch_size']:>4}", f"in-process {row['in_process']['tokens_per_s']:>10,.0f} tok/s"]
    for key, label in (("worker", "worker"), ("hf_sample", "hf sample"), ("spark_udf", "spark udf"),
                       ("end_to_end", "end-to-end"), ("vllm", "vllm")):
        r = row.get(key)
        if isinstance(r, dict) and "tokens_per_s" in r:
            parts.append(f"{label} {r['tokens_per_s']:>10,.0f} tok/s (x{r['ratio_to_in_process']:.2f})")
        elif isinstance(r, dict):
            parts.append(f"{label} skipped ({r.get('skipped')})")
    if "bandwidth_bound" in row:
        b = row["bandwidth_bound"]
        shares = ", ".join(f"{key.replace('_', ' ')} {100 * b[f'{key}_share']:.2f}%"
                           for key in ("in_process", "worker", "spark_udf") if f"{key}_share" in b)
        parts.append(f"bound {b['tokens_per_s']:,.0f} tok/s ({shares})")
    print(" | ".join(parts), flush=True)


if __name__ == "__main__":
    sys.exit(main())
