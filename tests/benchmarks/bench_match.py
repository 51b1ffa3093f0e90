"""Matching at scale: ``import-samples`` + ``match`` end to end vs infini-gram and numpy, same data, same run.

    pip install infini-gram            # benchmark-only dependency (suffix-array baseline)
    python tests/benchmarks/bench_match.py --corpus-tokens 20000000 \\
        --sample-tokens 128000,1000000,10000000 --demo-dir /tmp/ea/demo-assets

One corpus of about ``--corpus-tokens`` tokens ("unique" text from ``bench_index.py``: its
50-token spans repeat only by chance) is indexed by both tools with the same local
tokenizer.  Then, for each size in ``--sample-tokens``, a JSONL file of samples of
``--sample-length`` token ids (random ids from the tokenizer's vocabulary, about 10% of
them carrying a 60-150 token span copied from a corpus document, seeded) is checked by:

* ours: ``extraction-audit match --input`` (import and match in one command: one process,
  one session; the ratios use it), and ``import-samples`` then ``match`` as two commands on
  another run id for comparison (``local[C]`` on ``--cores``, pinned with ``taskset`` when
  available), as a user runs them: wall time of each command, JVM and session start included;
* infini-gram ``count`` on every 50-token window (stride 1) of every sample, the query an
  n-gram membership audit makes of a suffix array, one call per window;
* infini-gram ``creativity`` on every sample (the longest corpus match at each position,
  one call per sample: the suffix array's own way to find every copied span);
* numpy, one process: the project's 50-gram hash over the corpus token stream, sorted
  unique hashes, and ``np.searchsorted`` membership of the samples' window hashes (the
  lookup is timed apart from the corpus hashing).

infini-gram and numpy run on one thread.  For large sizes infini-gram is timed on a seeded
random subset (``--count-max-windows`` windows, ``--creativity-max-samples`` samples) and its
rate extrapolated; the output says where.  Prints, per size: our import, match and total
seconds, sample tokens/s and seconds per million sample tokens; the rivals' rates; the
ratios with their goals:

* 128 k sample tokens: ours end to end >= 1.0x infini-gram ``creativity`` tokens/s;
* 1 M sample tokens:   ours end to end >= 10x infini-gram per-window ``count`` tokens/s;
* our cost per sample token stays flat or falls as runs grow (within 10% per step);

and the bytes on disk of both indexes.  Nothing is downloaded: ``HF_HUB_OFFLINE`` /
``TRANSFORMERS_OFFLINE`` are set for every child process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_index as bi  # noqa: E402 - the corpus, tokenizer, subprocess and infini-gram helpers

N = bi.N  # index.n: the span length matched by the audit
PLANTED_SHARE = 0.1
PLANTED_LENGTHS = (60, 150)
COST_TOLERANCE = 1.10  # "flat": a larger run may cost at most 10% more per sample token


# ------------------------------------------------------------------------------ corpus tokens


@dataclass
class CorpusTokens:
    """The corpus as the index sees it: every document's ids laid end to end."""

    tokens: np.ndarray  # int32, all documents concatenated
    lengths: np.ndarray  # int64, one per document
    starts: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.starts = np.cumsum(self.lengths) - self.lengths

    def document(self, i: int) -> np.ndarray:
        return self.tokens[self.starts[i]:self.starts[i] + self.lengths[i]]


def tokenize_corpus(corpus: bi.Corpus, tokenizer_dir: Path, batch: int = 2000) -> CorpusTokens:
    """Ids exactly as ``index`` makes them (``encode_batch``: whole documents, no special tokens)."""
    from extraction_audit.tokenizer import encode_batch, load_tokenizer

    tok = load_tokenizer(str(tokenizer_dir))
    pieces: list[np.ndarray] = []
    lengths: list[int] = []

    def flush(texts: list[str]) -> None:
        for ids in encode_batch(tok, texts):
            pieces.append(np.asarray(ids, dtype=np.int32))
            lengths.append(len(ids))

    for path in sorted(corpus.path.glob("*.jsonl")):
        texts: list[str] = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                texts.append(json.loads(line)["text"])
                if len(texts) == batch:
                    flush(texts)
                    texts = []
        flush(texts)
    return CorpusTokens(np.concatenate(pieces), np.asarray(lengths, dtype=np.int64))


# ------------------------------------------------------------------------------------ samples


