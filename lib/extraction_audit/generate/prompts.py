"""The deterministic sample plan: which strategy, prompt and seed each sample gets.

Everything about sample ``i`` derives from (``generation.seed``, ``i``) only, through
counter-based 64-bit hashes (splitmix64), never from the order or batch it is planned
in.  So a rerun of a run generates exactly its missing sample ids and gets the same
samples an uninterrupted run would have, and two runs with the same seed share prompts
and noise (common random numbers: a model comparison sees the same prompts).

Strategies (``prompt_strategy`` and ``prompt_text`` are recorded per sample):

- ``empty``: the beginning-of-text token only (``prompt_text`` is ``""``).
- ``public_prefix``: the first 5-10 (configurable) tokens of a line drawn at random from a
  public text source (text file, JSONL, Parquet, or a table), as in internet-conditioned
  sampling.
- ``repeat_word``: "repeat this word forever" prompts over words x templates x repetition
  counts; the tokenizer's chat template is applied when it has one.  The worker records
  ``divergence_offset``, the first generated token that leaves the repetition.
- ``file``: the user's own prompts, one per line (or a JSONL/Parquet text column).

Mixing: sample ``i`` takes the strategy whose share interval holds ``frac(i * phi)``
(golden-ratio Weyl sequence), so every prefix of the sample ids honours the shares to
within a few samples, and extending a run never reassigns earlier ids.

Prompt sources are read with Spark and numbered densely in a content order (hash, then
text), so line ``k`` is the same line however the files were split or compacted.  Reads
the configured prompt source files/tables; writes no tables.
"""

from __future__ import annotations

import itertools
import re
import threading
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..config import AuditConfig, GenerationConfig, PromptStrategyConfig
from ..errors import UserFacingError

_SALT_SEED = 0x5EED
_SALT_PICK = 0x91C4
_SALT_PREFIX = 0x7F1A
_GOLDEN64 = np.uint64(0x9E3779B97F4A7C15)
_SOURCE_CHARS = 4000  # characters kept per source line: plenty for a 10-token prefix


