"""Calibration against the corpus route equals a direct computation on a small labelled set."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from extraction_audit.rank import calibrate
from extraction_audit.rank.calibration import auc_from_rank_sum
from extraction_audit.rank.scores import SCORES
from extraction_audit.tables import Tables
from test_rank_review import scored_frame, write_candidates

RUN = "run-calibration"


def pairwise_auc(suspicion: np.ndarray, labels: np.ndarray) -> float:
    """Share of (positive, negative) pairs ordered correctly, ties counted half."""
    pos, neg = suspicion[labels == 1], suspicion[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


def test_auc_formula_on_hand_examples():
    # ranks (1 = least suspicious) of positives 3 and 4 among 4: perfect separation
    assert auc_from_rank_sum(7, 2, 2) == 1.0
    assert auc_from_rank_sum(3, 2, 2) == 0.0
    assert auc_from_rank_sum(3, 0, 4) is None


def _write_corpus_route(spark, cfg, occurrences: list[tuple[int, int, str]], low_entropy: set[str]):
    tables = Tables(spark, cfg)
    occ = pd.DataFrame(occurrences, columns=["sample_id", "start", "passage_id"]).assign(
        run_id=RUN, end=lambda d: d["start"] + 50)
    tables.append("passage_occurrences", spark.createDataFrame(occ))
    passages = sorted({p for _, _, p in occurrences})
    tables.append("extracted_passages", spark.createDataFrame(pd.DataFrame({
        "run_id": RUN, "passage_id": passages, "is_low_entropy": [p in low_entropy for p in passages]})))


def test_calibration_equals_direct_computation(spark, cfg):
    n = 40
    pdf = scored_frame(n, seed=11)
    non_reps = [5, 6, 30]
    pdf.loc[pdf["sample_id"].isin(non_reps), "is_representative"] = False
    pdf.loc[pdf["sample_id"] == 9, "reference_ratio"] = np.nan  # unranked for that score
    write_candidates(spark, cfg, RUN, pdf)
    occurrences = [(1, 0, "p-rare"), (1, 60, "p-other"), (4, 3, "p-rare"), (8, 0, "p-filler"),
                   (12, 0, "p-other"), (13, 10, "p-filler"), (13, 80, "p-rare"), (21, 0, "p-other"),
                   (5, 0, "p-rare"), (33, 0, "p-other"), (9, 0, "p-rare")]
    _write_corpus_route(spark, cfg, occurrences, low_entropy={"p-filler"})
    positive = {1, 4, 12, 13, 21, 5, 33, 9}  # 8 has only low-entropy filler

    got = calibrate(spark, cfg, RUN, ks=(3, 10, 100))
    assert len(got) == 3 * len(SCORES)
    for name, spec in SCORES.items():
        reps = pdf[pdf["is_representative"] & pdf[name].notna()]
        labels = reps["sample_id"].isin(positive).to_numpy().astype(int)
        suspicion = (-reps[name] if spec.ascending else reps[name]).to_numpy()
        ordered = reps.assign(label=labels).sort_values([name, "sample_id"], ascending=[spec.ascending, True])
        rows = got[got["score"] == name].set_index("k_requested")
        for k in (3, 10, 100):
            k_eff = min(k, len(reps))
            assert rows.loc[k, "k"] == k_eff
            assert rows.loc[k, "precision_at_k"] == pytest.approx(ordered["label"].head(k_eff).mean())
            assert rows.loc[k, "auc"] == pytest.approx(pairwise_auc(suspicion, labels))
            assert rows.loc[k, "n_positive"] == labels.sum()
            assert rows.loc[k, "n_ranked"] == len(reps)
    assert got.loc[got["score"] == "reference_ratio", "n_ranked"].iloc[0] == n - len(non_reps) - 1

    stored = Tables(spark, cfg).read("rank_calibration").where(f"run_id = '{RUN}'").toPandas()
    merged = stored.merge(got, on=["score", "k_requested"], suffixes=("", "_returned"))
    assert len(merged) == len(got)
    np.testing.assert_allclose(merged["auc"], merged["auc_returned"])
    np.testing.assert_allclose(merged["precision_at_k"], merged["precision_at_k_returned"])
    calibrate(spark, cfg, RUN, ks=(3, 10, 100))  # re-run replaces, never duplicates
    assert Tables(spark, cfg).read("rank_calibration").count() == len(got)


def test_without_the_corpus_route_nothing_and_with_one_class_a_null_auc(spark, cfg):
    write_candidates(spark, cfg, RUN, scored_frame(6, seed=2))
    result = calibrate(spark, cfg, RUN)
    assert result.empty and list(result.columns)[:3] == ["run_id", "score", "k"]
    assert Tables(spark, cfg).read("rank_calibration").count() == 0

    _write_corpus_route(spark, cfg, [(0, 0, "p-filler")], low_entropy={"p-filler"})  # filler only
    got = calibrate(spark, cfg, RUN)
    assert got["auc"].isna().all() and (got["n_positive"] == 0).all() and (got["precision_at_k"] == 0).all()
    assert (got["k"] == 6).all()  # 10, 100, 1000 capped at the 6 ranked samples
    assert Tables(spark, cfg).read("rank_calibration").where("auc IS NULL").count() == len(got)
