"""A single run (no ``-m``) killed while its report was written gets the report from the
next run of the same command; once it has one, a re-run says where it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.single_report import REPORT_TAG
from tests.conftest import all_runs, client_for, run_cli

pytestmark = pytest.mark.slow


def _report(run) -> Path:
    return Path(run.info.artifact_uri.removeprefix("file://")) / "report.html"


def test_a_single_run_killed_while_writing_its_report_gets_it_on_the_next_run(tmp_path):
    args = ("system=naive", "dataset=sample", "dataset.limit=1", "metrics.scorers=[rouge]")
    first = run_cli(tmp_path, *args, sweep=False)
    assert first.returncode == 0, first.stderr[-3000:]
    [run] = all_runs(tmp_path)
    assert run.data.tags[REPORT_TAG] == "true" and _report(run).exists()
    # what a kill while the report was written leaves: a FINISHED run without it
    client_for(tmp_path).delete_tag(run.info.run_id, REPORT_TAG)
    _report(run).unlink()
    again = run_cli(tmp_path, *args, sweep=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing to do" in again.stderr + again.stdout
    [rerun] = all_runs(tmp_path)  # the same run, not a new one
    assert rerun.info.run_id == run.info.run_id and rerun.data.tags[REPORT_TAG] == "true"
    assert _report(rerun).exists() and "report:" in again.stdout
    third = run_cli(tmp_path, *args, sweep=False)
    assert third.returncode == 0, third.stderr[-3000:]
    assert f"Nothing new: the verdict of run {run.info.run_id} is in its report." in third.stdout
