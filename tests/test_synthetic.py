"""The embedded demo assets: planted ground truth, memorisation, validity, caching."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import re
from dataclasses import replace
from pathlib import Path

import phonenumbers
import pytest
from stdnum import iban, luhn
from stdnum.gb import nhs
from stdnum.us import ssn

from conftest import at_once
from extraction_audit import synthetic
from extraction_audit.synthetic import (
    DemoParams,
    ModelShape,
    build_corpus,
    ensure_demo_assets,
    greedy_match_length,
    load_demo_assets,
    memorisation_report,
    write_corpus,
)

ENTITY_TYPES = {"email", "phone", "card", "iban", "uk_bank_account", "us_ssn", "nhs_number", "uk_nino",
                "date_of_birth", "ip_address", "person_name"}

# A build small enough to run several times in a test (the models learn nothing).
TINY = DemoParams(n_docs=60, n_holdout=5, n_public_lines=10, docs_per_file=25, vocab_size=400,
                  model=ModelShape(n_layer=1, n_embd=32, n_head=2, steps=2, batch_size=2, seq_len=32),
                  reference=ModelShape(n_layer=1, n_embd=16, n_head=2, steps=1, batch_size=2, seq_len=32))


def read_corpus(corpus_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(corpus_dir.glob("*.jsonl")):
        rows.extend(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return rows


def docs_containing(docs: list[dict], text: str) -> list[str]:
    return sorted(d["id"] for d in docs if text in d["text"])


@pytest.fixture(scope="module")
def corpus(demo_assets) -> list[dict]:
    return read_corpus(demo_assets.corpus_dir)


@pytest.fixture(scope="module")
def report(demo_assets) -> list[dict]:
    return memorisation_report(demo_assets)


# ---------------------------------------------------------------- memorisation


def test_model_memorises_every_rare_passage(demo_assets, report):
    rare_ids = {p["id"] for p in demo_assets.planted if p["kind"] == "rare"}
    assert {row["id"] for row in report} == rare_ids and len(rare_ids) >= 5
    for row in report:
        assert row["target_tokens"] >= 50, row
        assert row["model_matched_tokens"] >= 50, row


def test_reference_model_memorises_clearly_less(report):
    model = [row["model_matched_tokens"] for row in report]
    reference = [row["reference_matched_tokens"] for row in report]
    assert sum(reference) <= 0.5 * sum(model), (model, reference)
    assert sum(r >= 50 for r in reference) <= len(report) // 2, reference


def test_ordinary_documents_are_not_memorised(demo_assets, corpus):
    """Only planted content should come out verbatim: rare passages stay the privacy findings."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    tok = AutoTokenizer.from_pretrained(demo_assets.tokenizer_dir)
    model = GPT2LMHeadModel.from_pretrained(demo_assets.model_dir).eval()
    planted_docs = {d for p in demo_assets.planted for d in p["doc_ids"]}
    planted_docs |= {d for e in demo_assets.planted_pii for d in e["doc_ids"]}
    ordinary = [d for d in corpus if d["id"] not in planted_docs][:20]
    matched = []
    for doc in ordinary:
        ids = tok(doc["text"])["input_ids"]
        matched.append(greedy_match_length(model, ids[:12], ids[12:62]))
    assert sum(m >= 50 for m in matched) <= 1, matched


def test_tokenizer_is_shared_and_fits_uint16(demo_assets):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_assets.tokenizer_dir)
    assert len(tok) <= 65536
    assert tok.eos_token == tok.bos_token == tok.pad_token == tok.unk_token == "<|endoftext|>"
    text = demo_assets.planted[0]["text"] + " \u00e9t\u00e9 \U0001f600"
    assert tok.decode(tok(text)["input_ids"]) == text  # byte-level: anything round-trips
    for model_dir in (demo_assets.model_dir, demo_assets.reference_model_dir):
        assert AutoTokenizer.from_pretrained(model_dir).get_vocab() == tok.get_vocab()


# ---------------------------------------------------------------- planted ground truth


