"""Chaos: a Claude sweep against a fake API that fails and stalls at random is killed with
SIGKILL at 6 random moments (a random few API requests into each run) and run again each
time. In the end every task is predicted exactly once, every job run is FINISHED, no run
is left RUNNING, and no task that had finished was ever asked of the API again. Two
identical sweeps started together run once; a sweep killed while writing its report gets
it on the next run; a kill loses no spend, the system's or the judge's."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests import forked
from tests.anthropic_fake import FakeAnthropic, agent_policy, error, text_reply
from tests.conftest import ROOT, all_runs, client_for, store_overrides
from tests.sweep_checks import judge_prompt, reported_spend

pytestmark = pytest.mark.slow
KILLS = 6  # each run pays ~15 s of start-up before its first request
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


def _kill_after_progress(proc: forked.Popen, fake: FakeAnthropic, requests: int,
                         extra_s: float) -> bool:
    """SIGKILL the sweep a random moment after the API has seen `requests` requests in all
    (so the kill lands mid-work however fast or slow this machine is); False if it ended
    on its own first."""
    deadline = time.monotonic() + 120
    while len(fake.requests) < requests and time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    time.sleep(extra_s)
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


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
            proc = forked.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
            if _kill_after_progress(proc, fake, seen + rng.randint(1, 3), rng.uniform(0, 0.4)):
                kills += 1
            repeated += [_task_of(r) for r in fake.requests[seen:] if _task_of(r) in finished]
        faults["rate"] = 0.0  # the last run goes to the end
        finished, seen = _finished(tmp_path / "runs"), len(fake.requests)
        last = forked.run(cmd, cwd=ROOT, env=env, timeout=600)
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


def _claude_sweep(tmp_path: Path, cache: Path, url: str, *extra: str) -> list[str]:
    return [sys.executable, "run.py", "-m", "system=arag,stuffing", "model=claude-haiku-4-5",
            "model.retry_base_delay_s=0.01", f"model.base_url={url}",
            *store_overrides(tmp_path, cache), *extra]


def test_two_identical_sweeps_at_once_run_once(tmp_path, shared_cache):
    """Two identical sweeps started together (into one sweep folder, the worst case): one
    runs, the other stops at once naming it; one set of runs, 6 records each, no request
    sent twice, no traceback."""
    with FakeAnthropic(delay=0.05) as fake:
        cmd = _claude_sweep(tmp_path, tmp_path / "cache", fake.url,
                            f"hydra.sweep.dir={tmp_path}/multirun/same")
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
        procs = [forked.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=600) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], [err[-3000:] for _, err in outs]
    winner, loser = (0, 1) if procs[0].returncode == 0 else (1, 0)
    refusal = outs[loser][1]
    assert f"is in use by process {procs[winner].pid}" in refusal, refusal[-2000:]
    assert "started" in refusal and "Fix: wait for it to end" in refusal
    for _, err in outs:
        assert "Traceback" not in err and "Trace with ID" not in err
    bodies = [json.dumps(r["json"], sort_keys=True) for r in fake.requests]
    assert len(bodies) == len(set(bodies))  # no paid call made twice
    logs = sorted(tmp_path.glob("runs/*/predictions.jsonl"))
    assert [len(p.read_text().splitlines()) for p in logs] == [6, 6]
    runs = all_runs(tmp_path)
    assert sorted(r.data.tags.get("system", "parent") for r in runs) == [
        "arag", "parent", "stuffing"]
    assert all(r.info.status == "FINISHED" for r in runs)


KILL_IN_REPORT = """
import os, runpy, signal, sys
import runners.callbacks as callbacks

def killed(client, parent, *_):  # the report is being logged when the process is killed
    client.set_tag(parent["run_id"], "writing_report", "yes")
    os.kill(os.getpid(), signal.SIGKILL)

callbacks.write_sweep_report = killed
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""


