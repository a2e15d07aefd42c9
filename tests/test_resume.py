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
        proc = subprocess.Popen(command(tmp_path, fake.url), cwd=ROOT, env=env,
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
        again = subprocess.run(command(tmp_path, fake.url), cwd=ROOT, env=env, text=True,
                               capture_output=True, stdin=subprocess.DEVNULL, timeout=600)
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
    assert sorted(p.info.status for p in parents) == ["FINISHED", "KILLED"]
