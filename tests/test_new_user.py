"""What a new user meets around a sweep, through the real command with no API key: sweeps
told apart in MLflow's run list, a sweep over two datasets in an experiment of its own, an
endpoint that does not answer found before any job, a baseline that is the sweep itself
refused, Ctrl-C that says how to resume, and fixes named where a traceback was."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import forked
from tests.anthropic_fake import FakeAnthropic, error
from tests.conftest import ROOT, all_runs, client_for, run_cli, store_overrides, write_mini_dataset

NAIVE_STUFFING = ("system=naive,stuffing", "dataset.limit=2")


def _parents(tmp: Path):
    return [r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent"]


def _jobs(tmp: Path):
    return [r for r in all_runs(tmp) if r.data.tags.get("system")]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_sweeps_with_other_settings_have_other_names_and_their_datasets(tmp_path,
                                                                           shared_cache):
    first = run_cli(tmp_path, *NAIVE_STUFFING, cache=shared_cache)
    assert first.returncode == 0, first.stderr[-3000:]
    # a list key given a bare value is the one-element list it means
    sliced = run_cli(tmp_path, *NAIVE_STUFFING, "report.slice_by=document_tokens",
                     cache=shared_cache)
    assert sliced.returncode == 0, sliced.stderr[-3000:]
    assert "ListConfig" not in sliced.stderr and "Traceback" not in sliced.stderr
    parents = sorted(_parents(tmp_path), key=lambda r: r.info.start_time)
    names = [p.info.run_name for p in parents]
    assert len(names) == 2 and names[0] != names[1]
    assert names[0].startswith("sample[:2] naive·stuffing")  # the data, then the systems
    assert "slice_by=document_tokens" in names[1] and "slice_by" not in names[0]
    for parent in parents:  # the run list's Dataset column
        (data,) = parent.inputs.dataset_inputs
        assert data.dataset.name == "sample"
        assert data.dataset.digest == parent.data.params["dataset_digest"]
        assert parent.data.tags["sweep_command"].startswith("python run.py -m ")
    assert "report.slice_by=[document_tokens]" in parents[1].data.tags["sweep_overrides"]
    assert len(_jobs(tmp_path)) == 2  # the second sweep reused the first's runs


@pytest.mark.slow
def test_a_sweep_over_two_datasets_has_their_experiment_and_reuses_finished_runs(tmp_path,
                                                                              shared_cache):
    mini = write_mini_dataset(tmp_path / "calls")
    data = (f"dataset.root={mini}",)
    alone = run_cli(tmp_path, "system=naive", "dataset.name=calls", *data, cache=shared_cache)
    assert alone.returncode == 0, alone.stderr[-3000:]
    (earlier,) = _jobs(tmp_path)
    both = run_cli(tmp_path, "system=naive", "dataset.name=calls,more_calls", *data,
                   cache=shared_cache)
    assert both.returncode == 0, both.stderr[-3000:]
    client = client_for(tmp_path)
    combined = client.get_experiment_by_name("calls+more_calls")
    assert combined is not None
    parent = next(p for p in _parents(tmp_path) if p.info.experiment_id == combined.experiment_id)
    assert {d.dataset.name for d in parent.inputs.dataset_inputs} == {"calls", "more_calls"}
    assert parent.info.run_name.startswith("calls+more_calls naive")
    jobs = _jobs(tmp_path)
    # the finished run of one dataset was reused, not run again; the new one joined the
    # sweep's experiment, under its parent
    assert [j.info.run_id for j in jobs if j.data.tags["dataset"] == "calls"] == [
        earlier.info.run_id]
    (new,) = [j for j in jobs if j.data.tags["dataset"] == "more_calls"]
    assert new.info.experiment_id == combined.experiment_id
    assert new.data.tags["mlflow.parentRunId"] == parent.info.run_id
    report = Path(client.download_artifacts(parent.info.run_id, "report.md", str(tmp_path)))
    assert "naive" in report.read_text()


@pytest.mark.slow
def test_an_unreachable_judge_fails_before_any_job_naming_its_key(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    started = time.monotonic()
    down = run_cli(tmp_path, *NAIVE_STUFFING, "judge=claude-haiku-4-5",
                   f"judge.base_url=http://127.0.0.1:{_closed_port()}")
    assert down.returncode == 2, down.stderr[-3000:]
    assert "judge.base_url=http://127.0.0.1:" in down.stderr and "Fix:" in down.stderr
    assert "runner.check_endpoints=false" in down.stderr
    assert all_runs(tmp_path) == []  # no parent, no child run
    assert time.monotonic() - started < 120
    with FakeAnthropic() as fake:  # a refused key is named with its variable
        fake.models_reply = error(401, "authentication_error", "invalid x-api-key")
        refused = run_cli(tmp_path, *NAIVE_STUFFING, "judge=claude-haiku-4-5",
                          f"judge.base_url={fake.url}")
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert "ANTHROPIC_API_KEY" in refused.stderr and len(fake.probes) == 1
        assert fake.requests == []  # nothing was asked of the model: no job ran
    assert all_runs(tmp_path) == []


@pytest.mark.slow
def test_without_the_check_a_job_whose_every_call_failed_stops_the_sweep(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    down = run_cli(tmp_path, *NAIVE_STUFFING, "runner.check_endpoints=false",
                   "judge=claude-haiku-4-5", f"judge.base_url=http://127.0.0.1:{_closed_port()}",
                   "judge.max_retries=0", "judge.retry_base_delay_s=0.01")
    assert down.returncode != 0, down.stderr[-3000:]
    assert "the sweep stops at" in down.stderr
    jobs = _jobs(tmp_path)
    assert len(jobs) == 1 and jobs[0].info.status == "FAILED"  # the second never started


@pytest.mark.slow
def test_ctrl_c_mid_sweep_says_how_to_resume_and_the_same_command_does(tmp_path):
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    with FakeAnthropic(delay=0.3) as fake:
        cmd = [sys.executable, "run.py", "-m", "system=naive,stuffing", "dataset.limit=4",
               "model=claude-haiku-4-5", f"model.base_url={fake.url}", "runner.concurrency=1",
               f"hydra.sweep.dir={tmp_path}/multirun/0", *store_overrides(tmp_path)]
        proc = forked.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.time() + 300
        while time.time() < deadline and len(fake.requests) < 2:
            time.sleep(0.1)
        assert len(fake.requests) >= 2, "the sweep must be answering when Ctrl-C lands"
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 130, err[-3000:]
        assert "interrupted: run the same command to resume" in err
        assert "Traceback" not in err
        (stopped,) = _parents(tmp_path)
        assert stopped.info.status == "KILLED"
        asked = len(fake.requests)
        cmd[cmd.index(f"hydra.sweep.dir={tmp_path}/multirun/0")] = \
            f"hydra.sweep.dir={tmp_path}/multirun/1"
        again = forked.run(cmd, cwd=ROOT, env=env, timeout=600)
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(fake.requests) - asked < 2 * 4  # what was answered is not asked again
    (parent,) = _parents(tmp_path)  # continued in the same parent: none piles up
    assert parent.info.run_id == stopped.info.run_id and parent.info.status == "FINISHED"
    assert sorted(j.info.status for j in _jobs(tmp_path)) == ["FINISHED", "FINISHED"]


@pytest.mark.slow
def test_a_sweep_given_itself_as_baseline_is_refused_and_the_baseline_is_unchanged(
        tmp_path, shared_cache):
    first = run_cli(tmp_path, *NAIVE_STUFFING, cache=shared_cache)
    assert first.returncode == 0, first.stderr[-3000:]
    (parent,) = _parents(tmp_path)
    before = dict(parent.data.tags)
    itself = run_cli(tmp_path, *NAIVE_STUFFING, f"report.baseline={parent.info.run_id}",
                     cache=shared_cache)
    assert itself.returncode == 2, itself.stderr[-3000:]
    assert "this sweep itself" in itself.stderr and "No regression" not in itself.stdout
    (after,) = _parents(tmp_path)
    assert dict(after.data.tags) == before and "baseline_run_id" not in after.data.tags
    client_for(tmp_path).set_terminated(parent.info.run_id, "KILLED")  # no finished sweep
    unfinished = run_cli(tmp_path, "system=naive", "dataset.limit=2",
                         f"report.baseline={parent.info.run_id}", cache=shared_cache)
    assert unfinished.returncode == 2, unfinished.stderr[-3000:]
    assert "not a finished sweep" in unfinished.stderr


FAIL_THE_REPORT = """
import runpy, sys
sys.path.insert(0, {root!r})
import runners.callbacks as callbacks