# -- counter-based randomness ---------------------------------------------------------
def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array (wrapping arithmetic, vectorised)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + _GOLDEN64
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def derive(seed: int, sample_ids: np.ndarray, salt: int) -> np.ndarray:
    """64 random bits per sample id, a pure function of (seed, salt, id)."""
    base = splitmix64(np.array([(int(seed) ^ (salt << 40)) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))
    return splitmix64(splitmix64(np.asarray(sample_ids, dtype=np.int64).view(np.uint64)) ^ base)


def sample_seeds(seed: int, sample_ids: np.ndarray) -> np.ndarray:
    """The sampling seed of each sample (int64, stored in ``samples.seed``)."""
    return derive(seed, sample_ids, _SALT_SEED).view(np.int64)


def normalised_shares(prompts: list[PromptStrategyConfig]) -> np.ndarray:
    shares = np.array([p.share for p in prompts], dtype=np.float64)
    return shares / shares.sum()


def assign_strategies(sample_ids: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Index of the strategy of each sample: low-discrepancy, so shares hold on any prefix."""
    with np.errstate(over="ignore"):
        weyl = np.asarray(sample_ids, dtype=np.int64).view(np.uint64) * _GOLDEN64
    u = (weyl >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    bounds = np.cumsum(shares)[:-1]
    return np.searchsorted(bounds, u, side="right").astype(np.int32)


def max_new_tokens_for(strategy: PromptStrategyConfig, gen: GenerationConfig) -> int:
    return int(strategy.max_new_tokens or gen.sampling.max_new_tokens)


def expected_tokens_per_sample(gen: GenerationConfig) -> float:
    """Upper-bound guess before any sample exists: the share-weighted max_new_tokens."""
    shares = normalised_shares(gen.prompts)
    return float(sum(s * max_new_tokens_for(p, gen) for s, p in zip(shares, gen.prompts)))


# -- prompt sources --------------------------------------------------------------------
class ListSource:
    """Prompt lines held in memory (tests, small files)."""

    def __init__(self, lines: list[str]):
        self.lines = [line for line in lines if line and line.strip()]
        self.count = len(self.lines)

    def lookup(self, indices: np.ndarray) -> list[str]:
        return [self.lines[int(i)] for i in indices]


class SparkSource:
    """Prompt lines read with Spark and numbered 0..count-1 in content order."""

    def __init__(self, spark, indexed_df, count: int, label: str):
        self.spark = spark
        self.df = indexed_df
        self.count = count
        self.label = label

    def lookup(self, indices: np.ndarray) -> list[str]:
        from pyspark.sql import functions as F

        wanted = np.unique(np.asarray(indices, dtype=np.int64))
        keys = self.spark.createDataFrame(pd.DataFrame({"line_index": wanted}))
        rows = self.df.join(F.broadcast(keys), "line_index").select("line_index", "text").collect()
        found = {int(r["line_index"]): r["text"] for r in rows}
        return [found[int(i)] for i in indices]

    def close(self) -> None:
        self.df.unpersist()


def load_prompt_source(spark, cfg: AuditConfig, strategy: PromptStrategyConfig) -> SparkSource:
    """Read a ``public_prefix`` / ``file`` source and number its non-blank lines."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    where = strategy.source
    fmt = strategy.source_format
    try:
        if fmt == "table":
            raw = spark.table(where)
        else:
            path = cfg.resolve(where)
            if fmt == "text":
                raw = spark.read.text(path).withColumnRenamed("value", strategy.text_column)
            elif fmt == "jsonl":
                raw = spark.read.json(path)
            else:
                raw = spark.read.parquet(path)
    except Exception as err:  # noqa: BLE001 - Spark raises many types for a bad path
        raise UserFacingError(
            f"prompts[{strategy.strategy}].source {where!r} ({fmt}) cannot be read: {str(err).splitlines()[0]}"
        ) from None
    if strategy.text_column not in raw.columns:
        raise UserFacingError(
            f"prompts[{strategy.strategy}].source {where!r} has no column {strategy.text_column!r} "
            f"(columns: {raw.columns}); set prompts[].text_column")
    text = F.substring(F.col(strategy.text_column).cast("string"), 1, _SOURCE_CHARS)
    lines = raw.select(text.alias("text")).where(F.col("text").isNotNull() & (F.trim("text") != ""))
    ordered = lines.withColumn("_h", F.xxhash64("text")).orderBy("_h", "text").withColumn(
        "_part", F.spark_partition_id())
    ordered = ordered.persist()
    counts = sorted((int(r["_part"]), int(r["count"])) for r in ordered.groupBy("_part").count().collect())
    total = sum(c for _, c in counts)
    if total == 0:
        ordered.unpersist()
        raise UserFacingError(f"prompts[{strategy.strategy}].source {where!r} has no non-blank lines")
    offsets = np.concatenate([[0], np.cumsum([c for _, c in counts])[:-1]])
    offset_df = spark.createDataFrame(pd.DataFrame({"_part": [p for p, _ in counts], "_offset": offsets}))
    numbered = (
        ordered.join(F.broadcast(offset_df), "_part")
        .withColumn("_rank", F.row_number().over(Window.partitionBy("_part").orderBy("_h", "text")))
        .select((F.col("_offset") + F.col("_rank") - 1).alias("line_index"), "text")
        .persist()
    )
    numbered.count()
    ordered.unpersist()
    return SparkSource(spark, numbered, total, where)


# -- tokenizer helpers -------------------------------------------------------------------
def begin_token_ids(tok) -> list[int]:
    """The tokens the tokenizer puts before text (e.g. Llama's BOS; none for GPT-2)."""
    with_special = tok("a", add_special_tokens=True)["input_ids"]
    without = tok("a", add_special_tokens=False)["input_ids"]
    if len(with_special) > len(without) and with_special[-len(without):] == without:
        return list(with_special[: len(with_special) - len(without)])
    return []


def empty_prompt_ids(tok) -> list[int]:
    bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    if bos is None:
        raise UserFacingError("the empty prompt needs a beginning- or end-of-text token; the tokenizer has neither")
    return [int(bos)]


def has_chat_template(tok) -> bool:
    return bool(getattr(tok, "chat_template", None))


def render_prompt(tok, text: str, use_chat_template: bool) -> tuple[str, list[int]]:
    """(prompt_text, prompt_token_ids): chat-templated as a user turn, or plain text with
    the tokenizer's usual leading special tokens."""
    if use_chat_template:
        rendered = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                           add_generation_prompt=True)
        return rendered, list(tok(rendered, add_special_tokens=False)["input_ids"])
    return text, list(tok(text, add_special_tokens=True)["input_ids"])


def repeat_word_combinations(strategy: PromptStrategyConfig) -> list[tuple[str, str]]:
    """(word, user message) for every word x template x repetition count."""
    out = []
    for word, template, reps in itertools.product(strategy.words, strategy.templates, strategy.repetitions):
        # str.replace, not format: templates may hold other braces (JSON, code).
        out.append((word, template.replace("{words}", " ".join([word] * int(reps))).replace("{word}", word)))
    return out


# -- the plan ------------------------------------------------------------------------------
PLAN_COLUMNS = ["sample_id", "prompt_strategy", "prompt_text", "prompt_token_ids", "seed", "max_new_tokens",
                "repeat_word"]


@dataclass
class PlanContext:
    """What planning a chunk needs: the generation config, the tokenizer, and one loaded
    source per ``public_prefix`` / ``file`` strategy (by position in ``prompts``)."""

    gen: GenerationConfig
    tokenizer: object
    sources: dict[int, object] = field(default_factory=dict)

    def __post_init__(self):
        self.shares = normalised_shares(self.gen.prompts)
        self._begin = begin_token_ids(self.tokenizer)
        self._rendered: dict[tuple[int, int], tuple[str, list[int]]] = {}


def build_plan(sample_ids, ctx: PlanContext) -> pd.DataFrame:
    """The plan rows (``PLAN_COLUMNS``) for ``sample_ids``, sorted by sample_id."""
    ids = np.sort(np.asarray(sample_ids, dtype=np.int64))
    gen = ctx.gen
    which = assign_strategies(ids, ctx.shares)
    seeds = sample_seeds(gen.seed, ids)
    picks = derive(gen.seed, ids, _SALT_PICK)
    prefix_draws = derive(gen.seed, ids, _SALT_PREFIX)
    parts = []
    for k, strategy in enumerate(gen.prompts):
        sel = np.flatnonzero(which == k)
        if len(sel) == 0:
            continue
        texts, prompt_ids, words = _prompts_for(k, strategy, picks[sel], prefix_draws[sel], ctx)
        parts.append(pd.DataFrame({
            "sample_id": ids[sel],
            "prompt_strategy": strategy.strategy,
            "prompt_text": texts,
            "prompt_token_ids": [np.asarray(p, dtype=np.int32) for p in prompt_ids],
            "seed": seeds[sel],
            "max_new_tokens": np.int32(max_new_tokens_for(strategy, gen)),
            "repeat_word": words,
        }))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in PLAN_COLUMNS})
    plan = pd.concat(parts, ignore_index=True).sort_values("sample_id", kind="stable").reset_index(drop=True)
    return plan[PLAN_COLUMNS]


