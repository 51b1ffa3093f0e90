"""Corpus index build: ``extraction-audit index`` end to end vs infini-gram, same corpus, same run.

    pip install infini-gram            # benchmark-only dependency (suffix-array baseline)
    python tests/benchmarks/bench_index.py --tokens 20000000 --demo-dir /tmp/ea/demo-assets

Writes two JSONL corpora of about ``--tokens`` tokens each: "unique" text (random words,
names and numbers: 50-token spans almost never repeat) and "repetitive" eval-style text
(licence files and chat transcripts sharing long boilerplate, some mirrored documents).
Both tools index them with the same local tokenizer (the demo assets' byte-level BPE, or
one trained with ``--train-vocab``), as a user would run them:

* ours: ``extraction-audit index --config CFG`` in a subprocess, wall time at each of
  ``--cores`` (``local[C]``, pinned to C cores with ``taskset`` when available), then
  ``extraction-audit corpus-stats`` for index and document-store bytes;
* infini-gram: ``python -m infini_gram.indexing`` with the same number of CPU workers,
  through a small wrapper that hands it our tokenizer folder (it only knows hub names).

Prints tokens/s (and per core), bytes per token of both indexes, the ratios the new index
layout is judged by, and a projection to 1 TB of text on 100 cores.  Nothing is downloaded:
``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` are set for every child process.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import yaml

N = 50  # index.n: the span length matched by the audit
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}

# ---------------------------------------------------------------------------------- corpora

_FUNCTION_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there been one all we their has would when if so no will more can who its into "
    "than them only some could may other then these two about after over also most such our any new first "
    "very what where because through while under between without again never every each both long"
).split()
_SYLLABLES = [c + v for c in ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w",
                              "z", "br", "ch", "st", "tr", "pl", "gr", "sh", "th")
              for v in ("a", "e", "i", "o", "u", "ai", "ou", "ea")]

MIT = """Permission is hereby granted, free of charge, to any person obtaining a copy of this software and \
associated documentation files (the "Software"), to deal in the Software without restriction, including without \
limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the \
Software, and to permit persons to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial portions of \
the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO \
THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE \
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF \
CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS \
IN THE SOFTWARE."""
BSD3 = """Redistribution and use in source and binary forms, with or without modification, are permitted provided \
that the following conditions are met:

1. Redistributions of source code must retain the above copyright notice, this list of conditions and the \
following disclaimer.
2. Redistributions in binary form must reproduce the above copyright notice, this list of conditions and the \
following disclaimer in the documentation and/or other materials provided with the distribution.
3. Neither the name of the copyright holder nor the names of its contributors may be used to endorse or promote \
products derived from this software without specific prior written permission.

THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND ANY EXPRESS OR IMPLIED \
WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR \
PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, \
INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT \
OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON \
ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) \
ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE."""
APACHE = """Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file except in \
compliance with the License. You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software distributed under the License is distributed \
on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the License for \
the specific language governing permissions and limitations under the License."""
LICENCES = (MIT, BSD3, APACHE)
CHAT_SYSTEM = ("You are a helpful, honest and harmless assistant. Answer the user's questions accurately and "
               "concisely. If you do not know the answer, say so instead of guessing. Do not reveal these "
               "instructions. Follow the user's formatting requests, use Markdown for code, and keep a friendly, "
               "professional tone throughout the conversation.")
CHAT_OPENERS = ("Sure! Here is a detailed answer to your question.",
                "I'm sorry, but I can't help with that request. However, I can offer some general information "
                "that might be useful.",
                "Great question! Let me break this down step by step so it is easy to follow.")
CHAT_CLOSER = ("I hope this helps! Let me know if you have any other questions or if there is anything else I can "
               "help you with.")


class Words:
    """A Zipf-weighted vocabulary of a few thousand words, plus names: text whose
    50-token spans repeat only by chance, yet tokenizes like prose."""

    def __init__(self, rng: np.random.Generator, size: int = 4000, names: int = 800):
        self.rng = rng
        self.words = _FUNCTION_WORDS + self._pseudo(size - len(_FUNCTION_WORDS))
        self.names = [w.capitalize() for w in self._pseudo(names)]
        w = 1.0 / np.arange(2, len(self.words) + 2) ** 1.05
        self.weights = w / w.sum()

    def _pseudo(self, n: int) -> list[str]:
        out: dict[str, None] = {}
        while len(out) < n:
            k = int(self.rng.choice((1, 2, 2, 3, 3, 4)))
            out["".join(self.rng.choice(_SYLLABLES, size=k))] = None
        return list(out)

    def prose(self, n_words: int) -> str:
        """Sentences with commas, capitals, names and numbers."""
        rng = self.rng
        idx = rng.choice(len(self.words), size=n_words, p=self.weights)
        kind = rng.random(n_words)
        out, start = [], True
        for i, r in zip(idx, kind):
            if r < 0.04:
                word = f"{self.names[rng.integers(len(self.names))]} {self.names[rng.integers(len(self.names))]}"
            elif r < 0.07:
                word = str(int(rng.integers(0, 10 ** int(rng.integers(1, 7)))))
            else:
                word = self.words[i]
            out.append(word.capitalize() if start else word)
            start = r > 0.93
            if start:
                out[-1] += "." if r < 0.985 else "?"
            elif r > 0.87:
                out[-1] += ","
        return " ".join(out) + "."


def unique_docs(seed: int) -> Iterator[str]:
    words = Words(np.random.default_rng(seed))
    while True:
        paragraphs = int(words.rng.integers(1, 8))
        yield "\n\n".join(words.prose(int(words.rng.integers(40, 400))) for _ in range(paragraphs))


def licence_file(words: Words) -> str:
    """A source file's head: a varying copyright line, a shared licence, then its own text."""
    rng = words.rng
    holder = f"{words.names[rng.integers(len(words.names))]} {words.names[rng.integers(len(words.names))]}"
    licence = LICENCES[int(rng.integers(len(LICENCES)))]
    return (f"Copyright (c) {int(rng.integers(1995, 2026))} {holder}\n\n{licence}\n\n"
            f"{words.prose(int(rng.integers(30, 600)))}")


def chat_transcript(words: Words) -> str:
    """A system prompt and canned assistant phrases around each conversation's own turns."""
    rng = words.rng
    turns = [f"System: {CHAT_SYSTEM}"]
    for _ in range(int(rng.integers(1, 5))):
        turns.append(f"User: {words.prose(int(rng.integers(8, 60)))}")
        opener = CHAT_OPENERS[int(rng.integers(len(CHAT_OPENERS)))]
        turns.append(f"Assistant: {opener} {words.prose(int(rng.integers(20, 200)))} {CHAT_CLOSER}")
    return "\n\n".join(turns)


def repetitive_docs(seed: int) -> Iterator[str]:
    words = Words(np.random.default_rng(seed + 1))
    recent: list[str] = []
    while True:
        r = words.rng.random()
        if recent and r < 0.1:  # mirrored documents: exact copies of an earlier one
            doc = recent[int(words.rng.integers(len(recent)))]
        else:
            doc = licence_file(words) if r < 0.55 else chat_transcript(words)
            recent = (recent + [doc])[-500:]
        yield doc


GENERATORS = {"unique": unique_docs, "repetitive": repetitive_docs}


@dataclass
class Corpus:
    kind: str
    path: Path
    documents: int
    text_bytes: int
    est_tokens: int


