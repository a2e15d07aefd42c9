"""Hydra launchers running real sweeps: submitit's local executor (jobs as separate
processes, as on a Slurm node), a sequential sweep's rounds as joblib's parallel jobs and, when
the optional extra is installed, on a local Ray instance the launcher starts. Each sweep: one
parent, two FINISHED children."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from tests.conftest import all_runs, run_cli

pytestmark = pytest.mark.slow


def one_parent_two_finished_children(tmp: Path) -> None:
    runs = all_runs(tmp)
    parents = [r for r in runs if r.data.tags.get("role") == "sweep_parent"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert sorted(c.data.tags["system"] for c in children) == ["naive", "stuffing"]
    assert all(c.info.status == "FINISHED" and c.data.metrics["n_tasks"] == 2 for c in children)
    assert len(runs) == 3


def test_submitit_local_sweep(tmp_path, shared_cache):
    done = run_cli(tmp_path, "hydra/launcher=submitit_local", "system=naive,stuffing",
                   "dataset=sample", "dataset.limit=2", cache=shared_cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Submitit 'local' sweep output dir" in done.stderr
    one_parent_two_finished_children(tmp_path)
    # each job ran in its own submitit process, which left its logs in the sweep folder
    assert len(list(tmp_path.glob("multirun/*/.submitit/*/*_log.out"))) == 2


@pytest.mark.skipif(importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None,
                    reason="the Ray launcher is an optional extra: pip install -e '.[ray]'")
def test_a_sequential_ray_sweep_runs_its_rounds_as_ray_tasks(tmp_path, shared_cache):
    """runner.sequential=true in rounds of one task: each round launches both jobs on the
    Ray instance the first round started, and a job continues its run with the next task."""
    done = run_cli(tmp_path, "hydra/launcher=ray", "system=naive,stuffing", "dataset=sample",
                   "dataset.limit=2", "runner.sequential=true", "runner.batch_size=1",
                   "metrics.scorers=[rouge]", "report.decide_on=[rouge1_f1]", cache=shared_cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("Ray Launcher is launching 2 jobs") == 2
    assert "Ray is already running" in done.stderr  # the second round reuses the instance
    one_parent_two_finished_children(tmp_path)
    looks = [json.loads(line) for line in
             next(tmp_path.glob("multirun/*/sequential.jsonl")).read_text().splitlines()]
    assert [(look["tasks"], look["stop"]) for look in looks] == [(1, None), (2, "tasks_out")]


def test_a_sequential_joblib_sweep_runs_its_rounds_as_parallel_jobs(tmp_path, shared_cache):
    """runner.sequential=true in rounds of one task under joblib: each round launches both
    jobs at once, and a job continues its run with the next task."""
    done = run_cli(tmp_path, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                   "system=naive,stuffing", "dataset=sample", "dataset.limit=2",
                   "runner.sequential=true", "runner.batch_size=1", "metrics.scorers=[rouge]",
                   "report.decide_on=[rouge1_f1]", cache=shared_cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(re.findall(r"Joblib\.Parallel\(.*\) is launching 2 jobs", done.stderr)) == 2
    one_parent_two_finished_children(tmp_path)
    looks = [json.loads(line) for line in
             next(tmp_path.glob("multirun/*/sequential.jsonl")).read_text().splitlines()]
    assert [(look["tasks"], look["stop"]) for look in looks] == [(1, None), (2, "tasks_out")]
