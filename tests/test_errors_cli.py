"""Errors are not results, through the real command: an API outage fails the sweep and the
same command finishes it once the API is back; a judge outage; a tracking store that is
down or unknown; a password in a URL that reaches no file; a sweep that fails validation
leaves no run; a job that fails fails only itself."""

from __future__ import annotations

import json
import re
import shutil
import socket
import time
from pathlib import Path

import pytest

from tests.anthropic_fake import FakeAnthropic, agent_policy, error, text_reply
from tests.conftest import ROOT, all_runs, run_cli, write_mini_dataset
from tests.test_judge_sweep import judge as healthy_judge

pytestmark = pytest.mark.slow
CLAUDE = ("model=claude-haiku-4-5", "model.max_retries=1", "model.retry_base_delay_s=0.01")


def overloaded(request: dict, n: int) -> dict:
    return error(529, "overloaded_error", "Overloaded")


def fresh_responses(tmp: Path, shared_cache: Path) -> Path:
    """A cache with the shared index but no model responses, so every call reaches the API."""
    cache = tmp / "cache"
    if (shared_cache / "index").exists():
        shutil.copytree(shared_cache / "index", cache / "index", dirs_exist_ok=True)
    return cache


def _jobs(tmp: Path):
    return sorted((r for r in all_runs(tmp) if r.data.tags.get("system")),
                  key=lambda r: r.data.tags["system"])


