"""The report on small hand-built tables: every number equals direct SQL over the tables,
two runs are compared only at the budgets both have, the chance baseline, the CLI.

``build_small_runs`` writes two runs that follow the table contract exactly (TABLES.md):
run-a (40 samples, budgets 1,000 / 2,000 / 4,000 tokens) and its control run-b (30
samples, budgets 1,000 / 2,000 / 3,000).  run-b finds more distinct passages at 1,000
tokens, run-a more at 2,000: a crossing.  The notebook test reuses it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import make_config

from extraction_audit.report import queries as Q
from extraction_audit.tables import TABLES, Tables

RUN_A, RUN_B = "run-a", "run-b"
N_MATCH = 8
TOKENS_PER_SAMPLE = 100
DOC_COUNTS = [1, 1, 2, 2, 5, 50, 0, 1, 3000, 1, 1, 2, 7, 1, 1, 1]
LOW_ENTROPY = {7}
PROMPT_COPY = {13}          # only reproduces its sample's prompt: not counted
EXCLUDED = LOW_ENTROPY | PROMPT_COPY
BUDGETS = {RUN_A: [1000, 2000, 4000], RUN_B: [1000, 2000, 3000]}


def _emissions() -> dict[str, list[list[int]]]:
    """Which passages (indexes into DOC_COUNTS) each sample of each run emitted."""
    rng = np.random.default_rng(5)
    a = [[0]] * 5 + [[]] * 5 + [[j] for j in range(1, 11)]
    a += [sorted(rng.choice(16, size=rng.integers(0, 4), replace=False).tolist()) for _ in range(20)]
    b = [[j] for j in range(10)] + [[j % 5] for j in range(10)] + [[]] * 10
    return {RUN_A: a, RUN_B: b}


def _passages() -> list[dict]:
    rng = np.random.default_rng(9)
    out = []
    for j, dc in enumerate(DOC_COUNTS):
        ids = rng.integers(100, 5000, 12 + j % 9).astype(np.int32)
        out.append({"passage_id": hashlib.sha1(ids.tobytes()).hexdigest(), "token_ids": ids.tolist(),
                    "text": f"passage {j}: " + " ".join(f"w{t}" for t in ids), "n_tokens": len(ids),
                    "doc_count": dc, "is_low_entropy": j in LOW_ENTROPY, "is_prompt_copy": j in PROMPT_COPY,
                    "example_doc_ids": [f"doc-{j}-{k}" for k in range(min(dc, 2))]})
    return out


def _df(spark, name: str, rows: list[dict]):
    spec = TABLES[name]
    return spark.createDataFrame([tuple(r.get(c) for c in spec.column_names) for r in rows], schema=spec.schema)


def build_small_runs(spark, cfg) -> dict:
    """Write runs, samples, passage_occurrences, extracted_passages, run_metrics,
    pii_findings, candidates, reviews and corpus_documents; return the Python-side truth."""
    tables = Tables(spark, cfg)
    passages = _passages()
    emissions = _emissions()
    t0 = datetime(2024, 6, 1, 2, 0)
    rows: dict[str, list[dict]] = {k: [] for k in ("runs", "samples", "passage_occurrences", "extracted_passages",
                                                   "run_metrics", "pii_findings", "candidates", "reviews",
                                                   "corpus_documents")}
    pii = {RUN_A: [(3, "email", "k-email-1", "j***@example.com", True, 1),
                   (12, "email", "k-email-1", "j***@example.com", True, 1),
                   (25, "phone", "k-phone-1", "+44 ***** **123", False, 0),
                   (30, "email", "k-email-2", "a***@example.org", True, 40)]}
    truth = {}
    for run_id, started in ((RUN_B, t0), (RUN_A, t0 + timedelta(days=1))):
        samples = emissions[run_id]
        rows["runs"].append({
            "run_id": run_id, "status": "complete", "started_at": started, "finished_at": started,
            "model": f"/models/{'tiny-gpt2' if run_id == RUN_A else 'tiny-gpt2-early'}", "model_family": "tiny",
            "tokenizer": "tok@abc", "corpus_id": "demo", "prompt_strategy": "empty:0.5,public_prefix:0.5",
            "sampling": json.dumps({"temperature": 1.0, "top_k": 40}), "budget_tokens": BUDGETS[run_id][-1],
            "generated_tokens": len(samples) * TOKENS_PER_SAMPLE,
            "config_json": json.dumps({"index": {"n": N_MATCH}}), "steps_done": ["generate", "match"],
            "step_stats": "{}", "control_run_id": RUN_B if run_id == RUN_A else None,
        })
        occ = []
        for sid, emitted in enumerate(samples):
            rows["samples"].append({
                "run_id": run_id, "sample_id": sid, "prompt_strategy": "empty" if sid % 2 else "public_prefix",
                "prompt_text": "", "token_ids": list(range(TOKENS_PER_SAMPLE)), "text": f"sample {sid}",
                "n_tokens": TOKENS_PER_SAMPLE, "finish_reason": "length", "created_at": started})
            pos = 3
            for j in emitted:
                n = passages[j]["n_tokens"]
                occ.append({"run_id": run_id, "sample_id": sid, "start": pos, "end": pos + n, "j": j,
                            "is_prompt_copy": j in PROMPT_COPY})
                pos += n + 5
        rows["passage_occurrences"] += [{**o, "passage_id": passages[o["j"]]["passage_id"]} for o in occ]
        emitted_by = {}
        for o in occ:
            emitted_by.setdefault(o["j"], set()).add(o["sample_id"])
        for j, sids in emitted_by.items():
            p = passages[j]
            first = RUN_B if run_id == RUN_A and j in {jj for s in emissions[RUN_B] for jj in s} else run_id
            rows["extracted_passages"].append({
                **{k: p[k] for k in ("passage_id", "token_ids", "text", "n_tokens", "doc_count", "is_low_entropy",
                                     "is_prompt_copy", "example_doc_ids")},
                "run_id": run_id, "n_samples": len(sids), "doc_count_is_exact": True,
                "doc_count_upper_bound": p["doc_count"], "first_seen_run_id": first,
                "emission_rate": len(sids) / len(samples)})
        findings = pii.get(run_id, [])
        for sid, etype, key, red, in_corpus, dc in findings:
            rows["pii_findings"].append({
                "run_id": run_id, "sample_id": sid, "entity_type": etype, "char_start": 5, "char_end": 20,
                "value_redacted": red, "value_key": key, "value": None, "in_corpus": in_corpus,
                "corpus_doc_count": dc, "detector": etype})

        def stats(prefix: int) -> dict:
            kept = [o for o in occ if o["sample_id"] < prefix and o["j"] not in EXCLUDED]
            distinct = {o["j"] for o in kept}
            keys = {f[2] for f in findings if f[0] < prefix}
            generated = prefix * TOKENS_PER_SAMPLE
            extracted = sum(o["end"] - o["start"] for o in kept)
            return {"generated_tokens": generated, "n_samples": prefix, "extracted_tokens": extracted,
                    "share_extracted": extracted / generated, "distinct_passages": len(distinct),
                    "distinct_rare_passages": sum(1 for j in distinct if 1 <= DOC_COUNTS[j] <= 2),
                    "distinct_ngrams": sum(passages[j]["n_tokens"] - N_MATCH + 1 for j in distinct),
                    "pii_found": len(keys), "pii_in_corpus": len({f[2] for f in findings if f[0] < prefix and f[4]})}

        for budget in BUDGETS[run_id]:
            rows["run_metrics"].append({"run_id": run_id, "budget_tokens": budget,
                                        **stats(budget // TOKENS_PER_SAMPLE)})
        truth[run_id] = {"whole": stats(len(samples)), "samples": len(samples), "emitted_by": emitted_by,
                         "checkpoints": {b: stats(b // TOKENS_PER_SAMPLE) for b in BUDGETS[run_id]}}
    for sid in range(10):
        rows["candidates"].append({"run_id": RUN_A, "sample_id": sid, "target_log_ppl": 1.0 + sid / 10})
    for sid, reviewer, verdict in ((0, "r1", "confirmed"), (1, "r1", "not_found"), (2, "r1", "unsure"),
                                   (3, "r1", "not_found"), (3, "r2", "confirmed")):
        rows["reviews"].append({"run_id": RUN_A, "sample_id": sid, "reviewer": reviewer, "verdict": verdict,
                                "evidence": "", "reviewed_at": t0})
    for p in passages:
        for doc_id in p["example_doc_ids"]:
            rows["corpus_documents"].append({"corpus_id": "demo", "doc_id": doc_id, "source": "test.jsonl",
                                             "text": f"Dear Sir, {p['text']}. Regards", "n_tokens": 40})
    for name, table_rows in rows.items():
        for r in table_rows:
            r.pop("j", None)
        tables.append(name, _df(spark, name, table_rows))
    truth["passages"] = passages
    return truth


_SHARED: dict = {}


def shared_small_runs(spark, tmp_path_factory) -> tuple:
    """(cfg, truth, root) of the small runs, written once per pytest session: the notebook
    test reads the same tables (it only reads them)."""
    if "cfg" not in _SHARED:
        root = tmp_path_factory.mktemp("report")
        cfg = make_config(root, report={"bootstrap_samples": 100, "top_passages": 5})
        _SHARED.update(cfg=cfg, truth=build_small_runs(spark, cfg), root=root)
    return _SHARED["cfg"], _SHARED["truth"], _SHARED["root"]


@pytest.fixture(scope="module")
def small(spark, tmp_path_factory):
    """Tables, the chance baseline (injected matcher), and the report for run-a (with its
    control run-b added automatically) written by ``extraction-audit report`` with
    passage redaction on."""
    from extraction_audit.cli import main
    from extraction_audit.report.baseline import compute_chance_baseline

    cfg, truth, root = shared_small_runs(spark, tmp_path_factory)
    baseline = compute_chance_baseline(spark, cfg, RUN_A, match_fn=_fake_matcher, source="heldout-test",
                                       sequences_df=_sequences(spark))
    config_path = root / "report.yaml"
    config_path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")), encoding="utf-8")
    out = root / "out"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["report", "--config", str(config_path), "--run-id", RUN_A, "--out", str(out),
                     "--set", "report.redact_passages=true"])
    assert code == 0
    assert f"html: {out / 'report.html'}" in printed.getvalue()
    assert f"markdown: {out / 'model_card.md'}" in printed.getvalue()
    result = {"html": out / "report.html", "markdown": out / "model_card.md", "json": out / "report.json"}
    report = json.loads(result["json"].read_text(encoding="utf-8"))
    return {"cfg": cfg, "truth": truth, "result": result, "report": report, "baseline": baseline,
            "root": root, "config_path": config_path}


def _sequences(spark):
    rng = np.random.default_rng(3)
    rows = [(int(i), rng.integers(0, 50, 30).astype(int).tolist()) for i in range(40)]
    return spark.createDataFrame(rows, "sequence_id BIGINT, token_ids ARRAY<INT>")


def _fake_matcher(spark, cfg, sequences_df):
    """Stand-in for the matching stage: [0, 10) matches when the first token is even
    (passage = the first 10 tokens); [12, 17) is low-entropy filler when the second
    token is divisible by 3."""
    return spark.sql("""
        SELECT sequence_id, 0 AS start, 10 AS `end`, sha1(CAST(array_join(slice(token_ids, 1, 10), ',') AS BINARY))
               AS passage_id, false AS is_low_entropy
        FROM {seq} WHERE token_ids[0] % 2 = 0
        UNION ALL
        SELECT sequence_id, 12, 17, 'filler', true FROM {seq} WHERE token_ids[1] % 3 = 0
    """, seq=sequences_df)


def _sql(spark, text: str) -> pd.DataFrame:
    return spark.sql(text).toPandas()


# ---------------------------------------------------------------------------------------

def test_headline_numbers_equal_direct_sql(spark, small):
    rep, truth = small["report"], small["truth"]
    h = rep["runs"][RUN_A]["headline"]
    direct = _sql(spark, f"""
        SELECT (SELECT count(*) FROM samples WHERE run_id = '{RUN_A}') AS samples,
               (SELECT sum(n_tokens) FROM samples WHERE run_id = '{RUN_A}') AS generated_tokens,
               (SELECT sum(o.`end` - o.start) FROM passage_occurrences o JOIN extracted_passages p
                  USING (run_id, passage_id)
                  WHERE run_id = '{RUN_A}' AND NOT p.is_low_entropy AND NOT p.is_prompt_copy) AS extracted_tokens,
               (SELECT count(*) FROM extracted_passages WHERE run_id = '{RUN_A}' AND NOT is_low_entropy
                  AND NOT is_prompt_copy) AS distinct_passages,
               (SELECT count(*) FROM extracted_passages WHERE run_id = '{RUN_A}' AND NOT is_low_entropy
                  AND NOT is_prompt_copy AND doc_count IN (1, 2)) AS distinct_rare_passages,
               (SELECT count(*) FROM extracted_passages WHERE run_id = '{RUN_A}' AND doc_count = 0
                  AND NOT is_low_entropy AND NOT is_prompt_copy) AS stitched_passages,
               (SELECT count(DISTINCT value_key) FROM pii_findings WHERE run_id = '{RUN_A}') AS pii_found,
               (SELECT count(DISTINCT value_key) FROM pii_findings WHERE run_id = '{RUN_A}' AND in_corpus)
                  AS pii_in_corpus
    """).iloc[0]
    for col in direct.index:
        assert h[col] == direct[col], col
    assert h["share_extracted"] == pytest.approx(direct["extracted_tokens"] / direct["generated_tokens"])
    # and the hand-built truth agrees with both
    whole = truth[RUN_A]["whole"]
    assert (h["distinct_passages"], h["extracted_tokens"], h["pii_found"]) == (
        whole["distinct_passages"], whole["extracted_tokens"], whole["pii_found"])
    # every headline estimate carries an interval around the value
    for stat, est in rep["runs"][RUN_A]["estimates"].items():
        assert est["value"] == pytest.approx(float(h[stat])), stat
        assert est["low"] <= est["value"] <= est["high"], stat
    assert h["prompt_copy_passages"] == 1 and h["low_entropy_passages"] == 1      # both excluded above
    assert rep["warnings"] == []


def test_growth_curve_and_tables_equal_direct_sql(spark, small):
    rep = small["report"]
    growth = pd.DataFrame(rep["growth_curve"])
    direct = _sql(spark, f"SELECT * FROM run_metrics WHERE run_id IN ('{RUN_A}', '{RUN_B}')")
    merged = growth.merge(direct, on=["run_id", "budget_tokens"], suffixes=("", "_sql"))
    assert len(merged) == len(direct) == 6
    for col in ("generated_tokens", "distinct_passages", "distinct_rare_passages", "share_extracted", "pii_found"):
        assert (merged[col] == merged[f"{col}_sql"]).all(), col

    hist = pd.DataFrame(rep["tables"]["DOC_COUNT_HISTOGRAM"]).set_index("doc_count_bucket")
    counts = _sql(spark, f"""SELECT doc_count, count(*) AS n FROM extracted_passages
                             WHERE run_id = '{RUN_A}' AND NOT is_low_entropy AND NOT is_prompt_copy
                             GROUP BY doc_count""")
    by_dc = dict(zip(counts["doc_count"], counts["n"]))
    assert hist.loc["1", "passages"] == by_dc.get(1, 0)
    assert hist.loc["2", "passages"] == by_dc.get(2, 0)
    assert hist.loc["0 (stitched)", "passages"] == by_dc.get(0, 0)
    assert hist.loc["1000+", "passages"] == sum(n for dc, n in by_dc.items() if dc >= 1000)
    assert hist["passages"].sum() == rep["runs"][RUN_A]["headline"]["distinct_passages"]
    h = rep["runs"][RUN_A]["headline"]
    assert hist["excluded_passages"].sum() == h["low_entropy_passages"] + h["prompt_copy_passages"] == 2

    rare = pd.DataFrame(rep["tables"]["TOP_RARE_PASSAGES"])
    direct_rare = _sql(spark, f"""SELECT passage_id, n_samples, n_samples / 40 AS rate FROM extracted_passages
                                  WHERE run_id = '{RUN_A}' AND NOT is_low_entropy AND NOT is_prompt_copy
                                    AND doc_count IN (1, 2)""")
    assert len(rare) == min(5, len(direct_rare))
    rate = dict(zip(direct_rare["passage_id"], direct_rare["rate"]))
    assert sorted(rare["n_samples"], reverse=True) == list(rare["n_samples"])
    assert rare["n_samples"].iloc[0] == direct_rare["n_samples"].max()
    for pid, r, lo, hi in zip(rare["passage_id"], rare["emission_rate"], rare["emission_rate_low"],
                              rare["emission_rate_high"]):
        assert r == pytest.approx(rate[pid]) and 0 <= lo <= r <= hi <= 1

    pii = pd.DataFrame(rep["tables"]["PII_BY_TYPE"]).set_index("entity_type")
    assert pii.loc["email", "distinct_values"] == 2 and pii.loc["email", "findings"] == 3
    assert pii.loc["email", "distinct_in_corpus"] == 2 and pii.loc["email", "distinct_in_rare_documents"] == 1
    assert pii.loc["phone", "distinct_in_corpus"] == 0
    assert "k-email" not in json.dumps(rep["tables"]["PII_BY_TYPE"])     # keys never shown, redacted values are

    checked = rep["tables"]["CONFIRMED_AMONG_CHECKED"][0]
    assert (checked["candidates"], checked["checked"], checked["confirmed"], checked["not_found"],
            checked["unsure"]) == (10, 4, 2, 1, 1)
    assert checked["share_confirmed_low"] < 0.5 < checked["share_confirmed_high"]

    strategies = pd.DataFrame(rep["tables"]["PROMPT_STRATEGY_BREAKDOWN"])
    assert strategies["samples"].sum() == 40
    assert strategies["extracted_tokens"].sum() == rep["runs"][RUN_A]["headline"]["extracted_tokens"]


def test_checkpoint_intervals_use_the_checkpoint_samples(small):
    rep, truth = small["report"], small["truth"]
    ci = pd.DataFrame(rep["runs"][RUN_A]["checkpoint_intervals"])
    assert set(ci["budget_tokens"]) == set(BUDGETS[RUN_A])
    for budget, expected in truth[RUN_A]["checkpoints"].items():
        row = ci[(ci["budget_tokens"] == budget) & (ci["stat"] == "distinct_passages")].iloc[0]
        assert row["value"] == expected["distinct_passages"]
        assert row["low"] <= row["value"] <= row["high"]


def test_comparison_aligns_on_common_budgets_and_calls_out_the_crossing(small):
    rep, truth = small["report"], small["truth"]
    assert rep["compare_run_ids"] == [RUN_B]            # the control run, added automatically
    comp = rep["comparisons"][0]
    aligned = pd.DataFrame(comp["aligned"])
    assert list(aligned["budget_tokens"]) == [1000, 2000]   # 3,000 and 4,000 are not common: no interpolation
    for _, row in aligned.iterrows():
        a, b = truth[RUN_A]["checkpoints"][row["budget_tokens"]], truth[RUN_B]["checkpoints"][row["budget_tokens"]]
        assert (row["distinct_passages_a"], row["distinct_passages_b"]) == (a["distinct_passages"],
                                                                            b["distinct_passages"])
        assert row["generated_tokens_a"] == row["generated_tokens_b"] == row["budget_tokens"]
    assert aligned["distinct_passages_a"].iloc[0] < aligned["distinct_passages_b"].iloc[0]
    assert aligned["distinct_passages_a"].iloc[1] > aligned["distinct_passages_b"].iloc[1]
    crossing = [c for c in comp["crossings"] if c["metric"] == "distinct_passages"]
    assert len(crossing) == 1
    c = crossing[0]
    assert (c["budget_before"], c["budget_after"], c["leader_before"], c["leader_after"]) == (1000, 2000, RUN_B,
                                                                                              RUN_A)
    assert 1000 < c["approx_budget"] < 2000
    # Sentences name runs by their short labels (the run key maps them to ids).
    label_a, label_b = rep["labels"][RUN_A], rep["labels"][RUN_B]
    assert label_a != label_b
    assert any(f"lead changes from {label_b} to {label_a} between 1,000 and 2,000 tokens" in s
               for s in comp["sentences"])


def test_extrapolation_and_chance_baseline_in_report(small):
    rep, truth = small["report"], small["truth"]
    rich = rep["runs"][RUN_A]["richness"]
    per_passage = [len(s) for j, s in truth[RUN_A]["emitted_by"].items() if j not in EXCLUDED]
    assert rich["observed"] == len(per_passage)
    assert rich["singletons"] == sum(1 for k in per_passage if k == 1)
    assert rich["doubletons"] == sum(1 for k in per_passage if k == 2)
    assert rich["observed"] <= rich["low"] <= rich["estimate"] <= rich["high"]
    assert "iChao2" in rich["method"]

    base = rep["tables"]["CHANCE_BASELINE"]
    assert len(base) == 1 and base[0]["source"] == "heldout-test"
    seqs = _sequences_pdf()
    matched = sum(10 for ids in seqs if ids[0] % 2 == 0)
    assert base[0]["extracted_tokens"] == matched
    assert base[0]["generated_tokens"] == 30 * len(seqs)
    assert base[0]["share_extracted"] == pytest.approx(matched / (30 * len(seqs)))
    assert base[0]["share_extracted_low"] <= base[0]["share_extracted"] <= base[0]["share_extracted_high"]
    assert base[0]["distinct_passages"] == len({tuple(ids[:10]) for ids in seqs if ids[0] % 2 == 0})
    assert small["baseline"]["low_entropy_tokens"] == 5 * sum(1 for ids in seqs if ids[1] % 3 == 0)


def _sequences_pdf() -> list[list[int]]:
    rng = np.random.default_rng(3)
    return [rng.integers(0, 50, 30).astype(int).tolist() for _ in range(40)]


def test_html_is_self_contained_redacted_and_shows_the_numbers(spark, small):
    from extraction_audit.report import fmt

    html = small["result"]["html"].read_text(encoding="utf-8")
    rep = small["report"]
    h = rep["runs"][RUN_A]["headline"]
    assert "<img" in html and "data:image/png;base64," in html
    for external in ("src=\"http", "href=\"http", "<script", "<link"):
        assert external not in html
    assert fmt.number(h["share_extracted"], share=True) in html
    assert "iChao2" in html and "Limitations" in html and "COMPARE_AT_EQUAL_BUDGETS" in html
    # report.redact_passages=true: no passage text, no document text
    assert "passage 1:" not in html and "[redacted passage," in html
    Q.use_tables(spark, small["cfg"])
    shown = Q.run_query(spark, "TOP_RARE_PASSAGES", run_id=RUN_A, rare_doc_count=2, redact=False, limit=5, z=1.96)
    assert shown["text"].str.startswith("passage ").all()
    md = small["result"]["markdown"].read_text(encoding="utf-8")
    assert "### Limitations" in md and "lower bound" in md.lower() and "differential privacy" in md
    assert "4,000" in md                                           # the budget
    assert "empty:0.5,public_prefix:0.5" in md                     # prompt strategies
    assert (small["result"]["html"].parent / "growth_curve.png").stat().st_size > 1000


def test_cli_prints_paths_and_rejects_unknown_runs(small, capsys):
    from extraction_audit.cli import main

    code = main(["report", "--config", str(small["config_path"]), "--run-id", "no-such-run"])
    assert code == 2
    assert "no-such-run" in capsys.readouterr().err
    code = main(["report", "--config", str(small["config_path"]), "--run-id", RUN_A, "--compare", "nope"])
    assert code == 2
    assert "nope" in capsys.readouterr().err


def test_every_query_compiles(spark, small):
    Q.use_tables(spark, small["cfg"])
    values = {"run_ids": [RUN_A], "run_id": RUN_A, "other_run_id": RUN_B, "rare_doc_count": 2, "redact": False,
              "limit": 3, "z": 1.96, "approx_similarity": 0.9}
    for name, query in Q.QUERIES.items():
        spark.sql(Q.bind(query.sql, values)).schema   # analysis fails loudly


def test_large_runs_use_the_poisson_bootstrap_in_spark(spark, small):
    """Above report.bootstrap_max_driver_samples the per-sample summaries stay in Spark;
    the Poisson bootstrap must agree with the pandas one."""
    from extraction_audit.report.bootstrap import SampleSummaries
    from extraction_audit.report.build import _analyse_run, _Queries

    cfg = small["cfg"].model_copy(deep=True)
    cfg.report.bootstrap_samples = 300
    cfg.report.bootstrap_seed = 1
    Q.use_tables(spark, cfg)
    q = _Queries(spark, 0.95)
    params = {"run_ids": [RUN_A], "rare_doc_count": 2}
    headline = q("HEADLINE", **params).iloc[0].to_dict()
    frequency = q("PASSAGE_FREQUENCY_COUNTS", **params)
    warnings: list[str] = []
    result = _analyse_run(q, cfg, RUN_A, {}, headline, pd.DataFrame(columns=["n_samples"]), frequency, None,
                          warnings)
    assert "Poisson" in result.bootstrap_method and result.checkpoint_intervals.empty and warnings == []
    pandas_reps = SampleSummaries(q("PER_SAMPLE_SUMMARY", **params)).replicates(300, 1)
    for stat in ("share_extracted", "distinct_passages", "distinct_rare_passages"):
        a, b = pandas_reps[stat], result.replicates[stat]
        assert len(b) == 300 and np.isfinite(b).all()
        assert b.mean() == pytest.approx(a.mean(), rel=0.1), stat
        assert 0.6 < b.std() / a.std() < 1.6, stat
        est = result.estimates[stat]
        assert est.low <= est.value <= est.high
    assert (result.replicates["distinct_passages"] <= small["truth"][RUN_A]["whole"]["distinct_passages"]).all()


@pytest.mark.slow
def test_chance_baseline_end_to_end_with_the_matching_stage(spark, tmp_path, word_tokenizer):
    """Held-out text -> tokenizer -> sample-sized sequences -> the real matcher -> table row."""
    from conftest import words

    from extraction_audit.index import build_index
    from extraction_audit.report.baseline import compute_chance_baseline

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    docs = {"d1": list(range(1, 21)), "d2": list(range(30, 46))}
    (corpus / "part-0.jsonl").write_text(
        "\n".join(json.dumps({"id": d, "text": words(t)}) for d, t in docs.items()), encoding="utf-8")
    held_out = {"h1": [5, 6, 7, 8, 9, 50, 51, 52, 53, 54, 55], "h2": [56, 57, 58, 59, 60],
                "h3": [61, 62, 63, 31, 32, 33, 34, 35, 36, 37, 62]}
    holdout = tmp_path / "holdout.jsonl"
    holdout.write_text("\n".join(json.dumps({"id": k, "text": words(t)}) for k, t in held_out.items()),
                       encoding="utf-8")
    cfg = make_config(tmp_path, model={"path": word_tokenizer}, corpus={"id": "c", "path": str(corpus)},
                      index={"n": 4, "bucket_bits": 2, "max_postings": 4},
                      report={"holdout_sequence_tokens": 8, "bootstrap_samples": 20})
    build_index(spark, cfg)
    row = compute_chance_baseline(spark, cfg, "run-x", source=str(holdout))
    # chunks of 8: h1 -> [5..9, 50, 51, 52] (5 tokens in d1) + [53, 54, 55]; h2 -> one chunk;
    # h3 -> [61, 62, 63, 31..35] (5 tokens in d2) + [36, 37, 62]: 31..37 is cut by the chunk edge
    assert row["sequences"] == 5 and row["generated_tokens"] == sum(len(t) for t in held_out.values())
    assert row["extracted_tokens"] == 10 and row["distinct_passages"] == 2
    assert row["share_extracted"] == pytest.approx(10 / 27)
    table = Tables(spark, cfg).read("chance_baseline").toPandas()
    assert len(table) == 1 and table["run_id"].iloc[0] == "run-x" and table["n"].iloc[0] == 4
