"""A tracking server that stops answering mid-sweep: the command gives up within the
documented bound (tracking/storage.py HTTP_BOUNDS), says the server went away without
printing credentials, exits non-zero, and the same command against the server once it is
back resumes without answering finished tasks again."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests import forked
from tests.conftest import ROOT, store_overrides
from tracking.storage import SERVER_GONE_BOUND_S

MLFLOW = Path(sys.executable).with_name("mlflow")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(tmp: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [str(MLFLOW), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp}/server.db",
         "--artifacts-destination", str(tmp / "served")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        start_new_session=True)  # its workers are stopped with it
    # its first start migrates a new store: over a minute on a loaded 2-core machine
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.5)
    _stop(proc)
    pytest.fail("the mlflow server did not start within 180 s")


def _stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _sweep(tmp: Path, port: int) -> forked.Popen:
    cmd = [sys.executable, "run.py", "-m", "system=closed_book,stuffing", "dataset=sample",
           "dataset.limit=2", "model=offline", "judge=none", "metrics.scorers=[rouge,length]",
           *store_overrides(tmp, tmp / "cache"),
           f"tracking.uri=http://user:s3cret@127.0.0.1:{port}",
           f"tracking.artifact_location={tmp}/artifacts", f"hydra.sweep.dir={tmp}/multirun",
           "runner.concurrency=1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_HTTP", "HYDRA_"))}
    return forked.Popen(cmd, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def _answers(tmp: Path) -> dict[Path, list[str]]:
    """Each predictions file of the sweep: the ids it holds, in order."""
    return {path: [json.loads(line)["id"] for line in path.read_text().splitlines() if line]
            for path in (tmp / "runs").glob("*/predictions.jsonl")}


@pytest.mark.slow
def test_a_server_that_goes_away_fails_within_the_bound_and_the_sweep_resumes(tmp_path):
    port = _free_port()
    server = _start_server(tmp_path, port)
    try:
        sweep = _sweep(tmp_path, port)
        deadline = time.time() + 300
        # the first job has answered its tasks: the server goes while the sweep runs
        while time.time() < deadline and sweep.poll() is None and not any(
                len(ids) == 2 for ids in _answers(tmp_path).values()):
            time.sleep(0.2)
        assert sweep.poll() is None, "the sweep ended before the server was stopped"
        _stop(server)
        stopped = time.time()
        _, stderr = sweep.communicate(timeout=SERVER_GONE_BOUND_S + 60)
        elapsed = time.time() - stopped
    finally:
        if sweep.poll() is None:
            sweep.kill()
        if server.poll() is None:
            _stop(server)
    assert sweep.returncode != 0
    assert elapsed < SERVER_GONE_BOUND_S, f"gave up after {elapsed:.0f} s"
    gone = [line for line in stderr.splitlines()
            if f"the tracking server at http://***@127.0.0.1:{port} went away" in line]
    assert gone and "Fix: start it again" in gone[0], stderr[-3000:]
    assert "s3cret" not in stderr and "Traceback" not in stderr
    before = _answers(tmp_path)
    assert any(len(ids) == 2 for ids in before.values())

    server = _start_server(tmp_path, port)
    try:
        again = _sweep(tmp_path, port)
        _, stderr = again.communicate(timeout=300)
    finally:
        _stop(server)
    assert again.returncode == 0, stderr[-3000:]
    after = _answers(tmp_path)
    for path, ids in before.items():  # what was answered is kept as it was, not asked again
        assert after[path][:len(ids)] == ids
    assert all(sorted(ids) == sorted(set(ids)) and len(ids) == 2 for ids in after.values())
    assert "resuming; 2 of 2 answers kept" in stderr, stderr[-3000:]


def test_mlflow_retries_are_bounded_unless_the_user_set_them(monkeypatch, tmp_path):
    from tracking.storage import HTTP_BOUNDS, bound_server_calls

    for name in HTTP_BOUNDS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "300")  # the user's own choice
    bound_server_calls()
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2"
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "300"


def test_an_mlflow_error_from_a_silent_server_says_it_went_away():
    from mlflow.exceptions import MlflowException

    from tracking.storage import server_gone

    port = _free_port()
    uri = f"http://user:s3cret@127.0.0.1:{port}"
    gone = server_gone(MlflowException("API request to /runs/update failed"), uri)
    assert gone is not None and "s3cret" not in str(gone)
    assert str(gone).startswith(f"the tracking server at http://***@127.0.0.1:{port} went away")
    # not a server, or not an error of the tracking client: not this
    assert server_gone(MlflowException("x"), "sqlite:///mlruns/mlflow.db") is None
    assert server_gone(KeyError("x"), uri) is None