def _parents(tmp: Path):
    return [r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent"]


def test_an_api_outage_fails_the_sweep_and_the_same_command_finishes_it(tmp_path, monkeypatch,
                                                                          shared_cache):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with FakeAnthropic(overloaded) as fake:
        sweep = ("system=arag,naive,stuffing", "dataset.limit=2", *CLAUDE,
                 f"model.base_url={fake.url}")
        # no cached replies: another test's answers to these tasks would hide the outage
        cache = fresh_responses(tmp_path, shared_cache)
        down = run_cli(tmp_path, *sweep, cache=cache)
        assert down.returncode == 1, down.stderr[-3000:]
        assert "3 job(s) of the sweep failed" in down.stderr
        assert down.stderr.count("2 of 2 tasks errored (overloaded x2)") >= 3
        assert "above runner.max_error_rate=0" in down.stderr
        assert "run the same command again" in down.stderr
        failed = _jobs(tmp_path)
        assert [r.info.status for r in failed] == ["FAILED"] * 3
        assert all(r.data.metrics["n_errors_overloaded"] == 2 for r in failed)
        assert all("overloaded x2" in r.data.tags["too_many_errors"] for r in failed)
        assert [p.info.status for p in _parents(tmp_path)] == ["FAILED"]

        fake.handler = agent_policy()  # the outage ends: the same command again
        up = run_cli(tmp_path, *sweep, cache=cache)
        assert up.returncode == 0, up.stderr[-3000:]
        done = _jobs(tmp_path)
        assert [r.info.run_id for r in done] == [r.info.run_id for r in failed]  # continued
        assert [r.info.status for r in done] == ["FINISHED"] * 3
        assert all(r.data.metrics["n_errors"] == 0 for r in done)
        assert all(r.data.metrics["n_errors_overloaded"] == 0 for r in done)
        assert all("too_many_errors" not in r.data.tags for r in done)

        asked = len(fake.requests)  # and once more: every task finished, nothing is called
        again = run_cli(tmp_path, *sweep, cache=cache)
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(fake.requests) == asked
        assert again.stderr.count("nothing to do") >= 3
    assert len(_parents(tmp_path)) == 2  # the finished sweep's re-run opened no parent


def test_a_judge_outage_logs_every_other_metric_and_the_same_command_judges(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with FakeAnthropic(overloaded) as fake:
        job = ("system=naive", "dataset.limit=2", "judge=claude-haiku-4-5",
               f"judge.base_url={fake.url}", "judge.max_retries=1",
               "judge.retry_base_delay_s=0.01")
        down = run_cli(tmp_path, *job, sweep=False)
        assert down.returncode != 0
        # every judge call failed: the G-Eval criteria, and any per-task judge scorer
        failed = re.search(r"(\d+) of (\d+) judge calls failed \(overloaded x(\d+)\)",
                           down.stderr)
        assert failed and len(set(failed.groups())) == 1, down.stderr[-3000:]
        (run,) = _jobs(tmp_path)
        assert run.info.status == "FAILED"
        m = run.data.metrics
        assert m["judge_errors_overloaded"] == m["judge_errors"] == int(failed.group(1))
        assert m["rouge2_f1_mean"] > 0 and m["retrieval_recall_mean"] > 0
        assert "geval_coverage_mean" not in m
        fake.handler = healthy_judge
        up = run_cli(tmp_path, *job, sweep=False)
        assert up.returncode == 0, up.stderr[-3000:]
        (run,) = _jobs(tmp_path)
        assert run.info.status == "FINISHED" and run.data.metrics["judge_errors"] == 0
        assert run.data.metrics["judge_errors_overloaded"] == 0
        assert 1 <= run.data.metrics["geval_coverage_mean"] <= 5


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("uri", ["closed port", "garbage://x"])
def test_an_unusable_tracking_store_fails_fast_naming_tracking_uri(uri, tmp_path):
    uri = f"http://127.0.0.1:{_closed_port()}" if uri == "closed port" else uri
    started = time.monotonic()
    result = run_cli(tmp_path, "system=arag,naive", f"tracking.uri={uri}")
    assert time.monotonic() - started < 60
    assert result.returncode != 0
    assert f"tracking.uri='{uri}'" in result.stderr and "Fix:" in result.stderr, \
        result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_a_password_in_a_url_reaches_no_file(tmp_path, monkeypatch, shared_cache):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with FakeAnthropic() as fake:
        port = fake.url.rsplit(":", 1)[1]
        url = f"http://user:s3cr3t-pass@127.0.0.1:{port}"
        cache = fresh_responses(tmp_path, shared_cache)
        swept = run_cli(tmp_path, "system=arag,naive", "dataset.limit=1", *CLAUDE,
                        f"model.base_url={url}", cache=cache)
        single = run_cli(tmp_path, "system=stuffing", "dataset.limit=1", *CLAUDE,
                         f"model.base_url={url}", cache=cache, sweep=False)
    assert swept.returncode == 0 and single.returncode == 0, swept.stderr[-3000:]
    # the connection used the real URL: its credentials went to the API as basic auth
    assert len(fake.requests) >= 3 and all(
        r["headers"].get("authorization", "").startswith("Basic ") for r in fake.requests)
    runs = _jobs(tmp_path)
    assert [r.info.status for r in runs] == ["FINISHED"] * 3
    assert runs[0].data.params["model.base_url"] == f"http://***@127.0.0.1:{port}"
    assert "http://***@" in _parents(tmp_path)[0].data.tags["sweep_overrides"]
    places = [tmp_path, shared_cache,
              *(ROOT / d for d in ("data", "multirun", "outputs", "mlruns"))]
    leaks = [str(p) for place in places if place.exists() for p in place.rglob("*")
             if p.is_file() and b"s3cr3t-pass" in p.read_bytes()]
    assert leaks == []
    assert (tmp_path / "outputs" / ".hydra" / "overrides.yaml").exists()
    assert any((tmp_path / "multirun").rglob(".hydra/config.yaml"))


def test_a_sweep_that_fails_validation_leaves_no_new_run(tmp_path, shared_cache):
    first = run_cli(tmp_path, "system=naive", "dataset.limit=1", cache=shared_cache)
    assert first.returncode == 0, first.stderr[-3000:]
    before = {r.info.run_id for r in all_runs(tmp_path)}
    bad = write_mini_dataset(tmp_path / "bad")
    with open(bad / "tasks.jsonl", "a") as f:
        f.write('{"id": "broken", \n')
    cases = {"max_loops=-1": (("system=arag,naive", "max_loops=-1"), "Fix: max_loops="),
             "a key set twice": (("system=naive,stuffing", "system=arag"),
                                 "Fix: system=naive,stuffing,arag"),
             "bad data": (("system=arag,naive", f"dataset.root={bad}"), "tasks.jsonl:3"),
             "one job's bad value": (("system=naive", "max_loops=2,-1"), "max_loops=-1")}
    for name, (args, expected) in cases.items():
        result = run_cli(tmp_path, *args, cache=shared_cache)
        assert result.returncode != 0, name
        assert expected in result.stderr, (name, result.stderr[-2000:])
        assert {r.info.run_id for r in all_runs(tmp_path)} == before, name


def test_a_failing_job_fails_only_itself(tmp_path, monkeypatch, shared_cache):
    """A job whose calls all fail (the API refuses A-RAG's requests) is recorded and fails
    the sweep; the other job finishes; the parent is FAILED with the job listed."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")

    def refuse_tools(request: dict, n: int) -> dict:
        if request.get("tools"):
            return error(401, "authentication_error", "invalid x-api-key")
        return text_reply("q3 revenue rose 14.2 percent.", request)

    with FakeAnthropic(refuse_tools) as fake:
        result = run_cli(tmp_path, "system=arag,naive", "dataset.limit=2", *CLAUDE,
                         f"model.base_url={fake.url}",
                         cache=fresh_responses(tmp_path, shared_cache))
    assert result.returncode == 1, result.stderr[-3000:]
    assert "1 job(s) of the sweep failed" in result.stderr
    assert "[arag]" in result.stderr and "2 of 2 tasks errored (auth x2)" in result.stderr
    assert "check the provider's API key" in result.stderr
    (parent,) = _parents(tmp_path)
    assert {r.data.tags["system"]: r.info.status for r in _jobs(tmp_path)} == {
        "arag": "FAILED", "naive": "FINISHED"}
    assert parent.info.status == "FAILED"
    assert json.loads(parent.data.tags["failed_jobs"])[0]["job"] == "arag"


def test_a_full_disk_mid_run_names_the_log_its_key_and_the_fix_and_tears_no_record(
        tmp_path, make_cfg, shared_cache):
    """A file-size limit (RLIMIT_FSIZE) stands in for a full disk: the prediction log is the
    one file near the limit, so its next append fails part-way (EFBIG)."""
    import resource
    import signal
    import subprocess
    import sys

    from runners.job import prepare
    from runners.settings import read
    from tests.conftest import store_overrides

    limit = 3_000_000
    overrides = ["system=arag", "dataset.limit=2"]
    # the run's folder: named by its config and its dataset's digest
    log = prepare(read(make_cfg(*overrides)), call_models=False).predictions_path
    log.parent.mkdir(parents=True)
    padding = {"id": "not-a-task", "source": "sample", "system": "arag", "model": "offline",
               "task_type": "summarization", "question": "", "doc_ids": [],
               "ground_truth": "", "predicted": "x" * (limit - 400)}
    log.write_text(json.dumps(padding) + "\n")
    before = log.read_bytes()

    def full_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    cmd = [sys.executable, "run.py", *overrides, f"hydra.run.dir={tmp_path}/out",
           *store_overrides(tmp_path, shared_cache)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          preexec_fn=full_disk, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert f"{log}: File too large. It is under runner.runs_dir=" in done.stderr
    assert "Fix: free disk space" in done.stderr and "Traceback" not in done.stderr
    assert log.read_bytes() == before, "no torn record"
    assert [r.info.status for r in all_runs(tmp_path)] == ["FAILED"]
