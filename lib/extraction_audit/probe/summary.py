"""Probe figures for the report, notebooks and console: discoverable memorisation rates
(exact, and approximate at ``edit_similarity >= probe.approx_similarity``) by source and by
document-count class (the duplication curve), and the recovery share of the sampling route
at each budget checkpoint, each with a percentile bootstrap interval (``report.bootstrap``).

Weighting: the draw takes up to ``per_stratum`` probes from each (source, class) stratum,
so strata are equal-sized in the sample but not in the corpus.  Rates weight each probe by
``stratum_size / probes drawn from its stratum`` (one probe stands for that many distinct
continuations), which makes a class's rate over several sources, and the overall rate,
corpus-representative.  The recovery share is a plain count: of the probes the model
reproduced exactly given their opening words (greedy), the share whose suffix the sampling
route had emitted by the checkpoint (``found_at_tokens <= checkpoint``).

Bootstrap: probes are resampled with replacement within each group (the unit is the probe;
the draw is a random sample of continuations), ``report.bootstrap_samples`` replicates from
``report.bootstrap_seed``.  Pure pandas / numpy over the run's probe rows (bounded by
``probe.max_probes``).  Reads and writes no tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..report.bootstrap import percentile_interval

METHOD = "percentile bootstrap over probes"
COLUMNS = ("run_id", "mode", "source", "doc_count_class", "exact", "edit_similarity", "found_at_tokens",
           "stratum_size")


def with_weights(frame: pd.DataFrame) -> pd.DataFrame:
    """Adds ``weight`` = stratum_size / probes drawn from the stratum (per run and mode)."""
    out = frame.copy()
    drawn = out.groupby(["run_id", "mode", "source", "doc_count_class"])["exact"].transform("size")
    size = out["stratum_size"].fillna(drawn).astype(float)
    out["weight"] = size / drawn.astype(float)
    return out


def _weighted_rate(x: np.ndarray, w: np.ndarray) -> float:
    total = w.sum()
    return float((x * w).sum() / total) if total > 0 else float("nan")


def rates(frame: pd.DataFrame, by: list[str], approx_similarity: float, n_boot: int = 200, seed: int = 0,
          confidence: float = 0.95) -> pd.DataFrame:
    """One row per (run_id, mode, *by) group: probes, exact and approximate rates with
    their intervals."""
    if frame.empty:
        return pd.DataFrame(columns=["run_id", "mode", *by, "probes", "exact_rate", "exact_low", "exact_high",
                                     "approx_rate", "approx_low", "approx_high"])
    data = with_weights(frame)
    data["approx"] = data["edit_similarity"].astype(float) >= approx_similarity
    rng = np.random.default_rng(seed)
    rows = []
    for key, group in data.groupby(["run_id", "mode", *by], sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        w = group["weight"].to_numpy(float)
        row = dict(zip(["run_id", "mode", *by], key))
        row["probes"] = int(len(group))
        picks = rng.integers(0, len(group), size=(n_boot, len(group)))
        for name, col in (("exact", "exact"), ("approx", "approx")):
            x = group[col].to_numpy(bool).astype(float)
            value = _weighted_rate(x, w)
            reps = (x[picks] * w[picks]).sum(axis=1) / w[picks].sum(axis=1)
            est = percentile_interval(value, reps, confidence, METHOD)
            row.update({f"{name}_rate": est.value, f"{name}_low": est.low, f"{name}_high": est.high})
        rows.append(row)
    return pd.DataFrame(rows)


def duplication_curve(frame: pd.DataFrame, class_order: list[str], approx_similarity: float, **kw) -> pd.DataFrame:
    """Rates by document-count class (copies of the continuation in the corpus), classes in order."""
    curve = rates(frame, ["doc_count_class"], approx_similarity, **kw)
    order = {c: i for i, c in enumerate(class_order)}
    curve["class_order"] = curve["doc_count_class"].map(order)
    return curve.sort_values(["run_id", "mode", "class_order"]).drop(columns="class_order").reset_index(drop=True)


def recovery_share(frame: pd.DataFrame, checkpoints: dict[str, list[int]], n_boot: int = 200, seed: int = 0,
                   confidence: float = 0.95) -> pd.DataFrame:
    """Per run and budget checkpoint: of the probes reproduced exactly under greedy decoding,
    how many (and which share) the sampling route had found by then."""
    cols = ["run_id", "budget_tokens", "reproduced", "found", "share", "share_low", "share_high"]
    rows = []
    rng = np.random.default_rng(seed)
    greedy = frame[(frame["mode"] == "greedy") & frame["exact"].astype(bool)]
    for run_id in sorted(checkpoints):
        rep = greedy[greedy["run_id"] == run_id]
        at = rep["found_at_tokens"].to_numpy(dtype=float)  # NaN: never found
        picks = rng.integers(0, len(rep), size=(n_boot, len(rep))) if len(rep) else None
        for budget in sorted(checkpoints[run_id]):
            hit = np.nan_to_num(at, nan=np.inf) <= budget
            if len(rep) == 0:
                rows.append({"run_id": run_id, "budget_tokens": int(budget), "reproduced": 0, "found": 0,
                             "share": None, "share_low": None, "share_high": None})
                continue
            est = percentile_interval(float(hit.mean()), hit[picks].mean(axis=1), confidence, METHOD)
            rows.append({"run_id": run_id, "budget_tokens": int(budget), "reproduced": int(len(rep)),
                         "found": int(hit.sum()), "share": est.value, "share_low": est.low, "share_high": est.high})
    return pd.DataFrame(rows, columns=cols)
