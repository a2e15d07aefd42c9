"""kill -9 in the middle of a Claude sweep, then the same command: nothing lost or redone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import forked
from tests.anthropic_fake import FakeAnthropic
from tests.conftest import ROOT, all_runs, store_overrides

pytestmark = pytest.mark.slow


def command(tmp: Path, url: str) -> list[str]:
    return [sys.executable, "run.py", "-m", "system=arag,naive", "dataset=sample",
            "model=claude-haiku-4-5", f"model.base_url={url}", "runner.concurrency=2",
            f"hydra.sweep.dir={tmp}/multirun", *store_overrides(tmp)]


def logged(tmp: Path) -> dict[str, list[str]]:
    """Task ids in each run's predictions log, in append order (duplicates kept)."""
    out = {}
    for log in (tmp / "runs").glob("*/predictions.jsonl"):
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        if lines:
            out[lines[0]["system"]] = [x["id"] for x in lines]
    return out


def test_kill_9_mid_sweep_then_rerun_loses_and_repeats_nothing(tmp_path):
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    n_tasks = len((ROOT / "data/sample/tasks.jsonl").read_text().splitlines())
    with FakeAnthropic(delay=0.25) as fake:
        proc = forked.Popen(command(tmp_path, fake.url), cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
        deadline = time.time() + 240
        while time.time() < deadline and len(logged(tmp_path).get("arag", [])) < 2:
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        before = logged(tmp_path)
        assert 2 <= len(before["arag"]) < n_tasks, "the kill must land mid-run"
        done_before = set(before["arag"])
        seen = len(fake.requests)
        again = forked.run(command(tmp_path, fake.url), cwd=ROOT, env=env, timeout=600)
        assert again.returncode == 0, again.stderr[-3000:]
        second = fake.requests[seen:]
    after = logged(tmp_path)
    for system in ("arag", "naive"):
        assert sorted(after[system]) == sorted(set(after[system])), "no duplicated prediction"
        assert len(after[system]) == n_tasks, "no lost prediction"
    questions = {t["id"]: t["question"] for t in map(
        json.loads, (ROOT / "data/sample/tasks.jsonl").read_text().splitlines())}
    asked = [json.dumps(r["json"]["messages"][0]) for r in second if r["json"].get("tools")]
    assert asked, "the unfinished A-RAG tasks were asked in the second run"
    repeated = [t for t in done_before if any(questions[t] in msg for msg in asked)]
    assert repeated == [], "a task finished before the kill was asked again"
    runs = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    assert any(r.data.tags.get("resumed") == "1" for r in runs)
    parents = [r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent"]
    # the killed sweep's parent is continued by the same command: none piles up
    assert [p.info.status for p in parents] == ["FINISHED"]


def test_cost_cap_leaves_the_run_killed_and_a_higher_cap_finishes_it(tmp_path):
    """No run with tasks left undone is FINISHED, nor exits 0: the command says what was
    answered and how to go on, and its verdict compares what was answered; the same command
    with a higher cap continues that run, predicts only the rest, and leaves one trace per
    task."""
    import mlflow

    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}

    def naive(cap: str):
        cmd = [sys.executable, "run.py", "system=naive", "dataset=sample", "dataset.limit=3",
               "model=claude-haiku-4-5", f"model.base_url={fake.url}", "runner.concurrency=1",
               f"runner.max_cost_usd={cap}", f"hydra.run.dir={tmp_path}/out",
               *store_overrides(tmp_path)]
        return forked.run(cmd, cwd=ROOT, env=env, timeout=600)

    with FakeAnthropic() as fake:
        capped = naive("0.000001")
        assert capped.returncode != 0, capped.stderr[-3000:]
        assert "1 of 3 tasks answered, 2 not run" in capped.stderr
        assert "raise runner.max_cost_usd" in capped.stderr
        assert "No run answered any task" not in capped.stdout
        (stopped,) = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
        n_capped = len(fake.requests)
        more = naive("5")
        n_more = len(fake.requests) - n_capped
    assert more.returncode == 0, more.stderr[-3000:]
    assert stopped.info.status == "KILLED"
    assert stopped.data.tags["n_not_run"] == "2" and "reached" in stopped.data.tags["stopped"]
    (run,) = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
    assert (n_capped, n_more) == (1, 2)  # one task ran before the cap; the rest ran later
    assert run.info.run_id == stopped.info.run_id
    assert run.info.status == "FINISHED" and run.data.tags["resumed"] == "1"
    assert "stopped" not in run.data.tags and "n_not_run" not in run.data.tags
    assert run.data.metrics["n_tasks"] == 3 and run.data.metrics["n_not_run"] == 0
    assert "cost cap runner.max_cost_usd=1e-06 reached" in capped.stderr
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id,
                                  return_type="list", include_spans=False)
    assert sorted(t.info.trace_metadata["task_id"] for t in traces) == [
        "HRBK_q2_2023", "KBTX_q3_2024", "NMBS_q4_2024"]


def test_a_claude_judge_without_a_key_stops_a_single_run_before_it_opens(tmp_path,
                                                                          monkeypatch):
    from tests.conftest import run_cli

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for extra in (["judge=claude-haiku-4-5"], ["mode=evaluate", "source_run_id=abc",
                                               "judge=claude-haiku-4-5"]):
        done = run_cli(tmp_path, "system=naive", *extra, sweep=False)
        assert done.returncode != 0 and "export ANTHROPIC_API_KEY" in done.stderr
    assert not (tmp_path / "mlflow.db").exists() or not all_runs(tmp_path)
