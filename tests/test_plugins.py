"""Systems, scorers, providers and dataset adapters from the user's own installed package:
found through entry points, names registered twice refused with both origins named."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import arag.registry
from arag.registry import DuplicateName, PluginError, Registry
from arag.retrieval import build_chunks
from runners.job import load_tasks
from tests.conftest import ROOT, client_for, compose_cfg, run_cli, write_mini_dataset

GROUP = "arag_eval.tests"


def greet() -> str:
    return "hello"


def other_greet() -> str:
    return "hi"


@pytest.fixture
def registry(monkeypatch):
    """A registry over an empty package whose entry points the test decides."""
    points: list[EntryPoint] = []
    real = arag.registry.entry_points

    def fake(group: str):
        return [ep for ep in points if ep.group == group] if group == GROUP else real(group=group)

    monkeypatch.setattr(arag.registry, "entry_points", fake)
    return Registry("greeter", "greeter.name", "tests.plugins", group=GROUP), points


def test_an_entry_point_naming_an_object_registers_it_under_its_name(registry):
    reg, points = registry
    points.append(EntryPoint("greet", "tests.test_plugins:greet", GROUP))
    assert reg.get("greet") is greet
    assert "tests.test_plugins.greet" in reg.origin("greet")
    assert "entry point 'greet'" in reg.origin("greet")


def test_a_name_registered_twice_is_refused_naming_both_origins(registry):
    reg, points = registry
    reg.register("greet")(other_greet)
    points.append(EntryPoint("greet", "tests.test_plugins:greet", GROUP))
    with pytest.raises(DuplicateName) as err:
        reg.names()
    message = str(err.value)
    assert "greeter 'greet' is registered twice" in message
    assert "tests.test_plugins.other_greet" in message
    assert "tests.test_plugins.greet (entry point 'greet' in group 'arag_eval.tests'" in message


def test_the_same_origin_registered_again_is_not_a_duplicate(registry):
    reg, _ = registry
    reg.register("greet")(greet)
    reg.register("greet")(greet)  # a module imported again registers the same thing
    assert reg.get("greet") is greet


def test_a_broken_entry_point_names_itself_and_the_fix(registry):
    reg, points = registry
    points.append(EntryPoint("broken", "no_such_package_xyz.module", GROUP))
    with pytest.raises(PluginError, match=r"entry point broken = 'no_such_package_xyz.module' "
                                          r"\(group 'arag_eval.tests'.*uninstall it"):
        reg.get("anything")


def test_every_registry_reads_its_own_entry_point_group():
    from arag.datasets.base import ADAPTERS
    from arag.llm.registry import PROVIDERS
    from arag.systems import SYSTEMS
    from metrics import SCORERS

    assert {r.group for r in (SYSTEMS, SCORERS, PROVIDERS, ADAPTERS)} == {
        "arag_eval.systems", "arag_eval.scorers", "arag_eval.providers", "arag_eval.datasets"}


def install_plugins(tmp: Path) -> Path:
    """pip-install tests/plugins into ``tmp/site`` (never the shared environment), from a copy
    so the build leaves nothing in the repository; returns the directory for PYTHONPATH."""
    source = tmp / "plugin-src"
    shutil.copytree(ROOT / "tests" / "plugins", source,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    site = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "--target", str(site), str(source)],
                   check=True, capture_output=True, text=True, timeout=300)
    return site


def git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
def test_an_installed_package_adds_a_system_and_a_scorer_to_a_sweep(tmp_path):
    """A system (module entry point, its YAML shipped in the package) and a scorer (object
    entry point) from a package installed outside the shared environment, swept beside a
    built-in system: nothing of this repository is edited or hand-imported."""
    site = install_plugins(tmp_path)
    assert (site / "arag_test_plugins" / "conf" / "system" / "keyword_rag.yaml").is_file()
    mini = write_mini_dataset(tmp_path / "mini")
    before = git_status()
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = run_cli(tmp_path, "system=naive,keyword_rag", f"dataset.root={mini}",
                     "metrics.scorers=[retrieval,context,context_words]", "retrieval.top_k=2",
                     env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert git_status() == before  # the sweep needed no edit of the repository

    client = client_for(tmp_path)
    runs = {r.data.tags.get("system"): r for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()])
        if r.data.tags.get("role") != "sweep_parent"}
    assert set(runs) == {"naive", "keyword_rag"}
    plugin = runs["keyword_rag"]
    assert plugin.data.tags["system_kind"] == "KeywordRAG"
    assert plugin.data.tags["system_retrieves"] == "true"
    cfg = compose_cfg([f"dataset.root={mini}"])
    chunks = {c.chunk_id: c for c in build_chunks(load_tasks(cfg).corpus,
                                                  cfg.retrieval.chunk_size,
                                                  cfg.retrieval.chunk_overlap)}
    for run in runs.values():  # the plugin scorer scored both systems, on their own chunks
        preds = {p["id"]: p for p in _artifact(client, run, "predictions.jsonl", tmp_path)}
        for record in _artifact(client, run, "predictions.eval.jsonl", tmp_path):
            used = preds[record["id"]]["context_chunk_ids"]
            assert used
            assert record["context_words"] == len(
                "\n\n".join(chunks[c].text for c in used).split())
        assert "retrieval_recall_mean" in run.data.metrics
    # without the package on the path, the same system is unknown
    plain = run_cli(tmp_path, "system=keyword_rag", f"dataset.root={mini}", sweep=False)
    assert plain.returncode != 0
    assert "keyword_rag" in plain.stderr


def _artifact(client, run, name: str, tmp: Path) -> list[dict]:
    path = client.download_artifacts(run.info.run_id, name, str(tmp / run.info.run_id))
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line]


@pytest.mark.slow
def test_an_installed_package_adds_an_analysis_that_every_writer_shows(tmp_path):
    """A report analysis from a package installed outside the shared environment (module
    entry point in group ``arag_eval.analyses``), with no edit to report/: its claims reach
    the console, report.md and report.html, the MLflow description, compare.html and
    findings.jsonl, and its rows are logged on the parent run."""
    site = install_plugins(tmp_path)
    mini = write_mini_dataset(tmp_path / "mini")
    before = git_status()
    result = run_cli(tmp_path, "system=naive,stuffing", f"dataset.root={mini}",
                     env={**os.environ, "PYTHONPATH": str(site)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert git_status() == before
    assert "Shortest answer naive on word_count" in result.stdout  # the console
    client = client_for(tmp_path)
    [parent] = [r for r in client.search_runs([e.experiment_id for e in
                                               client.search_experiments()])
                if r.data.tags.get("role") == "sweep_parent"]
    rows = {r["run"]: r for r in _artifact(client, parent, "shortest_answer.jsonl", tmp_path)}
    assert set(rows) == {"naive", "stuffing"} and rows["naive"]["shortest_words"] > 0
    said = "Shortest answer naive on `word_count`"
    for name in ("report.md", "report.html", "compare.html"):
        path = client.download_artifacts(parent.info.run_id, name, str(tmp_path / "a"))
        assert said.replace("`", "") in re.sub(r"<[^>]+>|`", "", Path(path).read_text()), name
    assert said in parent.data.tags["mlflow.note.content"]
    found = [f for f in _artifact(client, parent, "findings.jsonl", tmp_path)
             if f["kind"] == "shortest_answer"]
    assert {f["runs"][0] for f in found} == {"naive", "stuffing"}
    assert found[0]["figures"]["shortest_words"] == rows[found[0]["runs"][0]]["shortest_words"]
