"""The analyst notebooks: generated from the report's queries, and they run top to bottom.

All five notebooks execute in ONE Jupyter kernel (one extra Spark session instead of five):
their cells are concatenated, with ``%reset -f`` between notebooks so none can lean on
another's variables.  The kernel reads the small tables of ``test_report_build`` (written
once per pytest session by the test process's Spark session).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest
import yaml
from conftest import CLI_TEST_SPARK_CONF
from test_report_build import RUN_A, RUN_B, shared_small_runs

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _generator():
    spec = importlib.util.spec_from_file_location("make_notebooks", NOTEBOOKS / "_make_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_notebooks_are_up_to_date_with_the_report_queries():
    from extraction_audit.report.queries import QUERIES

    generated = _generator().build_notebooks()
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(generated)
    for name, nb in generated.items():
        on_disk = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(on_disk)
        assert [c.source for c in on_disk.cells] == [c.source for c in nb.cells], (
            f"{name} is stale: run python notebooks/_make_notebooks.py")
        code = "\n".join(c.source for c in on_disk.cells if c.cell_type == "code")
        assert "spark.sql(" in code and "open_findings()" in code  # extraction_audit.notebook: get_spark + views
        for query in QUERIES.values():
            if f'{query.name} = """' in code:
                assert f'{query.name} = """\n{query.sql}\n"""' in code


def test_notebooks_execute_against_small_tables(spark, tmp_path, tmp_path_factory, monkeypatch):
    from nbclient import NotebookClient

    cfg, _, _ = shared_small_runs(spark, tmp_path_factory)
    settings = cfg.model_dump(mode="json")
    # The kernel's JVM lives a minute: the short-lived JVM settings of the tests' CLI processes.
    settings["spark"].update(master="local[2]", shuffle_partitions=2, driver_memory="1g", conf=CLI_TEST_SPARK_CONF)
    config_path = tmp_path / "notebooks.yaml"
    config_path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    monkeypatch.setenv("EXTRACTION_AUDIT_CONFIG", str(config_path))
    monkeypatch.setenv("EXTRACTION_AUDIT_WAREHOUSE", cfg.storage.warehouse)
    monkeypatch.setenv("EA_RUN_ID", RUN_A)
    monkeypatch.delenv("EA_COMPARE_RUN_ID", raising=False)   # default: the run's control run

    combined = nbformat.v4.new_notebook()
    starts = {}
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        if combined.cells:
            combined.cells.append(nbformat.v4.new_code_cell("%reset -f"))
        starts[path.name] = len(combined.cells)
        combined.cells += nbformat.read(path, as_version=4).cells
    for i, cell in enumerate(combined.cells):
        cell["id"] = f"c{i}"
    NotebookClient(combined, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()

    def text_of(first: int, last: int | None = None) -> str:
        out = []
        for cell in combined.cells[first:last]:
            for o in cell.get("outputs", []):
                out.append(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")))
        return "\n".join(out)

    names = sorted(starts)
    spans = {n: (starts[n], starts[names[i + 1]] - 1 if i + 1 < len(names) else None) for i, n in enumerate(names)}
    assert f"run: {RUN_A} | compared with: {RUN_B}" in text_of(*spans["01_growth_curve.ipynb"])
    assert "lead changes from run-b to run-a between 1,000 and 2,000 tokens" in text_of(
        *spans["02_run_comparison.ipynb"])
    assert f"previous run: {RUN_B}" in text_of(*spans["03_new_passages.ipynb"])
    rare = text_of(*spans["04_rare_passages.ipynb"])
    assert "Dear Sir" in rare and "doc-0-0" in rare                       # document context around the passage
    pii = text_of(*spans["05_pii_by_type.ipynb"])
    assert "j***@example.com" in pii and "k-email" not in pii
    assert not any(o.get("output_type") == "error" for c in combined.cells for o in c.get("outputs", []))


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])


def test_notebooks_find_the_project_warehouse_from_any_folder_and_never_create_one(tmp_path):
    from extraction_audit.errors import UserFacingError
    from extraction_audit.notebook import find_warehouse

    project = tmp_path / "project"
    (project / "ea-data" / "warehouse" / "runs" / "_delta_log").mkdir(parents=True)
    (project / "notebooks").mkdir()
    expected = str((project / "ea-data" / "warehouse").resolve())
    assert find_warehouse("./ea-data/warehouse", project) == expected
    assert find_warehouse("./ea-data/warehouse", project / "notebooks") == expected
    assert find_warehouse(expected, tmp_path) == expected
    assert find_warehouse("dbfs:/audits/warehouse") == "dbfs:/audits/warehouse"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(UserFacingError, match="EXTRACTION_AUDIT_WAREHOUSE"):
        find_warehouse("./ea-data/warehouse", elsewhere)
    assert not (elsewhere / "ea-data").exists()