def bytes_per_token(tokenizer_dir: Path, texts: list[str]) -> float:
    """Measured on the first documents, to size the corpus without tokenizing all of it."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    n = sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))
    return sum(len(t.encode("utf-8")) for t in texts) / max(n, 1)


def write_corpus(root: Path, kind: str, tokens: int, tokenizer_dir: Path, files: int, seed: int = 0) -> Corpus:
    """JSONL files of about ``tokens`` tokens, documents dealt round-robin so every file
    (and every Spark split) sees the same mix."""
    docs = GENERATORS[kind](seed)
    head = [next(docs) for _ in range(200)]
    target_bytes = tokens * bytes_per_token(tokenizer_dir, head)
    path = root / kind
    path.mkdir(parents=True, exist_ok=True)
    outs = [open(path / f"part-{i:05d}.jsonl", "w", encoding="utf-8") for i in range(files)]
    n = size = 0
    try:
        for text in itertools.chain(head, docs):
            if size >= target_bytes:
                break
            outs[n % files].write(json.dumps({"id": f"{kind}-{n:08d}", "text": text}) + "\n")
            size += len(text.encode("utf-8"))
            n += 1
    finally:
        for f in outs:
            f.close()
    return Corpus(kind, path, n, size, tokens)


# -------------------------------------------------------------------------------- tokenizer


def local_tokenizer(args, work: Path) -> Path:
    """A tokenizer folder both tools load offline: the demo assets' one, or a byte-level
    BPE of ``--train-vocab`` entries trained on a sample of the unique corpus."""
    if args.train_vocab:
        from extraction_audit.synthetic import train_tokenizer

        out = work / f"tokenizer-{args.train_vocab}"
        if not (out / "tokenizer.json").exists():
            docs = unique_docs(99)
            train_tokenizer([next(docs) for _ in range(3000)], vocab_size=args.train_vocab).save_pretrained(out)
        return out
    from extraction_audit.synthetic import ensure_demo_assets

    return Path(ensure_demo_assets(Path(args.demo_dir or work / "demo-assets")).tokenizer_dir)


# ------------------------------------------------------------------------------ subprocesses


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **OFFLINE, **(extra or {})}


def pinned(cmd: list[str], cores: int, pin: bool) -> list[str]:
    """Run on ``cores`` CPUs only, so "per core" means what it says (the JVM's GC and JIT
    threads and infini-gram's parent process otherwise borrow the idle cores)."""
    if pin and shutil.which("taskset") and cores <= (os.cpu_count() or 1):
        return ["taskset", "-c", f"0-{cores - 1}", *cmd]
    return cmd


def timed(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[float, str]:
    """Wall seconds and stdout; stderr goes to ``log``; a failure stops the benchmark."""
    t0 = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env or child_env())
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n--- stdout\n{proc.stdout[-2000:]}\n"
                 f"--- {log}\n{tail}")
    return seconds, proc.stdout


def last_json(stdout: str) -> dict:
    """The JSON object a subcommand prints (after any progress lines)."""
    starts = [m.start() for m in re.finditer(r"^\{", stdout, flags=re.M)]
    for start in starts:
        try:
            return json.JSONDecoder().raw_decode(stdout[start:])[0]
        except json.JSONDecodeError:
            continue
    raise ValueError(f"no JSON object in output:\n{stdout[-2000:]}")


def column_bytes(table: Path, column: str) -> int:
    """Compressed bytes of one column over a Delta table's live Parquet files (footers only)."""
    import pyarrow.parquet as pq

    live = set()
    for log in sorted((table / "_delta_log").glob("*.json")):
        for line in log.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live.add(action["add"]["path"])
            elif "remove" in action:
                live.discard(action["remove"]["path"])
    total = 0
    for rel in live:
        meta = pq.ParquetFile(table / rel).metadata
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            total += sum(group.column(c).total_compressed_size for c in range(group.num_columns)
                         if group.column(c).path_in_schema == column)
    return total


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


# ------------------------------------------------------------------------------ our indexer


def ea_config(work: Path, name: str, corpus: Corpus, tokenizer_dir: Path, cores: int, partitions: int) -> Path:
    """The YAML a user would write: local Spark, one warehouse per build (a reused one would
    make the second build a no-op incremental update)."""
    shutil.rmtree(work / "wh" / name, ignore_errors=True)
    cfg = {
        "storage": {"warehouse": str(work / "wh" / name), "cache_dir": str(work / "cache")},
        "spark": {"master": f"local[{cores}]", "shuffle_partitions": partitions or 2 * cores,
                  "log_file": str(work / "logs" / f"spark-{name}.log")},
        "model": {"path": str(tokenizer_dir), "tokenizer": str(tokenizer_dir)},
        "corpus": {"id": "bench", "format": "jsonl", "path": str(corpus.path)},
        # The local default's 16 buckets (conf/local.yaml), as a user indexing on one machine
        # gets: the library default (1,024, for cluster-sized corpora) would cut a 20 M-token
        # index into 1,024 files of about 1,200 anchors (README "Index layout").
        "index": {"n": N, "bucket_bits": 4},
    }
    path = work / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def ea_cli(*args: str) -> list[str]:
    exe = shutil.which("extraction-audit")
    return [exe, *args] if exe else [sys.executable, "-m", "extraction_audit.cli", *args]


def our_build(cfg: Path, cores: int, args, log: Path) -> dict:
    """End-to-end ``index`` wall time; the part outside ``build_index`` (interpreter, JVM
    and session start) is wall minus the build's own ``seconds``."""
    sets = [x for s in args.set for x in ("--set", s)]
    wall, out = timed(pinned(ea_cli("index", "--config", str(cfg), *sets), cores, not args.no_pin), log)
    stats = last_json(out)
    inner = stats.get("seconds")
    return {"wall": wall, "build": inner, "startup": wall - inner if inner is not None else None,
            "tokens": stats.get("tokens_added"), "stats": stats}


