"""Shared fixtures: one local Spark session for the whole test run, a fresh warehouse
folder per test, and the tiny demo assets (corpus, tokenizer, models) built once.

Creating the ~20 empty Delta tables costs 10-20 s per warehouse, and most tests start from
a fresh one: the session fixture creates them once (with the product's own
``Tables.ensure_all``) in a template warehouse, and ``make_config`` seeds each new
warehouse with a copy (path-based Delta tables are relocatable folders).  The tables are
still created and checked by the product code: ``Tables.ensure`` runs on every copy."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("EXTRACTION_AUDIT_PII_KEY", "test-only-key")

from extraction_audit.config import AuditConfig, parse_config  # noqa: E402


# Test tables hold a few hundred rows: compiling generated Java for every new plan costs
# more than interpreting it (measured: two match oracle tests 80 s -> 64 s).  Results are
# the same by Spark's contract; production sessions keep whole-stage code generation.
# The test session's JVM compiles with C2 only what is ten times hotter than by default
# (three match tests on an idle machine: 204 -> 176 CPU-s, 130 -> 124 s): most of a tiny
# test's JVM time was the C2 compiler thread.  SerialGC and two compiler threads instead of
# G1's parallel workers and the default count: the same three tests 155 -> 137 CPU-s
# (108 -> 105 s); C1 alone used 148 CPU-s but took 118 s.
_TEST_SESSION_JVM = ("-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=20000 "
                     "-XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=400000 "
                     "-XX:+UseSerialGC -XX:CICompilerCount=2")
TEST_SPARK_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                   "spark.driver.extraJavaOptions": _TEST_SESSION_JVM}

# CLI processes a test starts live a minute or two: much of their CPU is the JVM's own
# warm-up (C2 compiler threads, G1's parallel workers) and code generation.  On 2 cores,
# with two such processes or a process and the test session running at once, CPU is the
# suite's wall time.  Measured on one ``audit --steps generate,match`` on an idle 2-core
# machine: 122 CPU-s in 70.5 s with production settings, 72 CPU-s in 56 s with these.  The
# long-lived test session keeps C2 (C1 alone made it 22% slower).  Results are the same.
# Adaptive execution is off in these processes: on a few hundred rows it only adds a job per
# shuffle or broadcast stage and a re-plan after each (the bundle's report step: 220 Spark
# jobs -> 138; the whole bundle task graph on an idle 2-core machine 295 s -> 251 s).  The
# long-lived test session keeps it on (4% there), so the suite still runs every plan
# adaptively; results are the same by Spark's contract.
# With C1 alone HotSpot reserves a 48 MB code cache, not tiered compilation's 240 MB: one
# in-process audit with these settings filled it after 31 s (compilation disabled) and the
# code-cache sweeper then used 37.7 of the driver's 197.5 CPU-s (async-profiler CPU samples
# per thread) re-scanning it.  With a 256 MB cache and no flushing (a process of minutes
# never fills it): JVM 126.9 CPU-s, sweeper negligible, the audit 167.8 -> 127.5 s (256 MB
# with flushing: 134.5 CPU-s, 136.2 s).  The test session's tiered JIT has no such cost.
_SHORT_JVM = ("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m "
              "-XX:-UseCodeCacheFlushing")
CLI_TEST_SPARK_CONF = {**TEST_SPARK_CONF, "spark.driver.extraJavaOptions": _SHORT_JVM,
                       "spark.executor.extraJavaOptions": _SHORT_JVM, "spark.sql.adaptive.enabled": "false"}

_TEMPLATE_WAREHOUSE: Path | None = None   # set once the session's template tables exist


def seed_warehouse(warehouse: Path) -> None:
    """Copy the template's empty tables into a warehouse folder that does not exist yet."""
    if _TEMPLATE_WAREHOUSE is not None and not warehouse.exists():
        shutil.copytree(_TEMPLATE_WAREHOUSE, warehouse)


def make_config(tmp_path: Path, seed_tables: bool = True, **sections) -> AuditConfig:
    """A config whose tables live under ``tmp_path``; ``sections`` override config sections.
    ``seed_tables``: start the warehouse from the session's template of empty tables."""
    data = {
        "storage": {"warehouse": str(tmp_path / "warehouse"), "cache_dir": str(tmp_path / "cache")},
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "conf": TEST_SPARK_CONF},
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
    warehouse = cfg.resolve(cfg.storage.warehouse)
    if seed_tables and warehouse and not cfg.storage.database:
        seed_warehouse(Path(warehouse))
    return cfg


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from extraction_audit.spark import get_spark, prepare_local_jvm

    from extraction_audit.tables import Tables

    global _TEMPLATE_WAREHOUSE
    base = tmp_path_factory.mktemp("spark")
    cfg = make_config(base)
    # Once per machine (~20 s): every JVM of the run, CLI subprocesses included, then
    # starts from the recorded class archive (about 4 s less each).
    prepare_local_jvm()
    session = get_spark(cfg)
    template = make_config(tmp_path_factory.mktemp("template"), seed_tables=False)
    Tables(session, template).ensure_all()
    _TEMPLATE_WAREHOUSE = Path(template.storage.warehouse)
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
    if cache:
        root = Path(cache)
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        # One build for all workers of this pytest run (the builder locks against the others).
        root = tmp_path_factory.getbasetemp().parent / "demo-assets"
    else:
        root = tmp_path_factory.mktemp("demo-assets")
    return ensure_demo_assets(root)


# Measured seconds per module (sum of its tests' durations, 2026-12-07 suite on a 2-core
# machine, longest first).  ``--no-loadscope-reorder`` (pyproject) keeps this order: by
# default xdist reorders files by their number of tests, so a long end-to-end module could
# start last and run alone.  The first two modules go one to each worker: the bundle (which
# trains the demo assets) and the match tests (which do not need them, so the second worker
# never waits on the assets' lock).
_MODULE_SECONDS = {"test_runner_production": 531, "test_match": 375, "test_audit_faults": 280, "test_index": 197,
                   "test_demo": 185, "test_pii_spark": 77, "test_generate_job": 70, "test_generate_import": 61,
                   "test_report_build": 52, "test_runner_units": 42, "test_report_notebooks": 39,
                   "test_rank_candidates": 39, "test_pii_corpus_counts": 38, "test_rank_review": 22,
                   "test_rank_calibration": 18, "test_pii_demo": 15, "test_synthetic": 7}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -_MODULE_SECONDS.get(item.module.__name__.rpartition(".")[2], 0))


def at_once(action, threads: int = 2) -> list[BaseException]:
    """Run ``action`` in ``threads`` threads started together; the exceptions they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def run():
        try:
            start.wait()
            action()
        except BaseException as err:  # noqa: BLE001 - returned to the test
            errors.append(err)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return errors


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
