"""The sweep callback lets no error pass as a warning: Hydra would log a callback's
exception and run the jobs anyway (no parent run, no lock), or exit 0 after a sweep that
could not be closed. A failure at the start stops the sweep before any job with one line
and exit status 2; a failure at the end exits 1."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from runners import callbacks
from runners.callbacks import MLflowSweepCallback


def sweep_config(tmp_path):
    return OmegaConf.create({"runner": {"verbose": False, "dry_run": False},
                             "hydra": {"sweep": {"dir": str(tmp_path / "sweep")}},
                             "tracking": {"uri": "sqlite:///x.db"},
                             "report": {"decide_on": [], "baseline": None}})


def test_any_failure_at_the_start_stops_the_sweep_with_one_line(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(callbacks, "job_configs", lambda config: [])
    monkeypatch.setattr(callbacks, "check_jobs", lambda jobs, dry_run: [])
    monkeypatch.setattr(callbacks, "prediction_folders", lambda jobs: {})

    def unreachable(cfg):
        raise RuntimeError("store at http://user:secret@host:5000 unreachable\nmore detail")

    monkeypatch.setattr(callbacks.track, "connect", unreachable)
    callback = MLflowSweepCallback()
    with caplog.at_level(logging.ERROR, logger="runners.callbacks"), \
            pytest.raises(SystemExit) as stopped:
        callback.on_multirun_start(sweep_config(tmp_path))
    assert stopped.value.code == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert line.startswith("the sweep could not start, no job ran: RuntimeError: store at")
    assert "\n" not in line and "secret" not in line
    assert not callback.locks.files  # the sweep folder is free again


class Closing:
    """An MLflow client whose report works and whose closing of the parent fails."""

    def __init__(self, fail_close: bool = False):
        self.fail_close = fail_close
        self.tags: dict[str, str] = {}
        self.status: str | None = None

    def set_tag(self, run_id, key, value):
        self.tags[key] = value

    def get_run(self, run_id):
        return SimpleNamespace(data=SimpleNamespace(tags=dict(self.tags)))

    def set_terminated(self, run_id, status):
        if self.fail_close:
            raise ConnectionError("tracking server went away")
        self.status = status


def _ended(tmp_path, monkeypatch, client, report):
    monkeypatch.setattr(callbacks, "write_sweep_report", report)
    callback = MLflowSweepCallback()
    callback.parent, callback.client, callback.sweep_dir = {"run_id": "p1"}, client, tmp_path
    with pytest.raises(SystemExit) as ended:
        callback.on_multirun_end(sweep_config(tmp_path))
    return ended.value.code


def _no_report(client, parent, *options, **named):
    raise ValueError("plot failed")


def test_a_failure_while_closing_the_sweep_exits_non_zero(tmp_path, monkeypatch, caplog):
    client = Closing(fail_close=True)
    with caplog.at_level(logging.ERROR, logger="runners.callbacks"):
        code = _ended(tmp_path, monkeypatch, client, _no_report)
    assert code == 1
    assert "the sweep could not be closed: ConnectionError: tracking server went away" \
        in caplog.text


def test_a_report_that_could_not_be_written_exits_non_zero_naming_the_rebuild(
        tmp_path, monkeypatch, caplog):
    client = Closing()
    with caplog.at_level(logging.ERROR, logger="runners.callbacks"):
        code = _ended(tmp_path, monkeypatch, client, _no_report)
    assert code == 1 and client.status == "FAILED"  # until python -m report rebuilds it
    assert client.tags["report_error"] == "ValueError: plot failed"
    assert "python -m report p1" in caplog.text
    # the parent's Overview says what failed and the command that finishes it
    assert "plot failed" in client.tags["mlflow.note.content"]
    assert "python -m report p1" in client.tags["mlflow.note.content"]


def test_a_sweep_closed_well_raises_nothing(tmp_path, monkeypatch):
    client = Closing()
    monkeypatch.setattr(callbacks, "write_sweep_report",
                        lambda c, p, *options, **named: SimpleNamespace(rows=[]))
    monkeypatch.setattr(callbacks.overview, "publish", lambda c, r: None)
    monkeypatch.setattr(callbacks.console, "verdict", lambda r, uri: "verdict")
    callback = MLflowSweepCallback()
    callback.parent, callback.client, callback.sweep_dir = {"run_id": "p1"}, client, tmp_path
    callback.on_multirun_end(sweep_config(tmp_path))
    assert client.status == "FINISHED"


def test_a_dry_run_in_a_used_sweep_folder_totals_its_own_jobs_only(tmp_path, monkeypatch):
    from runners import dryrun

    monkeypatch.setattr(callbacks, "job_configs", lambda config: [])
    monkeypatch.setattr(callbacks, "check_jobs", lambda jobs, dry_run: [])
    config = sweep_config(tmp_path)
    config.runner.dry_run = True
    sweep_dir = tmp_path / "sweep"
    job = {"run": "naive", "calls": 2, "cost_usd": 0.5, "parts": {"system": 0.5}}
    sweep_dir.mkdir()
    dryrun.record(sweep_dir, job)  # an earlier dry run of the same sweep, same folder
    dryrun.record_answers(sweep_dir, "naive", SimpleNamespace(agentic=False, bound=False), [])
    MLflowSweepCallback().on_multirun_start(config)
    dryrun.record(sweep_dir, job)  # this dry run's one job
    assert dryrun.sweep_total(sweep_dir) == \
        "[dry run] sweep total: 2 calls, estimated cost $0.5000 (system $0.5000)"
    assert dryrun.recorded_answers(sweep_dir) == []