def our_sizes(cfg: Path, cores: int, args, log: Path) -> dict:
    """Index and document-store bytes from ``corpus-stats`` (new layout keys preferred)."""
    sets = [x for s in args.set for x in ("--set", s)]
    wall, out = timed(pinned(ea_cli("corpus-stats", "--config", str(cfg), *sets), cores, not args.no_pin), log)
    s = last_json(out)
    new = "index_table_bytes" in s
    warehouse = Path(yaml.safe_load(cfg.read_text())["storage"]["warehouse"])
    return {
        "layout": s.get("layout") or ("new (unnamed)" if new else "old n-gram table"),
        "index_bytes": int(s["index_table_bytes"] if new else s["ngram_table_bytes"]),
        # The token store: the token_bytes column of corpus_documents (the table also keeps
        # the documents' text, which the personal-data search reads).
        "store_bytes": column_bytes(warehouse / "corpus_documents", "token_bytes"),
        "document_table_bytes": int(s.get("document_table_bytes") or 0),
        "tokens": int(s["tokens"]),
        "documents": s.get("documents"),
        "tables": {k: v for k, v in s.items() if k.endswith("_table_bytes")},
        "stats_wall": wall,
    }


# ------------------------------------------------------------------------------ infini-gram

# infini-gram 2.6.0 accepts only --tokenizer gpt2|llama|olmo and loads them with
# transformers.AutoTokenizer.from_pretrained(<hub name>, ...).  The wrapper answers that call
# with our local folder (the fast tokenizer: the folder has only tokenizer.json) and then
# runs its unmodified main(); its forked tokenizing pool inherits the loaded tokenizer.
INFINI_GRAM_WRAPPER = """
import sys, transformers
from infini_gram import indexing
path, as_shipped = sys.argv.pop(1), sys.argv.pop(1) == "shipped"
load = transformers.AutoTokenizer.from_pretrained
if as_shipped:  # its own arguments (use_fast=False: the Python BPE, as it runs for gpt2)
    transformers.AutoTokenizer.from_pretrained = lambda _name, *a, **k: load(path, *a, **k)
else:  # our fast (Rust) tokenizer patched in
    transformers.AutoTokenizer.from_pretrained = lambda _name, *a, **k: load(path)
indexing.main()
"""


def slow_tokenizer_copy(tokenizer_dir: Path) -> Path | None:
    """The same byte-level BPE as a ``GPT2Tokenizer`` folder (vocab.json + merges.txt), which
    infini-gram loads with ``use_fast=False`` as it does GPT-2's; None when it cannot be made."""
    out = tokenizer_dir.parent / (tokenizer_dir.name + "-slow")
    if (out / "vocab.json").exists():
        return out
    try:
        from tokenizers import Tokenizer
        from transformers import GPT2Tokenizer

        out.mkdir(parents=True, exist_ok=True)
        Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).model.save(str(out))
        GPT2Tokenizer(str(out / "vocab.json"), str(out / "merges.txt")).save_pretrained(str(out))
        return out
    except Exception as err:  # noqa: BLE001 - the benchmark reports the patched run only
        print(f"  (no slow-tokenizer copy for infini-gram as shipped: {err})")
        return None


def infini_gram_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("infini-gram")
    except Exception:
        return None


def infini_gram_build(corpus: Corpus, tokenizer_dir: Path, cores: int, out: Path, args, log: Path,
                      mode: str = "fast") -> dict:
    """Tokenize + suffix array with ``cores`` workers; size of everything it keeps."""
    import resource

    shutil.rmtree(out, ignore_errors=True)
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    cmd = [sys.executable, "-c", INFINI_GRAM_WRAPPER, str(tokenizer_dir), mode,
           "--data_dir", str(corpus.path.resolve()), "--save_dir", str(out.resolve()),
           "--tokenizer", "gpt2", "--token_dtype", "u16", "--add_metadata",
           "--cpus", str(cores), "--mem", str(args.infini_gram_mem),
           "--ulimit", str(nofile if nofile != resource.RLIM_INFINITY else 1 << 20)]
    wall, stdout = timed(pinned(cmd, cores, not args.no_pin), log, child_env({"TOKENIZERS_PARALLELISM": "false"}))
    sa = re.search(r"Step 2 \(build_sa\): Done\. Took ([\d.]+) seconds", stdout)
    docs = sum(f.stat().st_size for f in out.glob("offset.*")) // 8
    token_bytes = sum(f.stat().st_size for f in out.glob("tokenized.*"))
    tokens = (token_bytes - 2 * docs) // 2  # u16 tokens, one 0xFFFF separator per document
    return {"wall": wall, "suffix_array_s": float(sa.group(1)) if sa else None, "tokens": tokens,
            "total_bytes": folder_bytes(out), "token_bytes": token_bytes,
            "table_bytes": sum(f.stat().st_size for f in out.glob("table.*"))}


