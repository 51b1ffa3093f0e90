"""Shared fixtures: one local Spark session for the whole test run, a fresh warehouse
folder per test, and the tiny demo assets (corpus, tokenizer, models) built once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("EXTRACTION_AUDIT_PII_KEY", "test-only-key")

from extraction_audit.config import AuditConfig, parse_config  # noqa: E402


def make_config(tmp_path: Path, **sections) -> AuditConfig:
    """A config whose tables live under ``tmp_path``; ``sections`` override config sections."""
    data = {
        "storage": {"warehouse": str(tmp_path / "warehouse"), "cache_dir": str(tmp_path / "cache")},
        "spark": {"master": "local[2]", "shuffle_partitions": 2},
        "index": {"bucket_bits": 2},
    }
    for key, value in sections.items():
        data.setdefault(key, {})
        if isinstance(value, dict):
            data[key].update(value)
        else:
            data[key] = value
    cfg = parse_config(data)
    cfg.base_dir = str(tmp_path)
    return cfg


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from extraction_audit.spark import get_spark

    base = tmp_path_factory.mktemp("spark")
    cfg = make_config(base)
    session = get_spark(cfg)
    yield session
    session.stop()


@pytest.fixture
def cfg(tmp_path) -> AuditConfig:
    return make_config(tmp_path)


@pytest.fixture(scope="session")
def demo_assets(tmp_path_factory):
    """Synthetic corpus with planted passages and PII, a tokenizer trained on it, a tiny
    GPT-2 that memorised the planted passages, and a weaker reference checkpoint.

    Set EXTRACTION_AUDIT_TEST_CACHE to a folder to reuse them across pytest runs."""
    from extraction_audit.synthetic import ensure_demo_assets

    cache = os.environ.get("EXTRACTION_AUDIT_TEST_CACHE")
    root = Path(cache) if cache else tmp_path_factory.mktemp("demo-assets")
    return ensure_demo_assets(root)


def build_word_tokenizer(path: Path, vocab: int = 64) -> Path:
    """A word-level tokenizer where ``w<i>`` is token ``i``: token ids can be planted exactly
    through text, so index and match tests can compare against brute force."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {f"w{i}": i for i in range(vocab)}
    words["<unk>"] = vocab
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")
    fast.save_pretrained(str(path))
    return path


def words(ids) -> str:
    return " ".join(f"w{int(i)}" for i in ids)


@pytest.fixture(scope="session")
def word_tokenizer(tmp_path_factory) -> str:
    return str(build_word_tokenizer(tmp_path_factory.mktemp("word-tokenizer")))
