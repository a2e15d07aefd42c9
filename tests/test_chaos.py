"""Chaos: a Claude sweep against a fake API that fails and stalls at random is killed with
SIGKILL at 10 random moments and run again each time. In the end every task is predicted
exactly once, every job run is FINISHED, no run is left RUNNING, and no task that had
finished was ever asked of the API again."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.anthropic_fake import FakeAnthropic, agent_policy, error
from tests.conftest import ROOT, all_runs, store_overrides

pytestmark = pytest.mark.slow
KILLS = 10
LIMIT = 3
QUESTIONS = [json.loads(line)["question"] for line in
             (ROOT / "data/sample/tasks.jsonl").read_text().splitlines()[:LIMIT]]


def _chaotic(rng: random.Random, faults: dict[str, float]):
    policy, lock = agent_policy(), threading.Lock()
    kinds = [error(529, "overloaded_error", "Overloaded"), error(500, "api_error", "boom"),
             {"drop": True}]

    def handle(request: dict, n: int) -> dict:
        with lock:
            delay, roll, fault = rng.uniform(0.05, 0.4), rng.random(), rng.choice(kinds)
        if roll < faults["rate"]:
            return {**fault, "delay": delay}
        return {**policy(request, n), "delay": delay}

    return handle


def _task_of(request: dict) -> tuple[str, str]:
    """(system, task question) of a request: A-RAG offers tools, stuffing does not."""
    first = json.dumps(request["json"]["messages"][0])
    question = next(q for q in QUESTIONS if json.dumps(q)[1:-1] in first)
    return ("arag" if request["json"].get("tools") else "stuffing"), question


def _finished(runs_dir: Path) -> dict[tuple[str, str], int]:
    """(system, question) -> how many complete, error-free records the logs hold."""
    done: dict[tuple[str, str], int] = {}
    for log in runs_dir.glob("*/predictions.jsonl"):
        latest: dict[str, dict] = {}
        for line in log.read_bytes().splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # a torn last line: the run that resumes drops it
            record = json.loads(line)
            latest[record["id"]] = record
            if record["error"] is None:
                key = (record["system"], record["question"])
                done[key] = done.get(key, 0) + 1
        for record in latest.values():  # an id whose last record is an error is not done
            if record["error"] is not None:
                done.pop((record["system"], record["question"]), None)
    return done


def test_killed_at_random_moments_every_task_is_predicted_exactly_once(tmp_path, shared_cache):
    rng = random.Random(15)
    faults = {"rate": 0.15}
    with FakeAnthropic(_chaotic(rng, faults)) as fake:
        cmd = [sys.executable, "run.py", "-m", "system=arag,stuffing", f"dataset.limit={LIMIT}",
               "model=claude-haiku-4-5", "model.max_retries=3", "model.retry_base_delay_s=0.01",
               f"model.base_url={fake.url}", *store_overrides(tmp_path, shared_cache),
               f"hydra.sweep.dir={tmp_path}/multirun/${{now:%H-%M-%S-%f}}"]
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
        repeated, kills = [], 0
        for _ in range(KILLS):
            finished, seen = _finished(tmp_path / "runs"), len(fake.requests)
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                proc.wait(timeout=rng.uniform(3, 14))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                kills += 1
            repeated += [_task_of(r) for r in fake.requests[seen:] if _task_of(r) in finished]
        faults["rate"] = 0.0  # the last run goes to the end
        finished, seen = _finished(tmp_path / "runs"), len(fake.requests)
        last = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL)
        repeated += [_task_of(r) for r in fake.requests[seen:] if _task_of(r) in finished]
    assert last.returncode == 0, last.stderr[-3000:]
    assert kills >= KILLS // 2  # most runs really were killed mid-way
    assert repeated == []
    done = _finished(tmp_path / "runs")
    assert sorted(done) == sorted((s, q) for s in ("arag", "stuffing") for q in QUESTIONS)
    assert set(done.values()) == {1}  # every task predicted exactly once
    runs = all_runs(tmp_path)
    jobs = [r for r in runs if r.data.tags.get("system")]
    assert sorted(r.data.tags["system"] for r in jobs) == ["arag", "stuffing"]
    assert all(r.info.status == "FINISHED" and r.data.metrics["n_errors"] == 0 for r in jobs)
    running = [r for r in runs if r.info.status == "RUNNING"]
    assert not running, [r.data.tags for r in running]