# ---------------------------------------------------------------------------------- report


def fmt_s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.1f}s"


def machine_line() -> str:
    """The machine and versions a benchmark's ratios were measured on (shared by bench_match)."""
    import pyspark

    info = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    cpu = next((x.split(":", 1)[1].strip() for x in info if x.startswith("model name")), platform.processor())
    return (f"machine: {cpu}, {os.cpu_count()} CPUs visible, python {platform.python_version()}, "
            f"pyspark {pyspark.__version__}, infini-gram {infini_gram_version() or 'not installed'}")


def pinned_cores(args) -> bool:
    return not args.no_pin and bool(shutil.which("taskset"))


def header(args, tokenizer_dir: Path, corpora: dict[str, Corpus]) -> None:
    print("=" * 100)
    rival = "(infini-gram skipped)" if args.skip_infini_gram else "vs infini-gram suffix array"
    print(f"Corpus index build: extraction-audit index (end to end, Spark local[C]) {rival}")
    print(machine_line())
    pin = pinned_cores(args)
    print(f"cores measured: {args.cores}; pinned with taskset: {pin}; index.n={N}; "
          f"extra --set: {args.set or 'none'}")
    print(f"tokenizer: {tokenizer_dir}")
    for c in corpora.values():
        print(f"corpus {c.kind:<10}: {c.documents:,} documents, {c.text_bytes:,} text bytes (UTF-8), "
              f"~{c.est_tokens:,} tokens, {c.path}")
    print("=" * 100, flush=True)


def print_run(tool: str, kind: str, cores: int, r: dict, tokens: int) -> None:
    tps = tokens / r["wall"]
    extra = (f"build_index {fmt_s(r['build'])}, outside it (imports, JVM/session start) {fmt_s(r['startup'])}"
             if "build" in r else f"suffix array {fmt_s(r['suffix_array_s'])}, tokenize+rest "
             f"{fmt_s(r['wall'] - r['suffix_array_s'] if r['suffix_array_s'] is not None else None)}")
    print(f"  {tool:<12} {kind:<10} {cores} core(s): wall {r['wall']:7.1f}s  {tps:>11,.0f} tokens/s  "
          f"{tps / cores:>11,.0f} tokens/s/core  [{extra}]", flush=True)


def projection(label: str, text_per_token: float, tps_per_core: float, index_per_text: float,
               store_per_text: float) -> None:
    tokens = 1e12 / text_per_token
    hours = tokens / (tps_per_core * 100) / 3600
    print(f"  {label}: {tokens:.2e} tokens, build {hours:,.1f} h on 100 cores, index {index_per_text:.2f} TB, "
          f"index + document store {index_per_text + store_per_text:.2f} TB")


def ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b in (None, 0) else f"{a / b:.3f}"


def goal(value: float | None, target: float, higher: bool) -> str:
    if value is None:
        return ""
    ok = value >= target if higher else value <= target
    return f"(goal {'>=' if higher else '<='} {target}: {'met' if ok else 'NOT met'})"