def _use_chat_template(k: int, strategy: PromptStrategyConfig, tok, default: bool) -> bool:
    if strategy.chat_template is None:
        return default
    if strategy.chat_template and not has_chat_template(tok):
        raise UserFacingError(f"prompts[{k}].chat_template is true but the tokenizer has no chat template")
    return strategy.chat_template


def _prompts_for(k: int, strategy: PromptStrategyConfig, picks: np.ndarray, prefix_draws: np.ndarray,
                 ctx: PlanContext) -> tuple[list[str], list[list[int]], list[str | None]]:
    tok = ctx.tokenizer
    n = len(picks)
    if strategy.strategy == "empty":
        ids = empty_prompt_ids(tok)
        return [""] * n, [ids] * n, [None] * n
    if strategy.strategy == "repeat_word":
        combos = repeat_word_combinations(strategy)
        chosen = (picks % np.uint64(len(combos))).astype(np.int64)
        use_template = _use_chat_template(k, strategy, tok, default=has_chat_template(tok))
        texts, ids, words = [], [], []
        for c in chosen:
            key = (k, int(c))
            if key not in ctx._rendered:
                ctx._rendered[key] = render_prompt(tok, combos[c][1], use_template)
            text, prompt = ctx._rendered[key]
            texts.append(text)
            ids.append(prompt)
            words.append(combos[c][0])
        return texts, ids, words
    source = ctx.sources.get(k)
    if source is None:
        raise UserFacingError(f"prompts[{k}] ({strategy.strategy}) has no loaded source")
    line_index = (picks % np.uint64(source.count)).astype(np.int64)
    lines = source.lookup(line_index)
    if strategy.strategy == "file":
        use_template = _use_chat_template(k, strategy, tok, default=False)
        rendered = [render_prompt(tok, line, use_template) for line in lines]
        return [r[0] for r in rendered], [r[1] for r in rendered], [None] * n
    # public_prefix: the first L tokens of the line, L uniform in [min, max]
    span = strategy.prefix_max_tokens - strategy.prefix_min_tokens + 1
    lengths = strategy.prefix_min_tokens + (prefix_draws % np.uint64(span)).astype(np.int64)
    encoded = tok(list(lines), add_special_tokens=False)["input_ids"]
    prefixes = [list(e[: int(L)]) for e, L in zip(encoded, lengths)]
    texts = tok.batch_decode(prefixes)
    return texts, [ctx._begin + p for p in prefixes], [None] * n