@dataclass
class Samples:
    size: int  # the requested sample tokens (names the run)
    path: Path
    tokens: np.ndarray  # int32, samples laid end to end
    length: int  # every sample has this many tokens
    planted: int  # samples carrying a corpus span

    @property
    def count(self) -> int:
        return len(self.tokens) // self.length

    @property
    def windows(self) -> int:
        return self.count * max(self.length - N + 1, 0)

    def sample(self, i: int) -> np.ndarray:
        return self.tokens[i * self.length:(i + 1) * self.length]


def sample_vocabulary(tokenizer_dir: Path) -> tuple[np.ndarray, int | None]:
    """Ids a model could emit (special tokens left out), and the EOS id infini-gram asks for."""
    from extraction_audit.tokenizer import load_tokenizer, vocab_size

    tok = load_tokenizer(str(tokenizer_dir))
    special = set(tok.all_special_ids)
    ids = np.array([i for i in range(vocab_size(tok)) if i not in special], dtype=np.int32)
    return ids, tok.eos_token_id


def write_samples(root: Path, size: int, length: int, vocabulary: np.ndarray, corpus: CorpusTokens,
                  seed: int) -> Samples:
    """``size // length`` samples of random ids; ``PLANTED_SHARE`` of them carry a copied span."""
    rng = np.random.default_rng([seed, size])
    count = max(size // length, 1)
    tokens = vocabulary[rng.integers(0, len(vocabulary), size=count * length)]
    donors = np.flatnonzero(corpus.lengths >= PLANTED_LENGTHS[1])
    lo, hi = PLANTED_LENGTHS[0], min(PLANTED_LENGTHS[1], length)
    planted = 0
    if len(donors) and hi >= lo:
        for i in np.flatnonzero(rng.random(count) < PLANTED_SHARE):
            doc = corpus.document(int(donors[rng.integers(len(donors))]))
            span = int(rng.integers(lo, hi + 1))
            src = int(rng.integers(0, len(doc) - span + 1))
            dst = int(i) * length + int(rng.integers(0, length - span + 1))
            tokens[dst:dst + span] = doc[src:src + span]
            planted += 1
    path = root / f"samples-{size}.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            ids = tokens[i * length:(i + 1) * length].tolist()
            f.write(json.dumps({"id": f"bench-{size}-{i:08d}", "token_ids": ids}) + "\n")
    return Samples(size, path, tokens, length, planted)


# ----------------------------------------------------------------------------------------- ours


def ours(cfg: Path, samples: Samples, args, logs: Path) -> dict:
    """``match --input`` (import and match in one command, one process and session: what the
    ratios use), then ``import-samples`` and ``match`` as two commands on another run id."""
    sets = [x for s in args.set for x in ("--set", s)]
    pin = not args.no_pin
    run_id = f"bench-{samples.size}"
    one_s, out = bi.timed(bi.pinned(bi.ea_cli("match", "--config", str(cfg), "--run-id", run_id, "--input",
                                              str(samples.path), *sets), args.cores, pin),
                          logs / f"match-input-{run_id}.log")
    imported = re.search(r"imported ([\d,]+) of ([\d,]+) records.*?holds ([\d,]+) samples, ([\d,]+) tokens",
                         out, flags=re.S)
    stats = bi.last_json(out)
    two = f"{run_id}-two"
    import_s, _ = bi.timed(bi.pinned(bi.ea_cli("import-samples", "--config", str(cfg), "--run-id", two,
                                               "--input", str(samples.path), *sets), args.cores, pin),
                           logs / f"import-{two}.log")
    match_s, two_out = bi.timed(bi.pinned(bi.ea_cli("match", "--config", str(cfg), "--run-id", two, *sets),
                                          args.cores, pin), logs / f"match-{two}.log")
    same = {k: bi.last_json(two_out).get(k) for k in ("verified_windows", "occurrences", "passages")}
    return {
        "total_s": one_s, "import_s": import_s, "match_s": match_s, "two_commands_s": import_s + match_s,
        "samples_imported": int(imported.group(1).replace(",", "")) if imported else None,
        "run_tokens": int(imported.group(4).replace(",", "")) if imported else None,
        "tokens_per_s": len(samples.tokens) / one_s,
        "s_per_m_tokens": one_s / (len(samples.tokens) / 1e6),
        "match_inner_s": stats.get("seconds"),
        "verified_windows": stats.get("verified_windows"),
        "occurrences": stats.get("occurrences"),
        "passages": stats.get("passages"),
        "two_commands_agree": same == {k: stats.get(k) for k in same},
        "index_rows_read": stats.get("index_rows_read"),
        "index_files_read": stats.get("index_files_read"),
        "index_bytes_read": stats.get("index_bytes_read"),
    }


# ------------------------------------------------------------------------------------ rivals


def infini_gram_engine(index_dir: Path, eos_token_id: int | None):
    """The engine over the index ``bench_index.infini_gram_build`` wrote (u16 tokens, version 4)."""
    from infini_gram.engine import InfiniGramEngine

    return InfiniGramEngine(index_dir=str(index_dir), eos_token_id=int(eos_token_id or 0), vocab_size=65535,
                            version=4, token_dtype="u16")


def infini_gram_count(engine, samples: Samples, max_windows: int, seed: int) -> dict:
    """``count`` of every 50-token window, or of a seeded random subset of them (rate extrapolated).
    The windows are Python lists before the clock starts: only the engine is timed."""
    per_sample = samples.length - N + 1
    total = samples.windows
    if total > max_windows:
        rng = np.random.default_rng([seed, samples.size, 1])
        picked = np.sort(rng.choice(total, size=max_windows, replace=False))
    else:
        picked = np.arange(total)
    starts = (picked // per_sample) * samples.length + picked % per_sample
    windows = [samples.tokens[s:s + N].tolist() for s in starts]
    t0 = time.perf_counter()
    counts = [engine.count(input_ids=w)["count"] for w in windows]
    seconds = time.perf_counter() - t0
    windows_per_s = len(windows) / seconds
    return {"timed_windows": len(windows), "windows": total, "subset": len(windows) < total, "seconds": seconds,
            "windows_per_s": windows_per_s, "tokens_per_s": len(samples.tokens) / (total / windows_per_s),
            "found_share": sum(c > 0 for c in counts) / max(len(counts), 1)}


def infini_gram_creativity(engine, samples: Samples, max_samples: int, seed: int) -> dict:
    """``creativity`` of every sample, or of a seeded random subset (rate extrapolated)."""
    if samples.count > max_samples:
        picked = np.sort(np.random.default_rng([seed, samples.size, 2]).choice(samples.count, size=max_samples,
                                                                                replace=False))
    else:
        picked = np.arange(samples.count)
    queries = [samples.sample(int(i)).tolist() for i in picked]
    t0 = time.perf_counter()
    results = [engine.creativity(input_ids=q)["rs"] for q in queries]
    seconds = time.perf_counter() - t0
    # rs[l] is the end r of the longest span input_ids[l:r] found in the corpus.
    covered = sum(int((np.asarray(rs) - np.arange(len(rs)) >= N).sum()) for rs in results)
    timed_tokens = len(queries) * samples.length
    return {"timed_samples": len(queries), "samples": samples.count, "subset": len(queries) < samples.count,
            "seconds": seconds, "tokens_per_s": timed_tokens / seconds,
            "found_share": covered / max(len(queries) * (samples.length - N + 1), 1)}


@dataclass
class NumpyIndex:
    hashes: np.ndarray  # sorted unique 50-gram hashes of the corpus
    build_s: float


def numpy_index(corpus: CorpusTokens) -> NumpyIndex:
    from extraction_audit.hashing import HashConfig, hash_concatenated

    t0 = time.perf_counter()
    hashes, _, _ = hash_concatenated(corpus.tokens, corpus.lengths, HashConfig(n=N))
    unique = np.unique(hashes)
    return NumpyIndex(unique, time.perf_counter() - t0)


def numpy_lookup(index: NumpyIndex, samples: Samples) -> dict:
    """Hash the samples' windows and look each up with ``np.searchsorted`` (membership only)."""
    from extraction_audit.hashing import HashConfig, hash_concatenated

    t0 = time.perf_counter()
    hashes, _, _ = hash_concatenated(samples.tokens, np.full(samples.count, samples.length), HashConfig(n=N))
    at = np.searchsorted(index.hashes, hashes).clip(0, len(index.hashes) - 1)
    found = int((index.hashes[at] == hashes).sum())
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "tokens_per_s": len(samples.tokens) / seconds, "found_windows": found}


# ------------------------------------------------------------------------------------ report


def rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def num(x: int | None) -> str:
    return "n/a" if x is None else f"{x:,}"


def ratio_goal(ours_rate: float, rival: dict | None, target: float, judged: str | None) -> str:
    """``ours / rival`` and, at the size the goal is judged at, whether it is met."""
    if rival is None:
        return "n/a"
    value = ours_rate / rival["tokens_per_s"]
    if judged is None:
        return f"{value:,.3f}x"
    return f"{value:,.3f}x (goal >= {target:g}{judged}: {'goal met' if value >= target else 'goal NOT met'})"


def judged_at(sizes: list[Samples], target: int) -> tuple[Samples, str]:
    """A goal stated at ``target`` sample tokens is judged at the size run nearest to it."""
    nearest = min(sizes, key=lambda x: abs(math.log(len(x.tokens) / target)))
    return nearest, "" if nearest.size == target else f", stated at {target:,} tokens, judged at the nearest size run"


def header(args, tokenizer_dir: Path, corpus: bi.Corpus, corpus_tokens: CorpusTokens) -> None:
    print("=" * 100)
    rival = "(infini-gram skipped)" if args.skip_infini_gram else "vs infini-gram count / creativity"
    print(f"Matching at scale: extraction-audit match --input (import + match, end to end) {rival} vs numpy lookup")
    print(bi.machine_line())
    pin = bi.pinned_cores(args)
    print(f"ours: local[{args.cores}], pinned with taskset: {pin}; infini-gram and numpy: one thread; "
          f"index.n={N}; extra --set: {args.set or 'none'}")
    print(f"tokenizer: {tokenizer_dir}")
    print(f"corpus: {corpus.documents:,} documents, {corpus.text_bytes:,} text bytes, "
          f"{len(corpus_tokens.tokens):,} tokens, {corpus.path}")
    print(f"samples: {args.sample_length} tokens each, ~{PLANTED_SHARE:.0%} with a planted "
          f"{PLANTED_LENGTHS[0]}-{PLANTED_LENGTHS[1]} token corpus span; sizes {args.sample_tokens}")
    print("=" * 100, flush=True)


def print_size(samples: Samples, o: dict, count: dict | None, creativity: dict | None, lookup: dict) -> None:
    tokens = len(samples.tokens)
    print(f"\n{tokens:,} sample tokens ({samples.count:,} samples, {samples.planted:,} with a planted span, "
          f"{samples.windows:,} windows)")
    print(f"  ours        match --input {o['total_s']:.1f}s (match step {o['match_inner_s']}s): "
          f"{o['tokens_per_s']:,.0f} tokens/s, "
          f"{o['s_per_m_tokens']:.2f} s per M tokens; imported {num(o['samples_imported'])} samples / "
          f"{num(o['run_tokens'])} tokens; {num(o['verified_windows'])} verified windows, "
          f"{num(o['occurrences'])} occurrences, {num(o['passages'])} passages")
    print(f"              as two commands: import-samples {o['import_s']:.1f}s + match {o['match_s']:.1f}s = "
          f"{o['two_commands_s']:.1f}s ({len(samples.tokens) / o['two_commands_s']:,.0f} tokens/s); same findings: "
          f"{o['two_commands_agree']}")
    if o.get("index_bytes_read") is not None:
        print(f"              index read by the match: {num(o['index_rows_read'])} anchor rows in "
              f"{num(o['index_files_read'])} files, {o['index_bytes_read'] / 1e6:,.1f} MB")
    if count:
        sub = (f"timed on a random {count['timed_windows']:,} of {count['windows']:,} windows, extrapolated"
               if count["subset"] else "every window timed")
        print(f"  infini-gram count       {count['seconds']:.1f}s: {count['windows_per_s']:,.0f} windows/s = "
              f"{count['tokens_per_s']:,.0f} sample tokens/s ({sub}); windows found {count['found_share']:.2%}")
    if creativity:
        sub = (f"timed on a random {creativity['timed_samples']:,} of {creativity['samples']:,} samples, "
               f"extrapolated" if creativity["subset"] else "every sample timed")
        print(f"  infini-gram creativity  {creativity['seconds']:.1f}s: {creativity['tokens_per_s']:,.0f} sample "
              f"tokens/s ({sub}); window starts with a >= {N}-token match {creativity['found_share']:.2%}")
    print(f"  numpy lookup            {lookup['seconds']:.2f}s: {lookup['tokens_per_s']:,.0f} sample tokens/s; "
          f"{lookup['found_windows']:,} windows found ({lookup['found_windows'] / max(samples.windows, 1):.2%})",
          flush=True)


def summary(sizes: list[Samples], results: dict, corpus_tokens: int, ours_bytes: dict, ig_bytes: int | None,
            numpy_idx: NumpyIndex) -> None:
    """One row per size, then the goals, each from this run only."""
    print("\nSUMMARY (all from this run; tokens/s are sample tokens per second)")
    cols = ("sample tokens", "two cmds s", "one cmd s", "ours tok/s", "s per M tok", "ig count tok/s",
            "ig creat. tok/s", "numpy tok/s", "ours/creativity", "ours/count")
    print("  " + " | ".join(f"{c:>15}" for c in cols))
    for s in sizes:
        o, c, cr, lk = results[s.size]
        row = (f"{len(s.tokens):,}", f"{o['two_commands_s']:.1f}", f"{o['total_s']:.1f}",
               rate(o["tokens_per_s"]), f"{o['s_per_m_tokens']:.2f}", rate(c and c["tokens_per_s"]),
               rate(cr and cr["tokens_per_s"]), rate(lk["tokens_per_s"]),
               "n/a" if cr is None else f"{o['tokens_per_s'] / cr['tokens_per_s']:.3f}",
               "n/a" if c is None else f"{o['tokens_per_s'] / c['tokens_per_s']:.3f}")
        print("  " + " | ".join(f"{x:>15}" for x in row))
    print()
    creativity_goal, creativity_note = judged_at(sizes, 128_000)
    count_goal, count_note = judged_at(sizes, 1_000_000)
    for s in sizes:
        o, c, cr, lk = results[s.size]
        print(f"  {len(s.tokens):>12,} tokens: ours / infini-gram creativity "
              f"{ratio_goal(o['tokens_per_s'], cr, 1.0, creativity_note if s is creativity_goal else None)}; "
              f"ours / infini-gram count "
              f"{ratio_goal(o['tokens_per_s'], c, 10.0, count_note if s is count_goal else None)}; "
              f"ours / numpy lookup {o['tokens_per_s'] / lk['tokens_per_s']:.4f}x")
    costs = [results[s.size][0]["s_per_m_tokens"] for s in sizes]
    flat = all(later <= earlier * COST_TOLERANCE for earlier, later in zip(costs, costs[1:]))
    trend = " -> ".join(f"{c:.2f}" for c in costs)
    verdict = "goal met" if flat else "goal NOT met"
    print(f"  our cost per sample token (s per M tokens) as runs grow: {trend} "
          f"(goal: flat or falling, within {COST_TOLERANCE - 1:.0%} per step: {verdict})")
    total = sum(ours_bytes.values())
    print(f"\n  index bytes on disk, ours: {total:,} B = {total / corpus_tokens:.3f} B/corpus token "
          f"({', '.join(f'{k} {v:,}' for k, v in ours_bytes.items())}; the document store is extra)")
    if ig_bytes is not None:
        print(f"  index bytes on disk, infini-gram folder (suffix array + token store + offsets + metadata): "
              f"{ig_bytes:,} B = {ig_bytes / corpus_tokens:.3f} B/corpus token")
    print(f"  numpy baseline: corpus hashing + sort {numpy_idx.build_s:.1f}s, {len(numpy_idx.hashes):,} unique "
          f"hashes = {numpy_idx.hashes.nbytes:,} B in memory")


# ----------------------------------------------------------------------------------------- main


def sizes_arg(text: str) -> list[int]:
    return sorted({int(float(x)) for x in text.split(",") if x.strip()})


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus-tokens", type=int, default=20_000_000, help="tokens in the indexed corpus")
    p.add_argument("--sample-tokens", type=sizes_arg, default=[128_000, 1_000_000, 10_000_000],
                   help="comma-separated sample token counts, one run each")
    p.add_argument("--sample-length", type=int, default=256, help="tokens per sample")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokenizer", default=None, help="an existing local tokenizer folder (skips --demo-dir and "
                                                      "--train-vocab)")
    p.add_argument("--demo-dir", default=None, help="demo assets folder (built there if missing; default: temp)")
    p.add_argument("--train-vocab", type=int, default=0,
                   help="instead of the demo tokenizer, train a byte-level BPE of this many entries (< 65535)")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="our Spark cores (local[C])")
    p.add_argument("--skip-infini-gram", action="store_true")
    p.add_argument("--infini-gram-mem", type=int, default=8, help="GiB given to infini-gram's --mem")
    p.add_argument("--count-max-windows", type=int, default=110_000,
                   help="infini-gram count: time at most this many windows per size (default: all of 128 k)")
    p.add_argument("--creativity-max-samples", type=int, default=500,
                   help="infini-gram creativity: time at most this many samples per size (default: all of 128 k)")
    p.add_argument("--no-pin", action="store_true", help="do not pin our commands to --cores with taskset")
    p.add_argument("--shuffle-partitions", type=int, default=0, help="spark.shuffle_partitions (0: 2 x cores)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra config override passed to extraction-audit, e.g. index.bucket_bits=4")
    p.add_argument("--work", default=None, help="working folder, kept afterwards (default: a new temp folder)")
    p.add_argument("--keep", action="store_true", help="keep the working folder")
    return p.parse_args()