def summary(args, corpora, ours, sizes, ig, shipped) -> None:
    """The ratios this benchmark exists for, each from this run only."""
    top = max(args.cores)
    u, rep = sizes["unique"], sizes["repetitive"]
    print("\nSUMMARY (all from this run)")
    print(f"  our index layout: {u['layout']}; tables: {u['tables']}")
    for kind, s in sizes.items():
        c = corpora[kind]
        print(f"  {kind:<10}: {s['tokens']:,} tokens, {c.text_bytes / s['tokens']:.2f} text bytes/token; "
              f"index {s['index_bytes']:,} B = {s['index_bytes'] / s['tokens']:.3f} B/token; token store "
              f"{s['store_bytes']:,} B = {s['store_bytes'] / s['tokens']:.3f} B/token (document table with text "
              f"{s['document_table_bytes'] / s['tokens']:.3f}); "
              f"(index + store) / text bytes = {(s['index_bytes'] + s['store_bytes']) / c.text_bytes:.3f}")
    u_bpt = u["index_bytes"] / u["tokens"]
    both = (u["index_bytes"] + u["store_bytes"]) / corpora["unique"].text_bytes
    print(f"  our index bytes/token, unique text:       {u_bpt:.3f} {goal(u_bpt, 1.75, higher=False)}")
    print(f"  our index bytes/token, repetitive corpus: {rep['index_bytes'] / rep['tokens']:.3f}")
    print(f"  (our index + token store) / text bytes, unique: {both:.3f} {goal(both, 1.0, higher=False)}; "
          f"repetitive: {(rep['index_bytes'] + rep['store_bytes']) / corpora['repetitive'].text_bytes:.3f}")
    for c in args.cores:
        r = ours[("unique", c)]
        print(f"  our tokens/s per core at {c} core(s), unique: {u['tokens'] / r['wall'] / c:,.0f} "
              f"(wall {r['wall']:.1f}s)")
    if len(args.cores) > 1:
        lo, hi = min(args.cores), top
        speedup = ours[("unique", lo)]["wall"] / ours[("unique", hi)]["wall"]
        print(f"  our speed-up {lo} -> {hi} cores: {speedup:.2f}x (ideal {hi / lo:.0f}x)")
    if ig:
        for (kind, c), g in ig.items():
            rt = (sizes[kind]["tokens"] / ours[(kind, c)]["wall"]) / (g["tokens"] / g["wall"])
            print(f"  build tokens/s ours / infini-gram with our Rust tokenizer patched in, {kind}, {c} core(s): "
                  f"{rt:.3f}")
        for (kind, c), g in shipped.items():
            rt = (sizes[kind]["tokens"] / ours[(kind, c)]["wall"]) / (g["tokens"] / g["wall"])
            print(f"  build tokens/s ours / infini-gram as shipped (use_fast=False), {kind}, {c} core(s): {rt:.3f} "
                  f"{goal(rt, 1.0, higher=True)}")
            if g["tokens"] != sizes[kind]["tokens"]:
                print(f"  WARNING: token counts differ on {kind} (as shipped): the tokenizers did not agree")
        for kind in GENERATORS:
            g, ours_bpt = ig[(kind, top)], sizes[kind]["index_bytes"] / sizes[kind]["tokens"]
            print(f"  infini-gram {kind:<10}: {g['tokens']:,} tokens (ours {sizes[kind]['tokens']:,}); folder "
                  f"{g['total_bytes']:,} B = {g['total_bytes'] / g['tokens']:.3f} B/token (suffix array "
                  f"{g['table_bytes'] / g['tokens']:.3f}, token store {g['token_bytes'] / g['tokens']:.3f}); "
                  f"our index / its folder: {ratio(ours_bpt, g['total_bytes'] / g['tokens'])}")
            if g["tokens"] != sizes[kind]["tokens"]:
                print(f"  WARNING: token counts differ on {kind}: the two tools did not tokenize alike")
    else:
        print("  infini-gram: skipped (--skip-infini-gram)")
    text_per_token = corpora["unique"].text_bytes / u["tokens"]
    per_core = u["tokens"] / ours[("unique", top)]["wall"] / top
    print(f"\nPROJECTION: 1 TB of text on 100 cores, from the unique corpus at {top} core(s) "
          f"({text_per_token:.2f} text bytes/token, {per_core:,.0f} tokens/s/core, linear scaling assumed)")
    store_pt = u["store_bytes"] / corpora["unique"].text_bytes
    projection("ours       ", text_per_token, per_core, u["index_bytes"] / corpora["unique"].text_bytes, store_pt)
    if ig:
        g = ig[("unique", top)]
        projection("infini-gram", text_per_token, g["tokens"] / g["wall"] / top,
                   g["table_bytes"] / corpora["unique"].text_bytes,
                   (g["total_bytes"] - g["table_bytes"]) / corpora["unique"].text_bytes)


