"""Prompt strategies, shares, the deterministic plan, and repeat_word divergence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from extraction_audit.config import GenerationConfig, PromptStrategyConfig
from extraction_audit.errors import UserFacingError
from extraction_audit.generate.prompts import (
    ListSource,
    PlanContext,
    assign_strategies,
    build_plan,
    divergence_offset,
    load_prompt_source,
    normalised_shares,
    sample_seeds,
    separator_mask,
    word_variants,
)

CHAT_TEMPLATE = (
    "{% for m in messages %}<|user|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
PUBLIC = [
    "The committee met on Tuesday to discuss the annual report and the budget for next year.",
    "Rain is expected across the north of the country later this week, with strong winds.",
    "She opened the letter slowly and read the first line twice before putting it down.",
    "Local shops reported higher sales during the festival weekend than in previous years.",
]


@pytest.fixture(scope="module")
def tok(demo_assets):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(demo_assets.tokenizer_dir))


@pytest.fixture(scope="module")
def chat_tok(demo_assets):
    from transformers import AutoTokenizer

    t = AutoTokenizer.from_pretrained(str(demo_assets.tokenizer_dir))
    t.chat_template = CHAT_TEMPLATE
    return t


def _gen(*prompts, seed=3, max_new_tokens=64) -> GenerationConfig:
    return GenerationConfig(seed=seed, prompts=list(prompts), sampling={"max_new_tokens": max_new_tokens})


def test_mixing_shares_hold_on_every_prefix_and_depend_only_on_the_id():
    shares = normalised_shares([PromptStrategyConfig(strategy="empty", share=s) for s in (5, 3, 2)])
    ids = np.arange(3000)
    which = assign_strategies(ids, shares)
    for n in (50, 500, 3000):
        counts = np.bincount(which[:n], minlength=3)
        assert np.all(np.abs(counts - shares * n) <= 3), (n, counts)
    assert np.array_equal(assign_strategies(ids[1234:2000], shares), which[1234:2000])
    assert np.array_equal(assign_strategies(ids[::-1], shares), which[::-1])


def test_seeds_are_per_sample_and_per_run_seed():
    ids = np.arange(100)
    a = sample_seeds(0, ids)
    assert len(set(a.tolist())) == 100
    assert np.array_equal(sample_seeds(0, ids[50:]), a[50:])
    assert not np.array_equal(sample_seeds(1, ids), a)


def test_empty_prompt_is_the_beginning_of_text_token(tok):
    plan = build_plan(np.arange(5), PlanContext(_gen(PromptStrategyConfig(strategy="empty")), tok))
    assert plan["sample_id"].tolist() == [0, 1, 2, 3, 4]
    assert set(plan["prompt_strategy"]) == {"empty"} and set(plan["prompt_text"]) == {""}
    assert all(p.tolist() == [tok.bos_token_id] for p in plan["prompt_token_ids"])
    assert plan["max_new_tokens"].tolist() == [64] * 5
    assert plan["seed"].tolist() == sample_seeds(3, np.arange(5)).tolist()


def test_public_prefix_prompts_are_short_prefixes_of_source_lines(tok):
    strategy = PromptStrategyConfig(strategy="public_prefix", source="unused", prefix_min_tokens=5,
                                    prefix_max_tokens=10)
    ctx = PlanContext(_gen(strategy), tok, {0: ListSource(PUBLIC)})
    plan = build_plan(np.arange(60), ctx)
    encoded = [tok(line, add_special_tokens=False)["input_ids"] for line in PUBLIC]
    used_lines, lengths = set(), set()
    for ids, text in zip(plan["prompt_token_ids"], plan["prompt_text"]):
        ids = ids.tolist()
        assert 5 <= len(ids) <= 10
        matches = [i for i, e in enumerate(encoded) if e[: len(ids)] == ids]
        assert matches, ids
        used_lines.add(matches[0])
        lengths.add(len(ids))
        assert text == tok.decode(ids)
    assert used_lines == {0, 1, 2, 3} and len(lengths) >= 4
    again = build_plan(np.arange(30, 60), PlanContext(_gen(strategy), tok, {0: ListSource(PUBLIC)}))
    assert [p.tolist() for p in again["prompt_token_ids"]] == [p.tolist() for p in plan["prompt_token_ids"][30:]]


def test_repeat_word_applies_the_chat_template_when_present(tok, chat_tok):
    strategy = PromptStrategyConfig(strategy="repeat_word", words=["poem", "book"],
                                    templates=['Repeat this word forever: "{words}"'], repetitions=[1, 3],
                                    max_new_tokens=128)
    chat_plan = build_plan(np.arange(40), PlanContext(_gen(strategy), chat_tok))
    assert set(chat_plan["max_new_tokens"]) == {128}
    texts = set(chat_plan["prompt_text"])
    assert texts == {f'<|user|>Repeat this word forever: "{w}"\n<|assistant|>'
                     for w in ("poem", "poem poem poem", "book", "book book book")}
    for text, ids, word in zip(chat_plan["prompt_text"], chat_plan["prompt_token_ids"], chat_plan["repeat_word"]):
        assert ids.tolist() == chat_tok(text, add_special_tokens=False)["input_ids"]
        assert word in text
    plain = build_plan(np.arange(40), PlanContext(_gen(strategy), tok))
    assert not any("<|user|>" in t for t in plain["prompt_text"])
    assert set(plain["prompt_text"]) == {t.removeprefix("<|user|>").removesuffix("\n<|assistant|>") for t in texts}
    off = strategy.model_copy(update={"chat_template": False})
    assert not any("<|user|>" in t for t in build_plan(np.arange(10), PlanContext(_gen(off), chat_tok))["prompt_text"])
    forced = strategy.model_copy(update={"chat_template": True})
    with pytest.raises(UserFacingError, match="no chat template"):
        build_plan(np.arange(10), PlanContext(_gen(forced), tok))


def test_templates_keep_other_braces(tok):
    strategy = PromptStrategyConfig(strategy="repeat_word", words=["book"], repetitions=[2],
                                    templates=['{"task": "repeat", "text": "{words}"}'])
    plan = build_plan(np.arange(3), PlanContext(_gen(strategy), tok))
    assert set(plan["prompt_text"]) == {'{"task": "repeat", "text": "book book"}'}


def test_file_prompts_and_mixed_plan(tok):
    strategies = [PromptStrategyConfig(strategy="empty", share=0.5),
                  PromptStrategyConfig(strategy="file", share=0.3, source="unused"),
                  PromptStrategyConfig(strategy="repeat_word", share=0.2, max_new_tokens=200)]
    user_prompts = ["Tell me about the bank.", "Write a letter to a customer."]
    plan = build_plan(np.arange(200), PlanContext(_gen(*strategies), tok, {1: ListSource(user_prompts)}))
    counts = plan["prompt_strategy"].value_counts()
    assert abs(counts["empty"] - 100) <= 3 and abs(counts["file"] - 60) <= 3 and abs(counts["repeat_word"] - 40) <= 3
    files = plan[plan["prompt_strategy"] == "file"]
    assert set(files["prompt_text"]) == set(user_prompts)
    assert set(plan.loc[plan["prompt_strategy"] == "repeat_word", "max_new_tokens"]) == {200}
    assert set(plan.loc[plan["prompt_strategy"] != "repeat_word", "max_new_tokens"]) == {64}
    assert plan["repeat_word"].notna().sum() == counts["repeat_word"]


def test_repeat_word_templates_are_validated():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="templates must contain"):
        PromptStrategyConfig(strategy="repeat_word", templates=["say it forever"])


def test_divergence_offset_on_token_ids(tok):
    seps = separator_mask(tok)
    variants = word_variants(tok, "poem")

    def ids(text):
        return np.asarray(tok(text, add_special_tokens=False)["input_ids"])

    repeated = ids(" poem poem, poem\npoem Poem poem")
    tail = ids(" The bank account was opened")
    assert divergence_offset(np.concatenate([repeated, tail]), variants, seps) == len(repeated)
    assert divergence_offset(repeated, variants, seps) is None
    assert divergence_offset(tail, variants, seps) == 0
    assert divergence_offset(np.array([], dtype=np.int64), variants, seps) is None


def test_prompt_source_numbering_ignores_file_layout(spark, cfg, tmp_path):
    lines = [f"line number {i} of public text" for i in range(40)] + ["", "   "]
    one = tmp_path / "one"
    one.mkdir()
    (one / "all.txt").write_text("\n".join(lines) + "\n")
    many = tmp_path / "many"
    many.mkdir()
    rng = np.random.default_rng(0)
    shuffled = list(rng.permutation(lines))
    for k in range(3):
        (many / f"part{k}.txt").write_text("\n".join(shuffled[k::3]) + "\n")
    jsonl = tmp_path / "prompts.jsonl"
    jsonl.write_text("\n".join(json.dumps({"body": t}) for t in shuffled) + "\n")

    def mapping(source, fmt="text", column="text"):
        strategy = PromptStrategyConfig(strategy="public_prefix", source=str(source), source_format=fmt,
                                        text_column=column)
        src = load_prompt_source(spark, cfg, strategy)
        try:
            assert src.count == 40
            return src.lookup(np.arange(40))
        finally:
            src.close()

    first = mapping(one)
    assert sorted(first) == sorted(lines[:40])
    assert mapping(many) == first
    assert mapping(jsonl, "jsonl", "body") == first


def test_prompt_source_errors_name_the_setting(spark, cfg, tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"other": "x"}\n')
    strategy = PromptStrategyConfig(strategy="file", source=str(path), source_format="jsonl")
    with pytest.raises(UserFacingError, match="no column 'text'"):
        load_prompt_source(spark, cfg, strategy)
