"""docs/your-documents.md's walk-through, step by step, as a user types it: its shell
blocks run as written (``~`` is a temporary home), each ``python run.py`` pointed at
temporary stores and at Claude through a local fake Messages API, so every answer is a
request that can be counted.

Adding tasks.jsonl answers the new tasks; editing one document answers again only the
task that reads it; running again with no change sends no request.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.anthropic_fake import FakeAnthropic, agent_policy
from tests.conftest import ROOT, all_runs, client_for, store_overrides

pytestmark = pytest.mark.slow
DOC = ROOT / "docs" / "your-documents.md"
SYSTEMS = ("arag", "naive", "stuffing")


def walkthrough_blocks() -> list[str]:
    """The shell blocks of the walk-through, in order."""
    section = DOC.read_text().split("## A three-minute walk-through", 1)[1].split("\n## ")[0]
    return [re.sub(r"^   ", "", b, flags=re.M) for b in re.findall(r"```\n(.*?)```", section,
                                                                   re.S)]


def asked(requests: list[dict], question: str) -> int:
    """Requests whose conversation is about ``question`` (a system answering that task)."""
    return sum(1 for r in requests if r.get("json") and question in str(r["json"]["messages"]))


def test_the_walkthrough_works_as_written(tmp_path):
    blocks = walkthrough_blocks()
    assert len(blocks) == 6, "the test follows the walk-through's six steps"
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_API_KEY": "sk-ant-walkthrough"}
    with FakeAnthropic(agent_policy()) as fake:
        # the scorers whose models take longest to load are left out: what is checked
        # here is which tasks are asked, not their scores
        ours = " ".join([*store_overrides(tmp_path), "model=claude-haiku-4-5",
                         f"model.base_url={fake.url}", "metrics.scorers=[rouge,retrieval]"])
        steps = []
        for n, block in enumerate(blocks):
            script = block.replace("python run.py -m", f"{sys.executable} run.py -m {ours} "
                                   f"hydra.sweep.dir={tmp_path}/multirun/{n}")
            before = len(fake.requests)
            done = subprocess.run(["bash", "-euc", script], cwd=ROOT, env=env, timeout=900,
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL)
            assert done.returncode == 0, (n + 1, done.stderr[-3000:])
            steps.append((done, fake.requests[before:]))
    (_, made), (_, dry), (_, first), (added, with_tasks), (edited, after_edit), \
        (again, unchanged) = steps
    assert made == dry == [], "making the folder and the dry run call no model"
    assert first, "the first sweep answers the documents' own tasks"
    # adding tasks.jsonl: the same command answers the new tasks, with every system
    for question in ("Summarize the quarter.", "What happened to cash flow and debt?"):
        assert asked(with_tasks, question) >= len(SYSTEMS), question
    # editing notes.md: only the task that reads it is asked again
    assert asked(after_edit, "What happened to cash flow and debt?") >= len(SYSTEMS)
    assert asked(after_edit, "Summarize the quarter.") == 0
    log = edited.stdout + edited.stderr
    assert log.count("kept the predictions of 1 unchanged task(s)") == len(SYSTEMS)
    # no change: no request, nothing to do
    assert unchanged == []
    assert "nothing to do" in again.stdout + again.stderr
    _check_runs(tmp_path)


def _check_runs(tmp_path) -> None:
    """Each sweep's runs carry the digest of the data they read, as a param and as their
    MLflow dataset input, and names that say which data."""
    client = client_for(tmp_path)
    runs = sorted(all_runs(tmp_path), key=lambda r: r.info.start_time)
    parents = [r for r in runs if r.data.tags.get("role") == "sweep_parent"]
    assert len(parents) == 3  # no tasks, with tasks, edited; the unchanged re-run opens none
    digests = [p.data.params["dataset_digest"] for p in parents]
    assert len(set(digests)) == 3
    for parent, digest in zip(parents, digests, strict=True):
        assert parent.info.run_name == "my_calls arag·naive·stuffing"
        children = [r for r in runs
                    if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
        assert sorted(c.data.tags["system"] for c in children) == sorted(SYSTEMS)
        for child in children:
            assert child.info.run_name == f"{child.data.tags['system']} my_calls"
            assert child.data.params["dataset_digest"] == digest
            (data,) = client.get_run(child.info.run_id).inputs.dataset_inputs
            assert (data.dataset.name, data.dataset.digest) == ("my_calls", digest)
    last = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[-1].info.run_id]
    assert all(r.data.metrics["n_tasks"] == 2 and r.data.metrics["n_resumed"] == 1
               for r in last)