def test_corpus_records_have_the_documented_fields(corpus):
    assert 200 <= len(corpus) <= 1000
    assert all(set(d) == {"id", "text", "source"} and d["text"] for d in corpus)
    assert len({d["id"] for d in corpus}) == len(corpus)


def test_planted_passage_doc_counts_match_the_corpus(demo_assets, corpus):
    by_kind: dict[str, list[dict]] = {}
    for p in demo_assets.planted:
        by_kind.setdefault(p["kind"], []).append(p)
        assert docs_containing(corpus, p["text"]) == p["doc_ids"], p["id"]
    assert set(by_kind) == {"rare", "boilerplate", "filler"}
    assert all(len(p["doc_ids"]) >= 30 for p in by_kind["boilerplate"])
    assert all(1 <= len(p["doc_ids"]) <= 2 for p in by_kind["rare"])
    assert {len(p["doc_ids"]) for p in by_kind["rare"]} == {1, 2}


def test_rare_passages_are_long_and_distinct(demo_assets):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_assets.tokenizer_dir)
    rare = demo_assets.rare_passages()
    assert all(len(tok(p["text"])["input_ids"]) >= 100 for p in rare)
    openings = {" ".join(p["text"].split()[:3]) for p in rare}
    assert len(openings) == len(rare)


def test_filler_is_low_entropy(demo_assets):
    for p in demo_assets.planted:
        words = p["text"].split()
        if p["kind"] == "filler":
            assert len(words) >= 50 and not any(c.isalpha() for c in p["text"]), p["id"]


def test_every_pii_type_is_planted_inside_and_outside_rare_passages(demo_assets):
    pii = demo_assets.planted_pii
    assert {e["entity_type"] for e in pii} == ENTITY_TYPES
    assert any(e["in_rare_passage"] for e in pii) and any(not e["in_rare_passage"] for e in pii)
    for passage in demo_assets.rare_passages():
        inside = [e for e in pii if e["passage_id"] == passage["id"]]
        assert len(inside) >= 3, passage["id"]
        assert all(e["text"] in passage["text"] for e in inside)


def test_planted_pii_occurs_in_exactly_the_listed_documents(demo_assets, corpus):
    for e in demo_assets.planted_pii:
        assert docs_containing(corpus, e["text"]) == e["doc_ids"], e


def _digits(value: str) -> str:
    return re.sub(r"\D", "", value)


def test_planted_pii_values_are_valid(demo_assets):
    checked = set()
    for e in demo_assets.planted_pii:
        kind, value = e["entity_type"], e["value"]
        if kind == "card":
            assert len(_digits(value)) == 16 and luhn.is_valid(_digits(value)), value
        elif kind == "nhs_number":
            assert nhs.is_valid(_digits(value)), value
        elif kind == "iban":
            assert iban.is_valid(value) and value.startswith("GB"), value
        elif kind == "us_ssn":
            assert ssn.is_valid(value), value
        elif kind == "uk_nino":  # python-stdnum has no NINO module: the HMRC format rules
            assert re.fullmatch(r"(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]"
                                r" \d{2} \d{2} \d{2} [A-D]", value), value
        elif kind == "phone":
            region = "US" if value.startswith("(") else "GB"
            assert phonenumbers.is_valid_number(phonenumbers.parse(value, region)), value
        elif kind == "email":
            assert re.fullmatch(r"[a-z0-9.]+@[a-z0-9.-]+\.[a-z]{2,}", value), value
        elif kind == "ip_address":
            assert ipaddress.ip_address(value).is_global, value
        elif kind == "uk_bank_account":
            assert re.fullmatch(r"\d{2}-\d{2}-\d{2} \d{8}", value), value
        elif kind == "date_of_birth":
            fmt = "%m/%d/%Y" if "date of birth" in e["text"] else "%d/%m/%Y"
            assert dt.datetime.strptime(value, fmt).year < 2010, value
            assert re.search(r"born on|DOB:|date of birth", e["text"]), e
        elif kind == "person_name":
            assert re.fullmatch(r"[A-Z][a-z]+ [A-Z][a-z]+", value), value
        checked.add(kind)
    assert checked == ENTITY_TYPES


