"""Review queue: export (HTML + CSV), import (validation, idempotence), confirmed-among-checked.

Candidates are written by hand (scores chosen, ranks computed by the real ``with_ranks``),
so these tests need no model."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import pytest
import yaml
from pyspark.testing import assertDataFrameEqual

from conftest import make_config
from extraction_audit.errors import UserFacingError
from extraction_audit.rank import confirmed_among_checked, export_review, import_review
from extraction_audit.rank.candidates import with_ranks
from extraction_audit.rank.scores import SCORES
from extraction_audit.tables import Tables

RUN = "run-review"


def write_candidates(spark, cfg, run_id: str, pdf: pd.DataFrame, texts: dict[int, str] | None = None) -> None:
    """Store hand-made candidates (sample_id, is_representative, cluster_id and score columns)
    with ranks computed by the production ranking, plus matching samples rows."""
    from pyspark.sql import functions as F

    tables = Tables(spark, cfg)
    df = spark.createDataFrame(pdf.assign(run_id=run_id))
    df = with_ranks(df, [s for s in SCORES if s in pdf.columns])
    tables.replace_run("candidates", df, run_id)
    texts = texts or {}
    samples = spark.createDataFrame(pd.DataFrame({
        "run_id": run_id, "sample_id": pdf["sample_id"],
        "text": [texts.get(int(s), f"sample text {s}") for s in pdf["sample_id"]],
        "prompt_text": "",
    })).withColumn("token_ids", F.array(F.lit(1)))
    tables.replace_run("samples", samples, run_id)


def scored_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pdf = pd.DataFrame({"sample_id": np.arange(n, dtype=np.int64)})
    for name in SCORES:
        pdf[name] = np.round(rng.normal(size=n), 1)  # rounding makes ties
    pdf["is_representative"] = True
    pdf["cluster_id"] = pdf["sample_id"]
    pdf["cluster_size"] = 1
    return pdf


def direct_top(pdf: pd.DataFrame, top_n: int) -> dict[int, set[str]]:
    """sample -> scores that put it in their top_n, by sorting in pandas."""
    reps = pdf[pdf["is_representative"]]
    tops: dict[int, set[str]] = {}
    for name, spec in SCORES.items():
        ordered = reps.sort_values([name, "sample_id"], ascending=[spec.ascending, True])
        for sid in ordered["sample_id"].head(top_n):
            tops.setdefault(int(sid), set()).add(name)
    return tops


@pytest.fixture(scope="module")
def queue_cfg(tmp_path_factory):
    return make_config(tmp_path_factory.mktemp("review-queue"))


@pytest.fixture
def cfg(spark, queue_cfg, queued_run):
    """The module's warehouse, with no reviews left over from another test."""
    Tables(spark, queue_cfg).delete("reviews", "true")
    return queue_cfg


@pytest.fixture(scope="module")
def queued_run(spark, queue_cfg):
    cfg = queue_cfg
    pdf = scored_frame(20, seed=5)
    pdf.loc[pdf["sample_id"] == 7, "is_representative"] = False  # a collapsed near-duplicate
    pdf.loc[pdf["sample_id"] == 7, "cluster_id"] = 3
    pdf.loc[pdf["sample_id"] == 3, "cluster_size"] = 2
    pdf.loc[pdf["sample_id"] == 2, "target_log_ppl"] = -99.0  # rank 1 for target_log_ppl
    pdf.loc[pdf["sample_id"] == 7, "target_log_ppl"] = -100.0  # would be first, but not a representative
    texts = {2: "<script>alert('x')</script> & \"quoted\"\nsecond line", 5: "=HYPERLINK(\"http://evil\")"}
    write_candidates(spark, cfg, RUN, pdf, texts)
    return pdf, texts


