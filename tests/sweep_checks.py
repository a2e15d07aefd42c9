"""Checks every provider's end-to-end sweep makes (tests/test_claude_sweep.py,
tests/test_openai_sweep.py): a re-run served by the response cache alone, and a key that
appears nowhere."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import all_runs


def assert_rerun_was_free(tmp: Path, again: subprocess.CompletedProcess, n_requests: int,
                          n_jobs: int = 3) -> None:
    """The re-run finished with no request to the API: its runs cost nothing, though what
    they would have cost is kept."""
    assert again.returncode == 0, again.stderr[-3000:]
    assert n_requests == 0
    latest = sorted((r for r in all_runs(tmp) if r.data.tags.get("system")),
                    key=lambda r: r.info.start_time)[-n_jobs:]
    assert all(r.data.metrics["cost_usd_total"] == 0.0 for r in latest)
    assert all(r.data.metrics["cost_usd_uncached_total"] > 0 for r in latest)


def assert_secret_nowhere(tmp: Path, secret: str, *results: subprocess.CompletedProcess) -> None:
    """``secret`` is in no output of the commands, no file under ``tmp`` (store, artifacts,
    runs dir, caches, Hydra's logs) and no param or tag of any run."""
    assert all(secret not in r.stdout + r.stderr for r in results)
    leaks = [str(p) for p in tmp.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaks == []
    for run in all_runs(tmp):
        assert secret not in str(run.data.params) + str(run.data.tags)