def test_a_sweep_killed_while_writing_its_report_gets_it_on_the_next_run(tmp_path,
                                                                        shared_cache):
    args = ["-m", "system=naive,stuffing", "dataset.limit=2",
            *store_overrides(tmp_path, shared_cache)]
    killed = forked.run([sys.executable, "-c", KILL_IN_REPORT, *args,
                        f"hydra.sweep.dir={tmp_path}/multirun/0"], cwd=ROOT, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    (dead,) = [r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent"]
    again = forked.run([sys.executable, "run.py", *args,
                       f"hydra.sweep.dir={tmp_path}/multirun/1"], cwd=ROOT, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    runs = {r.info.run_id: r for r in all_runs(tmp_path)}
    parents = [r for r in runs.values() if r.data.tags.get("role") == "sweep_parent"]
    (latest,) = parents  # the same command continues in the killed sweep's parent
    assert latest.info.run_id == dead.info.run_id and latest.info.status == "FINISHED"
    assert "report.html" in {a.path for a in client_for(tmp_path).list_artifacts(
        latest.info.run_id)}
    assert latest.info.run_id in again.stdout  # the verdict points at the new report
    jobs = [r for r in runs.values() if r.data.tags.get("system")]
    assert len(jobs) == 2 and all(  # the latest sweep run lists both jobs, in the UI too
        j.data.tags["mlflow.parentRunId"] == latest.info.run_id for j in jobs)
    third = forked.run([sys.executable, "run.py", *args,
                       f"hydra.sweep.dir={tmp_path}/multirun/2"], cwd=ROOT, timeout=600)
    assert third.returncode == 0 and "Nothing new to compare" in third.stdout
    assert latest.info.run_id in third.stdout
    assert len([r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent"]) == 1


def test_a_kill_loses_no_spend(tmp_path):
    """One call at a time, killed as the 5th request arrives: the 4 replies before it were
    paid and are in the spend journal, though the task in flight has no record; the re-run
    answers that task's first call from the cache, so cost_usd_spent_earlier (the killed
    attempt's) and cost_usd_spent_total (the re-run's) count every paid reply once, and the
    part no record counts is cost_usd_unrecorded_total."""
    from arag.llm import Prices, Usage
    from tests.conftest import compose_cfg

    victim: dict[str, forked.Popen] = {}
    policy = agent_policy()

    def kill_at_fifth(request: dict, n: int) -> dict:
        if n == 4 and "run" in victim:
            os.killpg(victim.pop("run").pid, signal.SIGKILL)
            return {"drop": True}
        return policy(request, n)

    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    with FakeAnthropic(kill_at_fifth) as fake:
        cmd = [*_claude_sweep(tmp_path, tmp_path / "cache", fake.url, "dataset.limit=3",
                              "runner.concurrency=1")]
        cmd[cmd.index("system=arag,stuffing")] = "system=arag"
        victim["run"] = forked.Popen(
            [*cmd, f"hydra.sweep.dir={tmp_path}/multirun/0"], cwd=ROOT, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        assert victim["run"].wait(timeout=600) == -signal.SIGKILL
        done = forked.run([*cmd, f"hydra.sweep.dir={tmp_path}/multirun/1"], cwd=ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    prices = Prices.from_config(compose_cfg(["model=claude-haiku-4-5"]).model)
    paid = sum(prices.cost_usd(Usage(**u)) for u in fake.usages)
    (job,) = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
    metrics = job.data.metrics
    # every paid reply once: the killed attempt's apart, as earlier, and this attempt's
    assert metrics["cost_usd_spent_earlier"] > 0
    assert metrics["cost_usd_spent_total"] + metrics["cost_usd_spent_earlier"] == \
        pytest.approx(paid, rel=1e-6)
    assert metrics["cost_usd_unrecorded_total"] > 0  # the calls of the task in flight at the kill
    assert metrics["cost_usd_unrecorded_total"] == pytest.approx(
        paid - metrics["cost_usd_total"], rel=1e-6)
    # the re-run continues the killed sweep's parent: its report counts what the server
    # served both attempts once, as this sweep's, and says which of those replies the re-run
    # took from the response cache (the 4 before the kill) rather than paying again
    before = sum(prices.cost_usd(Usage(**u)) for u in fake.usages[:4])
    [parent] = [r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent"]
    reported = reported_spend(tmp_path, -1)
    assert parent.info.status == "FINISHED"
    assert reported["earlier"] == 0.0
    assert reported["new"] == pytest.approx(paid, abs=6e-5)
    assert reported["reused"] == pytest.approx(before, abs=6e-5)


JUDGE_KILL_AT = 5  # the 6th judge request: criteria for both dimensions, then scoring


def test_a_kill_while_judging_loses_no_judge_spend(tmp_path):
    """A judged run whose system is the offline model (every request the API sees is the
    judge's), one call at a time, killed as the 6th judge request arrives: the 5 replies
    before it were paid and journaled. The same command continues the run to FINISHED
    without asking any of them again: judge_cost_usd_spent_earlier is what the killed
    process paid, judge_cost_usd_spent_total (and judge_cost_usd_total) the second's."""
    from arag.llm import Prices, Usage
    from tests.conftest import compose_cfg

    victim: dict[str, forked.Popen] = {}
    killed_after: list[int] = []

    def kill_while_judging(request: dict, n: int) -> dict:
        if n == JUDGE_KILL_AT and "run" in victim:
            killed_after.append(len(fake.usages))
            os.killpg(victim.pop("run").pid, signal.SIGKILL)
            return {"drop": True}
        return text_reply(judge_prompt(request) or "not a judge request", request)

    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    with FakeAnthropic(kill_while_judging) as fake:
        cmd = [sys.executable, "run.py", "system=stuffing", "dataset.limit=3",
               "judge=claude-haiku-4-5", f"judge.base_url={fake.url}",
               "judge.retry_base_delay_s=0.01", "runner.concurrency=1",
               *store_overrides(tmp_path), f"hydra.run.dir={tmp_path}/out"]
        victim["run"] = forked.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        assert victim["run"].wait(timeout=600) == -signal.SIGKILL
        done = forked.run(cmd, cwd=ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert killed_after == [JUDGE_KILL_AT]  # every reply before the kill had been answered
    assert all(judge_prompt(r["json"]) for r in fake.requests)  # the judge's, every one
    bodies = [json.dumps(r["json"], sort_keys=True) for r in fake.requests]
    # only the request the kill cut off (it never got a reply) is asked again
    assert [b for b in set(bodies) if bodies.count(b) > 1] == [bodies[JUDGE_KILL_AT]]
    prices = Prices.from_config(compose_cfg(["judge=claude-haiku-4-5"]).judge)
    costs = [prices.cost_usd(Usage(**u)) for u in fake.usages]
    (run,) = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
    assert run.info.status == "FINISHED" and run.data.tags.get("resumed")
    metrics = run.data.metrics
    assert metrics["judge_cost_usd_spent_earlier"] == pytest.approx(sum(costs[:JUDGE_KILL_AT]),
                                                                    rel=1e-6)
    assert metrics["judge_cost_usd_spent_total"] == pytest.approx(sum(costs[JUDGE_KILL_AT:]),
                                                                  rel=1e-6)
    assert metrics["judge_cost_usd_total"] == pytest.approx(sum(costs[JUDGE_KILL_AT:]),
                                                            rel=1e-6)
    assert sum(costs[:JUDGE_KILL_AT]) > 0  # the killed process's part: paid, and counted
    report = Path(client_for(tmp_path).download_artifacts(run.info.run_id, "report.md",
                                                          str(tmp_path / "report")))
    total = next(x for x in report.read_text().splitlines() if x.startswith("Total spent"))
    assert f"judge ${sum(costs[JUDGE_KILL_AT:]):.4f})" in total  # paid by the resumed attempt
    assert f"earlier: ${sum(costs[:JUDGE_KILL_AT]):.4f}" in total  # by the killed one, once
