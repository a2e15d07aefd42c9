"""runner.repeats end to end: CLI -> real Hydra -> real anthropic SDK -> fake Messages API ->
MLflow. Three repeats send three times the requests of one (the fourth repeat alone, asked
later, is what one repeat sends: the fast test_repeats.py compares with runner.repeats=1
directly), the same command again sends none, four repeats then send only the fourth; every
child logs its variance split, its
traces are one per answer tagged with their task, and the report states K and the
"more tasks or more repeats" sentence.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forked
from tests.anthropic_fake import FakeAnthropic, agent_policy
from tests.conftest import ROOT, all_runs, client_for, store_overrides

pytestmark = pytest.mark.slow


def sweep(store: Path, url: str, repeats: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    cmd = [sys.executable, "run.py", "-m", "system=naive,stuffing", "dataset=sample",
           "dataset.limit=2", "model=claude-haiku-4-5", f"model.base_url={url}",
           "metrics.scorers=[rouge,length]", f"runner.repeats={repeats}",
           f"hydra.sweep.dir={store}/multirun/{repeats}", *store_overrides(store)]
    return forked.run(cmd, cwd=ROOT, env=env, timeout=600)


def _sent(fake: FakeAnthropic, store: Path, repeats: int) -> int:
    before = len(fake.requests)
    done = sweep(store, fake.url, repeats)
    assert done.returncode == 0, done.stderr[-3000:]
    return len(fake.requests) - before


def test_repeats_are_really_asked_once_each_and_reported(tmp_path):
    with FakeAnthropic(agent_policy()) as fake:
        store = tmp_path / "k"
        three = _sent(fake, store, 3)
        again = _sent(fake, store, 3)
        fourth = _sent(fake, store, 4)
    assert fourth > 0 and three == 3 * fourth
    assert again == 0
    children = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")
                and r.data.params.get("runner.repeats") == "4"]
    assert sorted(r.data.tags["system"] for r in children) == ["naive", "stuffing"]
    for child in children:
        m = child.data.metrics
        assert (m["n_repeats"], m["n_task_ids"], m["n_tasks"]) == (4, 2, 8)
        # the fake answers every repeat alike: a measured spread of 0, not an unknown
        assert m["rouge1_f1_var_within_task"] == 0.0 and "rouge1_f1_var_between_tasks" in m
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{store}/mlflow.db")
    traces = mlflow.search_traces(locations=[children[0].info.experiment_id],
                                  run_id=children[0].info.run_id, return_type="list",
                                  include_spans=False)
    answers = sorted((t.info.tags["task_id"], t.info.trace_metadata["repeat"]) for t in traces)
    assert len(answers) == 8 and {r for _, r in answers} == {"0", "1", "2", "3"}
    parent = client_for(store).get_run(children[0].data.tags["mlflow.parentRunId"])
    report = Path(client_for(store).download_artifacts(parent.info.run_id, "report.md",
                                                       str(tmp_path))).read_text()
    assert "**K=4 times**" in report
    # the projection, or why there is none (too few tasks or no spread to split)
    assert "5 more repeats would narrow it to" in report or "so no projection" in report
    # Haiku's requests carry no temperature (its default of 1 applies): repeats can vary
    assert "cannot vary" not in report and "| naive | 2 | 4 |" in report
    assert "stability/naive vs stuffing" in parent.data.metrics
    for child in children:  # each child logs its share against the other
        other = "stuffing" if child.data.tags["system"] == "naive" else "naive"
        logged = client_for(store).get_run(child.info.run_id).data.metrics
        assert logged[f"stability/{other}"] == parent.data.metrics["stability/naive vs stuffing"]