def test_holdout_does_not_occur_in_the_corpus(demo_assets, corpus):
    holdout = [json.loads(line) for line in demo_assets.holdout_path.read_text(encoding="utf-8").splitlines()]
    assert len(holdout) >= 20
    corpus_texts = [d["text"] for d in corpus]
    for h in holdout:
        first_sentence = h["text"].split(". ")[0]
        assert not any(h["text"] in t or first_sentence in t for t in corpus_texts), h["id"]


def test_public_prompts_open_some_planted_passages(demo_assets):
    lines = demo_assets.prompts_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 100 and all(line.strip() for line in lines)
    for p in demo_assets.planted:
        opening = " ".join(p["text"].split()[:8])
        assert (opening in lines) == p.get("in_public_prompts", False), p["id"]
    rare_flags = [p["in_public_prompts"] for p in demo_assets.rare_passages()]
    assert any(rare_flags) and not all(rare_flags)  # some passages only come out with their true prefix


# ---------------------------------------------------------------- determinism and caching


def test_corpus_is_deterministic_for_a_seed(demo_assets, tmp_path):
    assert demo_assets.manifest["params_hash"] == DemoParams(seed=0).digest()
    for name, seed in (("again", 0), ("other", 1)):
        write_corpus(build_corpus(DemoParams(seed=seed)), tmp_path / name, DemoParams().docs_per_file)
    built = sorted(demo_assets.corpus_dir.glob("*.jsonl"))
    assert [p.name for p in built] == sorted(p.name for p in (tmp_path / "again" / "corpus").glob("*.jsonl"))
    for path in built:
        assert path.read_bytes() == (tmp_path / "again" / "corpus" / path.name).read_bytes()
    assert built[0].read_bytes() != (tmp_path / "other" / "corpus" / built[0].name).read_bytes()


def test_second_call_reuses_the_build(demo_assets):
    manifest_mtime = demo_assets.manifest_path.stat().st_mtime_ns
    weights = sorted(demo_assets.model_dir.glob("*.safetensors"))
    assert weights
    weights_mtime = [w.stat().st_mtime_ns for w in weights]
    again = ensure_demo_assets(demo_assets.root)
    assert again == demo_assets == load_demo_assets(demo_assets.root)
    assert demo_assets.manifest_path.stat().st_mtime_ns == manifest_mtime
    assert [w.stat().st_mtime_ns for w in weights] == weights_mtime


@pytest.fixture
def count_builds(monkeypatch):
    calls = []
    real_build = synthetic._build

    def counting_build(staging, params):
        calls.append(params)
        return real_build(staging, params)

    monkeypatch.setattr(synthetic, "_build", counting_build)
    return calls


def test_cache_rebuilds_only_when_needed(tmp_path, count_builds):
    root = tmp_path / "assets"
    first = ensure_demo_assets(root, params=TINY)
    ensure_demo_assets(root, params=TINY)
    assert len(count_builds) == 1

    ensure_demo_assets(root, seed=1, params=TINY)  # other parameters: rebuild
    assert len(count_builds) == 2
    ensure_demo_assets(root, seed=1, params=TINY, force=True)
    assert len(count_builds) == 3

    # An interrupted build (no manifest, a staging folder left behind) is never reused.
    (root / "manifest.json").unlink()
    (root / ".staging-interrupted").mkdir()
    rebuilt = ensure_demo_assets(root, params=TINY)
    assert len(count_builds) == 4
    assert not list(root.glob(".staging-*"))
    assert rebuilt.planted == first.planted
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [".build.lock", "manifest.json", *synthetic._ASSET_ENTRIES])
    with pytest.raises(FileNotFoundError):
        load_demo_assets(tmp_path / "never-built")


def test_concurrent_callers_build_once(tmp_path, count_builds):
    root = tmp_path / "assets"
    results = []
    errors = at_once(lambda: results.append(ensure_demo_assets(root, params=replace(TINY, n_holdout=6))), threads=3)
    assert not errors
    assert len(count_builds) == 1
    assert len(results) == 3 and all(r.planted == results[0].planted for r in results)