def test_export_lists_the_top_per_score_once_each(spark, cfg, queued_run, tmp_path):
    pdf, texts = queued_run
    out = export_review(spark, cfg, RUN, 3, tmp_path / "queue")
    csv = pd.read_csv(out["csv"], dtype={"verdict": str, "evidence": str}, keep_default_na=False)
    expected = direct_top(pdf, 3)
    assert sorted(csv["sample_id"]) == sorted(expected) and out["samples"] == len(expected)
    assert 7 not in set(csv["sample_id"])
    for _, row in csv.iterrows():
        named = {part.split(" #")[0] for part in row["top_by"].split("; ")}
        assert named == expected[row["sample_id"]]
    assert csv.iloc[0]["sample_id"] == 2 and "target_log_ppl #1" in csv.iloc[0]["top_by"]
    assert (csv["verdict"] == "").all() and (csv["evidence"] == "").all()
    # spreadsheet formula neutralised in the CSV only
    if 5 in set(csv["sample_id"]):
        assert csv.set_index("sample_id").loc[5, "text"] == "'" + texts[5]

    page = open(out["html"], encoding="utf-8").read()
    assert "<script>" not in page and html.escape(texts[2].split("\n")[0]) in page
    assert "<link" not in page and "src=" not in page and "<style>" in page
    assert page.count("<tr><td class=num>") == len(expected)

    one_score = cfg.model_copy(deep=True)
    one_score.rank.scores = ["zlib_ratio"]
    only = pd.read_csv(export_review(spark, one_score, RUN, 2, tmp_path / "one")["csv"])
    reps = pdf[pdf["is_representative"]].sort_values(["zlib_ratio", "sample_id"])
    assert only["sample_id"].tolist() == reps["sample_id"].head(2).tolist()
    assert only["top_by"].tolist() == ["zlib_ratio #1", "zlib_ratio #2"]


def test_import_records_verdicts_idempotently(spark, cfg, queued_run, tmp_path):
    out = export_review(spark, cfg, RUN, 3, tmp_path / "queue")
    csv = pd.read_csv(out["csv"], dtype=str, keep_default_na=False)
    ids = csv["sample_id"].astype(int).tolist()
    verdicts = ["confirmed", "Not_Found ", "unsure", ""] * len(ids)
    csv["verdict"] = verdicts[: len(ids)]
    csv.loc[0, "evidence"] = "https://example.org/leak"
    csv.to_csv(out["csv"], index=False)

    first = import_review(spark, cfg, out["csv"], "alice")
    filled = sum(1 for v in verdicts[: len(ids)] if v)
    assert first["recorded"] == filled and first["skipped"]["no_verdict"] == len(ids) - filled
    tables = Tables(spark, cfg)
    before = tables.read("reviews").orderBy("sample_id")
    assert before.count() == filled
    row0 = before.where(f"sample_id = {ids[0]}").first()
    assert (row0["verdict"], row0["evidence"], row0["reviewer"]) == ("confirmed", "https://example.org/leak", "alice")
    assert before.where(f"sample_id = {ids[1]}").first()["verdict"] == "not_found"
    snapshot = before.toPandas()

    again = import_review(spark, cfg, out["csv"], "alice")
    assert again["recorded"] == 0 and again["unchanged"] == filled
    assertDataFrameEqual(tables.read("reviews"), spark.createDataFrame(snapshot))

    csv.loc[1, "verdict"] = "confirmed"
    csv.to_csv(out["csv"], index=False)
    changed = import_review(spark, cfg, out["csv"], "alice")
    assert changed["recorded"] == 1
    assert tables.read("reviews").count() == filled
    import_review(spark, cfg, out["csv"], "bob")  # a second reviewer adds rows
    assert tables.read("reviews").count() == 2 * filled


