"""The Databricks bundle, YARN script, job entry points and cluster configs agree with the CLI."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from extraction_audit.cli import build_parser
from extraction_audit.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def substitute(value: str, variables: dict[str, str]) -> str:
    value = re.sub(r"\$\{var\.([a-z_]+)\}", lambda m: variables[m.group(1)], value)
    return re.sub(r"\{\{[^}]+\}\}", "audit-123", value)


def bundle_tasks():
    bundle = yaml.safe_load((ROOT / "databricks.yml").read_text())
    variables = {k: str(v["default"]) for k, v in bundle["variables"].items()}
    resources = {}
    for pattern in bundle["include"]:
        for path in ROOT.glob(pattern):
            resources.update(yaml.safe_load(path.read_text())["resources"]["jobs"])
    return bundle, variables, resources


def test_bundle_tasks_parse_with_the_cli_and_reference_existing_files():
    bundle, variables, jobs = bundle_tasks()
    assert set(bundle["targets"]) == {"dev", "prod"}
    assert bundle["targets"]["dev"]["presets"]["trigger_pause_status"] == "PAUSED"
    (job,) = jobs.values()
    assert job["schedule"]["quartz_cron_expression"]
    clusters = {c["job_cluster_key"]: c for c in job["job_clusters"]}
    assert "spark.task.resource.gpu.amount" in clusters["gpu"]["new_cluster"]["spark_conf"]
    keys = {t["task_key"] for t in job["tasks"]}
    assert {"index", "generate", "match", "pii", "rank", "report"} <= keys
    parser = build_parser()
    for task in job["tasks"]:
        for dep in task.get("depends_on", []):
            assert dep["task_key"] in keys
        assert task["job_cluster_key"] in clusters
        if "python_wheel_task" in task:
            wheel = task["python_wheel_task"]
            assert wheel["entry_point"] == "extraction-audit"
            args = [substitute(a, variables) for a in wheel["parameters"]]
        else:
            spt = task["spark_python_task"]
            script = (ROOT / "resources" / spt["python_file"]).resolve()
            assert script.is_file(), script
            step = script.name.removesuffix("_job.py")
            args = [step] + [substitute(a, variables) for a in spt["parameters"]]
        parsed = parser.parse_args(args)
        assert parsed.command == task["task_key"] or parsed.command == args[0]
        config = ROOT / parsed.config
        assert config.is_file(), config
        load_config(config)
    generate = next(t for t in job["tasks"] if t["task_key"] == "generate")
    assert generate["job_cluster_key"] == "gpu"


def test_bundle_has_a_task_for_every_step_and_orders_them_like_the_runner():
    """A step without a task (or a task ordered before what it needs) leaves the run
    incomplete: the report task would refuse to start."""
    from extraction_audit.stages import SAMPLE_SOURCES, STEP_ORDER, get_stage

    _, _, jobs = bundle_tasks()
    (job,) = jobs.values()
    deps = {t["task_key"]: {d["task_key"] for d in t.get("depends_on", [])} for t in job["tasks"]}

    def upstream(task: str) -> set[str]:
        seen, todo = set(), list(deps[task])
        while todo:
            t = todo.pop()
            if t not in seen:
                seen.add(t)
                todo.extend(deps[t])
        return seen

    cli_steps = {s for s in STEP_ORDER if s != "import_samples" and not get_stage(s).derived}
    assert cli_steps == set(deps), "one bundle task per user-facing step"
    for task in deps:
        # the bundle generates its samples (import_samples is the other way to get them)
        needed = {"generate" if d in SAMPLE_SOURCES else d for d in get_stage(task).depends_on} & set(deps)
        assert needed <= upstream(task), f"task {task} does not wait for {sorted(needed - upstream(task))}"
    for derived in (s for s in STEP_ORDER if get_stage(s).derived):
        # a derived step runs inside the task of its last dependency; report must follow them all
        assert set(get_stage(derived).depends_on) & set(deps) <= upstream("report") | {"report"}


def test_cluster_configs_validate():
    for name in ("local.yaml", "cluster-databricks.yaml", "cluster-yarn.yaml"):
        cfg = load_config(ROOT / "conf" / name)
        assert cfg.index.n == 50


def test_relative_storage_paths_resolve_against_the_working_folder(tmp_path, monkeypatch):
    """``warehouse: data`` is a folder, not a hub id: every storage location resolves to an
    absolute path (Delta refuses a relative table path) and URIs pass through."""
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"storage": {"warehouse": "wh", "staging_dir": "scratch", "cache_dir": "c"},
                                      "spark": {"log_file": "logs/spark.log"}, "report": {"output_dir": "rep"}}))
    monkeypatch.chdir(tmp_path)
    cfg = load_config(config)
    for value, folder in ((cfg.storage.warehouse, "wh"), (cfg.storage.staging_dir, "scratch"),
                          (cfg.storage.cache_dir, "c"), (cfg.spark.log_file, "logs/spark.log"),
                          (cfg.report.output_dir, "rep")):
        assert cfg.resolve(value) == str(tmp_path.resolve() / folder)
    uri = load_config(config, {"storage.warehouse": "abfss://c@a.dfs.core.windows.net/wh"})
    assert uri.resolve(uri.storage.warehouse) == "abfss://c@a.dfs.core.windows.net/wh"


def test_job_entry_points_call_real_subcommands():
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)  # noqa: SLF001
    scripts = sorted((ROOT / "jobs").glob("*_job.py"))
    assert scripts
    for script in scripts:
        step = re.search(r'main\(\["([a-z-]+)"', script.read_text()).group(1)
        assert step in commands, script


def test_yarn_submit_script_runs_an_existing_job_with_valid_arguments():
    text = (ROOT / "jobs" / "submit_yarn.sh").read_text()
    assert "spark.executor.resource.gpu.amount" in text and "spark.task.resource.gpu.amount" in text
    command = " ".join(line.rstrip("\\").strip() for line in text.splitlines() if not line.startswith("#"))
    tokens = shlex.split(command[command.index("spark-submit"):].replace('"${RUN_ID}"', "audit-1"))
    script_index = next(i for i, t in enumerate(tokens) if t.endswith("_job.py"))
    script = ROOT / tokens[script_index]
    assert script.is_file()
    step = re.search(r'main\(\["([a-z-]+)"', script.read_text()).group(1)
    args = tokens[script_index + 1:]
    args = [a.replace("cluster-yarn.yaml", str(ROOT / "conf" / "cluster-yarn.yaml")) for a in args]
    parsed = build_parser().parse_args([step, *args])
    assert parsed.run_id == "audit-1"
    load_config(parsed.config)


@pytest.mark.parametrize("bad, message", [
    ("index:\n  n: fifty\n", "index.n"),
    ("generation:\n  sampling:\n    top_kk: 40\n", "generation.sampling.top_kk: unknown key"),
    ("corpus: [1, 2]\n", "corpus"),
    ("storage: {warehouse: x\n", "malformed YAML"),
])
def test_bad_configs_give_one_clear_error(tmp_path, bad, message):
    from extraction_audit.config import ConfigError

    path = tmp_path / "bad.yaml"
    path.write_text(bad)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path)


def test_set_errors_name_the_override_not_the_config_file(capsys):
    from extraction_audit.cli import main

    assert main(["sql", "--set", "generation.budget_tokenz=5", "SELECT 1"]) == 2
    err = capsys.readouterr().err
    assert "invalid --set override generation.budget_tokenz" in err and "(from --set generation.budget_tokenz=5)" in err
    assert main(["sql", "--set", "generation.budget_tokens=lots", "SELECT 1"]) == 2
    assert "--set generation.budget_tokens='lots'" in capsys.readouterr().err