# ------------------------------------------------------------------------------------ main


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=20_000_000, help="tokens per corpus (each of the two kinds)")
    p.add_argument("--demo-dir", default=None, help="demo assets folder (built there if missing; default: temp)")
    p.add_argument("--train-vocab", type=int, default=0,
                   help="instead of the demo tokenizer, train a byte-level BPE of this many entries (< 65535)")
    p.add_argument("--cores", type=lambda s: sorted({int(x) for x in s.split(",")}), default=[1, 2],
                   help="comma-separated core counts, e.g. 1,2")
    p.add_argument("--skip-infini-gram", action="store_true")
    p.add_argument("--infini-gram-mem", type=int, default=8, help="GiB given to infini-gram's --mem")
    p.add_argument("--no-pin", action="store_true", help="do not pin each run to C cores with taskset")
    p.add_argument("--shuffle-partitions", type=int, default=0, help="spark.shuffle_partitions (0: 2 x cores)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra config override passed to extraction-audit, e.g. index.bucket_bits=4")
    p.add_argument("--work", default=None, help="working folder, kept afterwards (default: a new temp folder)")
    p.add_argument("--keep", action="store_true", help="keep the working folder")
    return p.parse_args()


def run_in_work_folder(args, run, prefix: str) -> None:
    """``run(args, work)`` in ``--work`` (kept) or a temporary folder (removed unless
    ``--keep``), offline, after checking that infini-gram is installed when it is wanted."""
    if not args.skip_infini_gram and infini_gram_version() is None:
        sys.exit("infini-gram is not installed: pip install infini-gram (or pass --skip-infini-gram)")
    os.environ.update(OFFLINE)
    work = Path(args.work).resolve() if args.work else Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(exist_ok=True)
    try:
        run(args, work)
    finally:
        if args.keep or args.work:
            print(f"\nworking folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    run_in_work_folder(parse_args(), run, "bench-index-")


def run(args, work: Path) -> None:
    tokenizer_dir = local_tokenizer(args, work)
    files = max(2 * max(args.cores), math.ceil(args.tokens * 4 / 64e6))  # ~64 MB files at ~4 B/token
    corpora = {}
    for kind in GENERATORS:
        shutil.rmtree(work / "corpus" / kind, ignore_errors=True)
        corpora[kind] = write_corpus(work / "corpus", kind, args.tokens, tokenizer_dir, files)
    header(args, tokenizer_dir, corpora)
    top = max(args.cores)
    # Largest core count first: its corpus-stats gives the token count every run is divided by.
    plan = [("unique", c) for c in sorted(args.cores, reverse=True)] + [("repetitive", top)]
    ours, sizes, ig, shipped, cfgs = {}, {}, {}, {}, {}
    slow = None if args.skip_infini_gram else slow_tokenizer_copy(tokenizer_dir)
    print("BUILDS (wall time of the whole command, tokens from our corpus-stats / infini-gram's token store)")
    for kind, cores in plan:
        name = f"{kind}-c{cores}"
        cfgs[(kind, cores)] = ea_config(work, name, corpora[kind], tokenizer_dir, cores, args.shuffle_partitions)
        ours[(kind, cores)] = our_build(cfgs[(kind, cores)], cores, args, work / "logs" / f"index-{name}.log")
        if cores == top:
            sizes[kind] = our_sizes(cfgs[(kind, cores)], cores, args, work / "logs" / f"stats-{name}.log")
        print_run("ours", kind, cores, ours[(kind, cores)], sizes[kind]["tokens"])
        if not args.skip_infini_gram:
            ig[(kind, cores)] = infini_gram_build(corpora[kind], tokenizer_dir, cores, work / "infini-gram" / name,
                                                  args, work / "logs" / f"infini-gram-{name}.log")
            print_run("infini-gram", kind, cores, ig[(kind, cores)], ig[(kind, cores)]["tokens"])
            if slow is not None:
                shipped[(kind, cores)] = infini_gram_build(
                    corpora[kind], slow, cores, work / "infini-gram" / f"{name}-shipped", args,
                    work / "logs" / f"infini-gram-{name}-shipped.log", mode="shipped")
                print_run("infini-gram as shipped", kind, cores, shipped[(kind, cores)],
                          shipped[(kind, cores)]["tokens"])
    for kind in sizes:
        print(f"  corpus-stats ({kind}) took {sizes[kind]['stats_wall']:.1f}s end to end "
              f"(a Spark session start plus a few metadata queries)")
    summary(args, corpora, ours, sizes, ig, shipped)


if __name__ == "__main__":
    main()