def test_confirmed_among_checked_per_score(spark, cfg, queued_run, tmp_path):
    pdf, _ = queued_run
    tops = direct_top(pdf, 3)
    ids = sorted(tops)
    verdict = {sid: ["confirmed", "not_found", "unsure"][i % 3] for i, sid in enumerate(ids[:-1])}
    path = tmp_path / "filled.csv"
    pd.DataFrame({"run_id": RUN, "sample_id": list(verdict), "verdict": list(verdict.values()),
                  "evidence": ""}).to_csv(path, index=False)
    import_review(spark, cfg, path, "alice")
    # bob confirms one that alice marked not_found: any confirmation wins
    flipped = next(s for s, v in verdict.items() if v == "not_found")
    pd.DataFrame({"run_id": [RUN], "sample_id": [flipped], "verdict": ["confirmed"]}).to_csv(path, index=False)
    import_review(spark, cfg, path, "bob")
    verdict[flipped] = "confirmed"

    got = confirmed_among_checked(spark, cfg, RUN, top_n=3).set_index("score")
    for name in list(SCORES) + ["any"]:
        members = [s for s, names in tops.items() if name == "any" or name in names]
        checked = [s for s in members if s in verdict]
        confirmed = [s for s in checked if verdict[s] == "confirmed"]
        assert got.loc[name, "in_top"] == len(members)
        assert got.loc[name, "checked"] == len(checked)
        assert got.loc[name, "confirmed"] == len(confirmed)
        assert got.loc[name, "unsure"] == sum(verdict[s] == "unsure" for s in checked)
        expected = len(confirmed) / len(checked) if checked else np.nan
        np.testing.assert_allclose(got.loc[name, "confirmed_among_checked"], expected)


def _write(path, rows):
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_import_rejects_bad_rows_naming_them(spark, cfg, queued_run, tmp_path):
    bad = _write(tmp_path / "bad.csv", {"run_id": [RUN, RUN], "sample_id": [1, 2], "verdict": ["confirmed", "yes"]})
    with pytest.raises(UserFacingError, match=r"row 2 \(sample 2\): verdict 'yes' is not one of"):
        import_review(spark, cfg, bad, "alice")
    dup = _write(tmp_path / "dup.csv", {"run_id": [RUN] * 3, "sample_id": [1, 4, 1], "verdict": ["unsure"] * 3})
    with pytest.raises(UserFacingError, match="rows 1, 3 all give a verdict"):
        import_review(spark, cfg, dup, "alice")
    unknown = _write(tmp_path / "unknown.csv", {"run_id": [RUN, "other"], "sample_id": [1, 1],
                                                 "verdict": ["unsure", "unsure"]})
    with pytest.raises(UserFacingError, match="row 2: run other sample 1 is not in candidates"):
        import_review(spark, cfg, unknown, "alice")
    nocol = _write(tmp_path / "nocol.csv", {"run_id": [RUN], "sample_id": [1]})
    with pytest.raises(UserFacingError, match="missing column"):
        import_review(spark, cfg, nocol, "alice")
    assert Tables(spark, cfg).read("reviews").count() == 0  # nothing half-imported


def test_cli_export_import_and_clear_error(spark, cfg, queued_run, tmp_path, capsys):
    from extraction_audit.cli import main

    config = tmp_path / "audit.yaml"
    config.write_text(yaml.safe_dump(cfg.model_dump(mode="json")), encoding="utf-8")
    assert main(["review", "export", "--config", str(config), "--run-id", RUN, "--top", "2",
                 "--out", str(tmp_path / "cli")]) == 0
    csv_path = tmp_path / "cli" / f"review_{RUN}.csv"
    csv = pd.read_csv(csv_path, dtype=str, keep_default_na=False)
    csv["verdict"] = "not_found"
    csv.loc[0, "verdict"] = "maybe"
    csv.to_csv(csv_path, index=False)
    assert main(["review", "import", "--config", str(config), str(csv_path), "--reviewer", "carol"]) == 2
    err = capsys.readouterr().err
    assert "row 1" in err and "'maybe'" in err and "Traceback" not in err
    csv.loc[0, "verdict"] = "confirmed"
    csv.to_csv(csv_path, index=False)
    assert main(["review", "import", "--config", str(config), str(csv_path), "--reviewer", "carol"]) == 0
    printed = capsys.readouterr().out
    assert f"confirmed among checked, run {RUN}" in printed
    any_line = next(line.split() for line in printed.splitlines() if line.strip().startswith("any "))
    assert any_line[2:4] == [str(len(csv)), "1"]  # checked, confirmed
