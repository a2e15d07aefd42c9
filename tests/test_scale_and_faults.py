"""Scale and faults: a 20%-fault API, parallel jobs, a tracking server, an unreachable one."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import forked
from tests.anthropic_fake import FakeAnthropic, agent_policy, error
from tests.conftest import ROOT, all_runs, run_cli, store_overrides

pytestmark = pytest.mark.slow
CLAUDE = ["model=claude-haiku-4-5", "model.max_retries=2", "model.retry_base_delay_s=0.01",
          "model.timeout_s=1"]


DOOMED = "HRBK"  # every call about this call's task fails: some tasks surely end in error


def _faulty(rate: float, seed: int = 7):
    """20% of calls: 429, 529, 500, a dropped connection, a timeout or a malformed body; and
    every call for the DOOMED task is overloaded, so its retries run out."""
    rng = random.Random(seed)
    lock = threading.Lock()
    policy = agent_policy()
    faults = [error(429, "rate_limit_error", "slow down", {"retry-after": "0"}),
              error(529, "overloaded_error", "Overloaded"), error(500, "api_error", "boom"),
              {"drop": True}, {"delay": 1.5}, {"malformed": True}]

    def handle(request, n):
        if f"{DOOMED}'s" in json.dumps(request["messages"][0]):
            return error(529, "overloaded_error", "Overloaded")
        with lock:
            roll, fault = rng.random(), rng.choice(faults)
        if roll < rate:
            return {**fault, **policy(request, n)} if "delay" in fault else fault
        return policy(request, n)

    return handle


def _claude_sweep(tmp: Path, url: str, *extra: str):
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    cmd = [sys.executable, "run.py", "-m", "system=arag,naive,stuffing", "dataset=sample",
           *CLAUDE, f"model.base_url={url}", f"hydra.sweep.dir={tmp}/multirun/{time.time()}",
           *extra, *store_overrides(tmp)]
    return forked.run(cmd, cwd=ROOT, env=env, timeout=900)


def test_twenty_percent_faults_every_task_accounted_for(tmp_path):
    with FakeAnthropic(_faulty(0.2)) as fake:
        result = _claude_sweep(tmp_path, fake.url)
        # errors are not results: runs with errored tasks fail, and so does the command
        assert result.returncode == 1, result.stderr[-3000:]
        assert "tasks errored" in result.stderr and "run the same command again" in result.stderr
        runs = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
        assert len(runs) == 3 and all(r.info.status == "FAILED" for r in runs)
        n_tasks = len((ROOT / "data/sample/tasks.jsonl").read_text().splitlines())
        errored_questions = set()
        for log in (tmp_path / "runs").glob("*/predictions.jsonl"):
            preds = [json.loads(line) for line in log.read_text().splitlines()]
            system = preds[0]["system"]
            run = next(r for r in runs if r.data.tags["system"] == system)
            assert len(preds) == n_tasks == run.data.metrics["n_tasks"]
            for p in preds:
                assert (p["predicted"] is not None) != bool(p["error"]), p
                assert p["error"] is None or "gave up after 3 attempts" in p["error"]
            errors = [p for p in preds if p["error"]]
            assert run.data.metrics["n_errors"] == len(errors) >= 1
            assert any(DOOMED in p["id"] for p in errors)
            errored_questions |= {p["question"] for p in errors}
        assert any("retry 1/2" in line for line in result.stderr.splitlines())
        # the same sweep against a healthy API: only errored tasks re-run (by default)
        fake.handler = agent_policy()
        seen = len(fake.requests)
        again = _claude_sweep(tmp_path, fake.url)
        assert again.returncode == 0, again.stderr[-3000:]
        retried = [json.dumps(r["json"]["messages"][0]) for r in fake.requests[seen:]]
        assert retried and all(any(q in m for q in errored_questions) for m in retried)
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    for run in (r for r in all_runs(tmp_path) if r.data.tags.get("system")):
        assert run.data.metrics["n_errors"] == 0 and run.info.status == "FINISHED"
        # one trace per task: a retried task's error trace was replaced, nothing doubled
        traces = mlflow.search_traces(locations=[run.info.experiment_id],
                                      run_id=run.info.run_id, return_type="list")
        assert len(traces) == n_tasks
        assert all(t.info.state.value == "OK" for t in traces)


def _parent_with_three_children(tmp: Path) -> list:
    runs = all_runs(tmp)
    parents = [r for r in runs if r.data.tags.get("role") == "sweep_parent"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert sorted(c.data.tags["system"] for c in children) == ["arag", "naive", "stuffing"]
    assert all(c.info.status == "FINISHED" and c.data.metrics["n_errors"] == 0 for c in children)
    return children


def test_joblib_parallel_jobs_share_the_sqlite_store(tmp_path, shared_cache):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}  # as a user's shell
    result = run_cli(tmp_path, "system=arag,naive,stuffing", "dataset.limit=3",
                     "hydra/launcher=joblib", "hydra.launcher.n_jobs=3", cache=shared_cache,
                     env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "joblib" in result.stderr.lower()
    children = _parent_with_three_children(tmp_path)
    # three jobs at once share the cores: each process's math threads, tagged on its run
    share = str(max(1, (os.cpu_count() or 1) // 3))
    assert [c.data.tags["math_threads"] for c in children] == [share] * 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory) -> Iterator[int]:
    """A real ``mlflow server`` on a free port, one for the file's tests (each logs into an
    experiment of its own); its sqlite store and artifacts in a temporary folder."""
    tmp = tmp_path_factory.mktemp("server")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
         f"sqlite:///{tmp}/server.db", "--artifacts-destination", f"{tmp}/server-art",
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if time.time() > deadline:
                    pytest.fail("mlflow server did not start")
                time.sleep(0.5)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_sweep_against_a_real_tracking_server(tmp_path, shared_cache, mlflow_server):
    port = mlflow_server
    result = run_cli(tmp_path, "system=arag,naive,stuffing", "dataset.limit=3",
                     f"tracking.uri=http://127.0.0.1:{port}", "tracking.experiment=on_a_server",
                     cache=shared_cache)
    assert result.returncode == 0, result.stderr[-3000:]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"http://127.0.0.1:{port}")
    exp = client.get_experiment_by_name("on_a_server")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep_parent")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.status == "FINISHED" and len(children) == 3
    assert all(c.info.status == "FINISHED" for c in children)
    files = {a.path for a in client.list_artifacts(children[0].info.run_id)}
    assert "predictions.jsonl" in files
    for child in children:  # a trace a task, with its spans, written in batches over HTTP
        traces = client.search_traces(locations=[exp.experiment_id], run_id=child.info.run_id)
        assert len(traces) == 3 and all(t.data.spans for t in traces)


def test_a_password_in_the_tracking_uri_is_never_printed(tmp_path, shared_cache, mlflow_server):
    """MLflow prints "View run ... at: <tracking uri>" for a server; with credentials in the
    URI those lines are silenced (the harness prints its own, redacted)."""
    port = mlflow_server
    uri = f"http://user:s3cr3t-pass@127.0.0.1:{port}"
    swept = run_cli(tmp_path, "system=naive,stuffing", "dataset.limit=1", f"tracking.uri={uri}",
                    "tracking.experiment=password_in_uri", cache=shared_cache)
    single = run_cli(tmp_path, "system=naive", "dataset.limit=1", "max_loops=3",
                     f"tracking.uri={uri}", "tracking.experiment=password_in_uri",
                     cache=shared_cache, sweep=False)
    for result in (swept, single):
        assert result.returncode == 0, result.stderr[-3000:]
        assert "s3cr3t-pass" not in result.stdout + result.stderr
        assert f"http://***@127.0.0.1:{port}" in result.stdout  # where to look, redacted


def test_unreachable_tracking_server_fails_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    port = _free_port()
    result = run_cli(tmp_path, "system=naive", f"tracking.uri=http://127.0.0.1:{port}",
                     sweep=False)
    assert result.returncode != 0
    assert f"tracking.uri='http://127.0.0.1:{port}' is not reachable" in result.stderr