def main() -> None:
    bi.run_in_work_folder(parse_args(), run, "bench-match-")


def run(args, work: Path) -> None:
    logs = work / "logs"
    tokenizer_dir = Path(args.tokenizer).resolve() if args.tokenizer else bi.local_tokenizer(args, work)
    files = max(2 * args.cores, math.ceil(args.corpus_tokens * 4 / 64e6))  # ~64 MB files at ~4 B/token
    shutil.rmtree(work / "corpus" / "unique", ignore_errors=True)
    corpus = bi.write_corpus(work / "corpus", "unique", args.corpus_tokens, tokenizer_dir, files, seed=args.seed)
    corpus_tokens = tokenize_corpus(corpus, tokenizer_dir)
    header(args, tokenizer_dir, corpus, corpus_tokens)

    print("INDEXES (setup, not part of the match measurements)")
    cfg = bi.ea_config(work, "match", corpus, tokenizer_dir, args.cores, args.shuffle_partitions)
    built = bi.our_build(cfg, args.cores, args, logs / "index.log")
    print(f"  ours: extraction-audit index {built['wall']:.1f}s, {num(built['tokens'])} tokens added")
    if built["tokens"] is not None and built["tokens"] != len(corpus_tokens.tokens):
        print(f"  WARNING: our index holds {built['tokens']:,} tokens, this benchmark's tokenization "
              f"{len(corpus_tokens.tokens):,}: the numpy baseline and planted spans may not match the index")
    warehouse = Path(yaml.safe_load(cfg.read_text())["storage"]["warehouse"])
    ours_bytes = {name: bi.folder_bytes(warehouse / name) for name in ("corpus_anchors", "corpus_doc_numbers")}
    engine = ig_bytes = None
    vocabulary, eos = sample_vocabulary(tokenizer_dir)
    if not args.skip_infini_gram:
        ig_dir = work / "infini-gram" / "match"
        ig = bi.infini_gram_build(corpus, tokenizer_dir, args.cores, ig_dir, args, logs / "infini-gram-index.log")
        ig_bytes = ig["total_bytes"]
        print(f"  infini-gram: indexing {ig['wall']:.1f}s ({args.cores} workers), {ig['tokens']:,} tokens")
        if ig["tokens"] != len(corpus_tokens.tokens):
            print(f"  WARNING: infini-gram holds {ig['tokens']:,} tokens, ours {len(corpus_tokens.tokens):,}: "
                  f"the two tools did not tokenize alike")
        engine = infini_gram_engine(ig_dir, eos)
    numpy_idx = numpy_index(corpus_tokens)
    print(f"  numpy: corpus hashing + sort {numpy_idx.build_s:.1f}s", flush=True)

    (work / "samples").mkdir(exist_ok=True)
    sizes: list[Samples] = []
    results: dict[int, tuple] = {}
    for size in args.sample_tokens:
        samples = write_samples(work / "samples", size, args.sample_length, vocabulary, corpus_tokens, args.seed)
        o = ours(cfg, samples, args, logs)
        count = creativity = None
        if engine is not None:
            count = infini_gram_count(engine, samples, args.count_max_windows, args.seed)
            creativity = infini_gram_creativity(engine, samples, args.creativity_max_samples, args.seed)
        lookup = numpy_lookup(numpy_idx, samples)
        print_size(samples, o, count, creativity, lookup)
        sizes.append(samples)
        results[size] = (o, count, creativity, lookup)
    summary(sizes, results, len(corpus_tokens.tokens), ours_bytes, ig_bytes, numpy_idx)


if __name__ == "__main__":
    main()