def broken(*_args, **_kwargs):
    raise RuntimeError("the disk is full")

callbacks.write_sweep_report = broken
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""


@pytest.mark.slow
def test_a_parent_whose_report_failed_ends_failed_saying_how_to_finish_it(tmp_path,
                                                                           shared_cache):
    script = tmp_path / "fail_report.py"
    script.write_text(FAIL_THE_REPORT.format(root=str(ROOT)))
    failed = forked.run([sys.executable, str(script), "-m", *NAIVE_STUFFING,
                         *store_overrides(tmp_path, shared_cache),
                         f"hydra.sweep.dir={tmp_path}/multirun/0"], cwd=ROOT, timeout=600)
    assert failed.returncode == 1, failed.stderr[-3000:]
    (parent,) = _parents(tmp_path)
    assert parent.info.status == "FAILED"
    note = parent.data.tags["mlflow.note.content"]
    assert "the disk is full" in note and f"python -m report {parent.info.run_id}" in note


def test_run_py_without_the_projects_dependencies_says_which_python_to_use():
    # -S: no site-packages, as the system's python3 outside .venv
    bare = subprocess.run([sys.executable, "-S", "run.py", "-m", "system=naive"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert bare.returncode != 0
    assert ".venv/bin/python run.py -m system=naive" in bare.stderr
    assert "make run" in bare.stderr and "Traceback" not in bare.stderr


def test_a_busy_ui_port_names_arag_ui_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = forked.run([sys.executable, "-m", "tracking.ui_port", str(port)], cwd=ROOT,
                          timeout=60)
    assert busy.returncode == 1 and f"ARAG_UI_PORT={port + 1}" in busy.stderr
    free = forked.run([sys.executable, "-m", "tracking.ui_port", str(_closed_port())],
                      cwd=ROOT, timeout=60)
    assert free.returncode == 0, free.stderr


def test_decide_on_suggestions_name_what_this_sweep_can_score(tmp_path):
    bad = run_cli(tmp_path, *NAIVE_STUFFING, "metrics.scorers=[rouge,length]",
                  "report.decide_on=[rouge2,geval_faithfulnes]")
    assert bad.returncode != 0
    line = next(ln for ln in bad.stderr.splitlines() if "report.decide_on" in ln)
    fix = line.split("Fix: ", 1)[1]
    assert fix.startswith("report.decide_on=[rouge2_f1]")  # no judge: no G-Eval suggested
    assert "scored only with a judge" in line
    assert all_runs(tmp_path) == []


@pytest.mark.parametrize(("fields", "told"), [
    (("task_id", "summary"), "'task_id': rename it to 'id'"),
    (("id", "answer"), "'answer': rename it to 'predicted'"),
])
def test_a_predictions_file_with_other_field_names_is_told_the_rename(tmp_path, fields, told):
    mini = write_mini_dataset(tmp_path / "mini")
    ids = [json.loads(line)["id"] for line in (mini / "tasks.jsonl").read_text().splitlines()]
    theirs = tmp_path / "theirs.jsonl"
    theirs.write_text("".join(json.dumps(dict(zip(fields, (i, "revenue rose."), strict=True)))
                              + "\n" for i in ids))
    bad = run_cli(tmp_path, "system=external", f"system.predictions={theirs}",
                  f"dataset.root={mini}", sweep=False)
    assert bad.returncode != 0 and told in bad.stderr
    assert all_runs(tmp_path) == []