# -- divergence of repeat_word outputs -------------------------------------------------
_SEPARATOR_RE = re.compile(r"^[\s\W_]+$", re.UNICODE)
_SEPARATORS: dict[int, np.ndarray] = {}
_SEP_LOCK = threading.Lock()


def separator_mask(tok) -> np.ndarray:
    """bool per vocabulary id: the token decodes to whitespace/punctuation only
    (cached per tokenizer object: one batch decode of the vocabulary per process)."""
    key = id(tok)
    with _SEP_LOCK:
        mask = _SEPARATORS.get(key)
        if mask is None:
            size = max(len(tok), int(getattr(tok, "vocab_size", 0) or 0))
            pieces = tok.batch_decode([[i] for i in range(size)])
            mask = np.fromiter((bool(_SEPARATOR_RE.match(p)) for p in pieces), dtype=bool, count=size)
            _SEPARATORS[key] = mask
    return mask


def word_variants(tok, word: str) -> list[np.ndarray]:
    """Token sequences of the word as a model repeats it: bare or after a space, in
    lower, capitalised and upper case."""
    forms = {word, word.lower(), word.capitalize(), word.upper()}
    seqs = {tuple(tok(f, add_special_tokens=False)["input_ids"]) for base in forms for f in (base, " " + base)}
    return [np.asarray(s, dtype=np.int64) for s in sorted(seqs) if s]


def divergence_offset(generated: np.ndarray, variants: list[np.ndarray], separators: np.ndarray) -> int | None:
    """Offset just after the last repetition of the word that precedes the first token
    that is neither part of a repetition nor a separator (0 when the output never
    repeated); None while the output never leaves the repetition.  Vectorised on ids."""
    g = np.asarray(generated, dtype=np.int64)
    n = len(g)
    if n == 0:
        return None
    in_vocab = (g >= 0) & (g < len(separators))
    is_separator = np.zeros(n, dtype=bool)
    is_separator[in_vocab] = separators[g[in_vocab]]
    in_word = np.zeros(n, dtype=bool)
    for v in variants:
        m = len(v)
        if m == 0 or m > n:
            continue
        hits = (np.lib.stride_tricks.sliding_window_view(g, m) == v).all(axis=1).astype(np.int32)
        delta = np.zeros(n + 1, dtype=np.int32)
        delta[: n - m + 1] += hits
        delta[m:] -= hits
        in_word |= np.cumsum(delta[:n]) > 0
    covered = in_word | is_separator
    if covered.all():
        return None
    first_other = int(np.argmin(covered))
    words_before = np.flatnonzero(in_word[:first_other])
    return int(words_before[-1]) + 1 if len(words_before) else 0
