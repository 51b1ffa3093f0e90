"""Generate the analyst notebooks from ``extraction_audit.report.queries``.

The SQL in every notebook is copied verbatim from the named queries the HTML report runs,
so a notebook and the report can never disagree about what a number means.  Re-run after
changing a query:  ``python notebooks/_make_notebooks.py``  (tests check the notebooks
are up to date).

Each notebook: a setup cell (Spark session via ``extraction_audit.spark.get_spark`` -- on
Databricks the cluster's session -- and the findings tables as SQL views), a parameter cell
(run ids from environment variables or the latest run), then plain ``spark.sql`` cells.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from extraction_audit.report.queries import QUERIES

HERE = Path(__file__).resolve().parent

SETUP = '''\
# Setup: a Spark session and the findings tables as SQL views named like the tables.
# The project's warehouse is found from wherever this notebook runs (project root, notebooks/,
# any folder below the project); EXTRACTION_AUDIT_WAREHOUSE names it explicitly and
# EXTRACTION_AUDIT_CONFIG names the YAML config (default: the built-in local one).  On
# Databricks (storage.database set) the cluster's session is reused with USE <database>.
# Nothing is ever created: no tables found is an error, not an empty report.
import os

from extraction_audit.notebook import open_findings
from extraction_audit.pii.mask import mask_frame  # personal values in shown text, unless storage.allow_raw_pii
from extraction_audit.report.queries import bind

cfg, spark, missing = open_findings()
print("tables not written yet (empty views):", ", ".join(missing) or "none")'''

PARAMETERS = '''\
# Parameters: the run to look at (default: the latest run) and a run to compare with
# (default: the run's control run, e.g. the base model).
RUN_ID = os.environ.get("EA_RUN_ID") or None   # None: the latest run (said below)
COMPARE_RUN_ID = os.environ.get("EA_COMPARE_RUN_ID") or None
RARE_DOC_COUNT = cfg.match.rare_doc_count      # passages in 1..RARE_DOC_COUNT documents are privacy findings
REDACT = cfg.report.redact_passages            # True: passage and document text are not shown
LIMIT = 20
Z = 1.96                                       # 95% intervals

LATEST_RUNS = """
{latest}
"""
if RUN_ID is None:
    RUN_ID = spark.sql(bind(LATEST_RUNS, {{"limit": 1}})).first()["run_id"]
if COMPARE_RUN_ID is None:
    COMPARE_RUN_ID = spark.sql(bind("SELECT control_run_id FROM runs WHERE run_id = :run_id",
                                    {{"run_id": RUN_ID}})).first()[0]
print("run:", RUN_ID, "| compared with:", COMPARE_RUN_ID)
for row in spark.sql(bind("SELECT run_id, model_name, model, started_at, status, generated_tokens FROM runs "
                          "WHERE array_contains(:run_ids, run_id) ORDER BY started_at, run_id",
                          {{"run_ids": [r for r in (RUN_ID, COMPARE_RUN_ID) if r]}})).collect():
    print(f"  {{row.run_id}}: model {{row.model_name or row.model}}, started {{row.started_at}}, {{row.status}}, "
          f"{{row.generated_tokens}} generated tokens")'''


def _sql_cell(name: str, call: str) -> str:
    return f'{name} = """\n{QUERIES[name].sql}\n"""\n{call}'


def _notebook(title: str, intro: str, cells: list) -> nbformat.NotebookNode:
    nb = new_notebook(cells=[
        new_markdown_cell(f"# {title}\n\n{intro}"),
        new_code_cell(SETUP),
        new_code_cell(PARAMETERS.format(latest=QUERIES["LATEST_RUNS"].sql), metadata={"tags": ["parameters"]}),
        *cells,
    ])
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"          # stable ids: regenerating changes nothing
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def build_notebooks() -> dict[str, nbformat.NotebookNode]:
    md, code = new_markdown_cell, new_code_cell
    return {
        "01_growth_curve.ipynb": _notebook(
            "Growth curve",
            "Distinct passages, distinct source regions, distinct rare passages and the share of generated "
            "tokens extracted at each budget checkpoint (`run_metrics`; the `scope` column marks the whole-run "
            "row, which holds every sample and equals the report's headline). The count keeps growing with "
            "the budget: report the budget with any number, and compare runs on the curve, not at one budget.",
            [
                code(_sql_cell("GROWTH_CURVE", "run_ids = [r for r in (RUN_ID, COMPARE_RUN_ID) if r]\n"
                                               "growth = spark.sql(bind(GROWTH_CURVE, {\"run_ids\": run_ids}))"
                                               ".toPandas()\ngrowth")),
                code("import matplotlib.pyplot as plt\n\n"
                     "fig, axes = plt.subplots(1, 4, figsize=(16, 4.4), layout=\"constrained\")\n"
                     "for run_id, rows in growth.groupby(\"run_id\", sort=False):\n"
                     "    for ax, metric in zip(axes, (\"distinct_passages\", \"distinct_regions\", "
                     "\"distinct_rare_passages\", \"share_extracted\")):\n"
                     "        label = f\"{rows['model_name'].iloc[0] or 'run'} · …{run_id[-6:]}\"  # short; ids above\n"
                     "        ax.plot(rows[\"generated_tokens\"], rows[metric], marker=\"o\", label=label)\n"
                     "        ax.set_xscale(\"log\")\n"
                     "        ax.set_title(metric)\n"
                     "        ax.set_xlabel(\"generated tokens (log)\")\n"
                     "handles, names = axes[0].get_legend_handles_labels()\n"
                     "fig.legend(handles, names, loc=\"outside lower center\")  # below the panels, not on the data\n"
                     "plt.show()"),
                md("Whole-run numbers (every sample; low-entropy filler and prompt copies excluded), the figures "
                   "the report, the model card and the demo's console print:"),
                code(_sql_cell("HEADLINE", "spark.sql(bind(HEADLINE, {\"run_ids\": run_ids, "
                                           "\"rare_doc_count\": RARE_DOC_COUNT})).toPandas().T")),
            ]),
        "02_run_comparison.ipynb": _notebook(
            "Run comparison at equal budgets",
            "Two runs (e.g. two checkpoints, or a fine-tuned model and its base model as control) compared "
            "only at the budget checkpoints both have: no interpolation. A change of leader between two "
            "checkpoints is a crossing point.",
            [
                code(_sql_cell("COMPARE_AT_EQUAL_BUDGETS",
                               "aligned = spark.sql(bind(COMPARE_AT_EQUAL_BUDGETS, {\"run_id\": RUN_ID, "
                               "\"other_run_id\": COMPARE_RUN_ID})).toPandas()\naligned")),
                code("from extraction_audit.report.curves import describe_comparison\n\n"
                     "for sentence in describe_comparison(aligned, RUN_ID, COMPARE_RUN_ID):\n"
                     "    print(\"-\", sentence)"),
            ]),
        "03_new_passages.ipynb": _notebook(
            "Passages new since last night",
            "Passages this run emitted that the previous run of the same model family (e.g. last night's "
            "scheduled audit) did not, and passages emitted for the first time in the model family "
            "(`first_seen_run_id`).",
            [
                code(_sql_cell("PREVIOUS_RUN", "previous = spark.sql(bind(PREVIOUS_RUN, {\"run_id\": RUN_ID}))"
                                               ".toPandas()\nPREVIOUS_RUN_ID = previous[\"run_id\"].iloc[0] "
                                               "if len(previous) else None\nprint(\"previous run:\", "
                                               "PREVIOUS_RUN_ID)")),
                code(_sql_cell("PASSAGES_NOT_IN_RUN",
                               "mask_frame(cfg, spark.sql(bind(PASSAGES_NOT_IN_RUN, {\"run_id\": RUN_ID, "
                               "\"other_run_id\": PREVIOUS_RUN_ID, \"redact\": REDACT, \"limit\": LIMIT, "
                               "\"z\": Z})).toPandas(), [\"text\"])")),
                code(_sql_cell("NEW_PASSAGES", "mask_frame(cfg, spark.sql(bind(NEW_PASSAGES, {\"run_id\": RUN_ID, "
                                               "\"redact\": REDACT, \"limit\": LIMIT, \"z\": Z})).toPandas(), "
                                               "[\"text\"])")),
            ]),
        "04_rare_passages.ipynb": _notebook(
            "Rare passages with example documents",
            "Passages found in one or two training documents are privacy findings; passages repeated in "
            "thousands of documents are usually boilerplate. The document context is shown around the "
            "passage unless `report.redact_passages` is set; personal values detected in either are masked unless "
            "`storage.allow_raw_pii` is set.",
            [
                code(_sql_cell("DOC_COUNT_HISTOGRAM", "spark.sql(bind(DOC_COUNT_HISTOGRAM, {\"run_id\": RUN_ID}))"
                                                      ".toPandas()")),
                code(_sql_cell("SOURCE_DOCUMENTS", "spark.sql(bind(SOURCE_DOCUMENTS, {\"run_id\": RUN_ID, "
                                                   "\"limit\": LIMIT})).toPandas()")),
                code(_sql_cell("STITCHED_PASSAGES",
                               "mask_frame(cfg, spark.sql(bind(STITCHED_PASSAGES, {\"run_id\": RUN_ID, "
                               "\"redact\": REDACT, \"limit\": LIMIT, \"z\": Z})).toPandas(), [\"text\"])")),
                code(_sql_cell("RARE_PASSAGES_WITH_DOCUMENTS",
                               "mask_frame(cfg, spark.sql(bind(RARE_PASSAGES_WITH_DOCUMENTS, {\"run_id\": RUN_ID, "
                               "\"rare_doc_count\": RARE_DOC_COUNT, \"redact\": REDACT, \"limit\": LIMIT}))"
                               ".toPandas(), [\"passage_text\", \"document_context\"])")),
            ]),
        "05_pii_by_type.ipynb": _notebook(
            "Personal data by entity type (redacted)",
            "Tagged personal data by type: how many distinct values, how many also occur in the corpus, and "
            "how many in only one or two corpus documents. Only redacted values are shown.",
            [
                code(_sql_cell("PII_BY_TYPE", "spark.sql(bind(PII_BY_TYPE, {\"run_id\": RUN_ID, "
                                              "\"rare_doc_count\": RARE_DOC_COUNT})).toPandas()")),
            ]),
        "06_known_prefix_probes.ipynb": _notebook(
            "Known-prefix probes: discoverable memorisation and the recovery share",
            "The `probe` step prompts the model with the true opening tokens of a stratified random sample of "
            "corpus positions (by source and by how many documents hold the continuation) and records how often "
            "it continues them verbatim (greedy, and with the deployed sampling settings). The duplication curve "
            "is the rate against copies in the corpus; the recovery share is the part of what the model "
            "reproduces from its opening words that the sampling route found at each budget.",
            [
                code(_sql_cell("PROBE_RATES", "spark.sql(bind(PROBE_RATES, {\"run_id\": RUN_ID, "
                                              "\"approx_similarity\": cfg.probe.approx_similarity})).toPandas()")),
                md("Weighted rates with bootstrap intervals (each probe stands for its stratum's size), for the run "
                   "and the run it is compared with:"),
                code(_sql_cell("PROBE_OUTCOMES", "from extraction_audit.probe.kernels import class_labels\n"
                                                 "from extraction_audit.probe.summary import duplication_curve, "
                                                 "recovery_share\n\n"
                                                 "run_ids = [r for r in (RUN_ID, COMPARE_RUN_ID) if r]\n"
                                                 "outcomes = spark.sql(bind(PROBE_OUTCOMES, {\"run_ids\": run_ids}))"
                                                 ".toPandas()\n"
                                                 "if outcomes.empty:\n"
                                                 "    print(\"no probes for\", run_ids, \"(add probe to steps)\")\n"
                                                 "else:\n"
                                                 "    display(duplication_curve(outcomes, class_labels("
                                                 "cfg.probe.class_edges), cfg.probe.approx_similarity))")),
                code(_sql_cell("PROBE_CHECKPOINTS", "checkpoints = spark.sql(bind(PROBE_CHECKPOINTS, "
                                                    "{\"run_ids\": run_ids})).toPandas()\n"
                                                    "points = {r: sorted(checkpoints[checkpoints[\"run_id\"] == r]"
                                                    "[\"budget_tokens\"]) for r in run_ids}\n"
                                                    "recovery_share(outcomes, points) if not outcomes.empty else None")),
            ]),
    }


def write_notebooks(folder: Path = HERE) -> list[Path]:
    paths = []
    for name, nb in build_notebooks().items():
        path = folder / name
        nbformat.write(nb, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_notebooks(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(written)
