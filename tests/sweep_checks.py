"""Checks every provider's end-to-end sweep makes (tests/test_claude_sweep.py,
tests/test_openai_sweep.py): a re-run served by the response cache alone, and a key that
appears nowhere; and a judge whose every reply the scorers can read."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import all_runs

# a readable reply to each kind of judge prompt: none is dropped from the response cache
JUDGE_REPLIES = {"Write the evaluation steps": "1. Check each figure.\n2. Score.",
                 "Assign the error codes": "Codes: H", "numerical claim": "Claims: none",
                 "'Supported: yes'": "Supported: yes", "Predicted summary:": "Final score: 4"}


def judge_prompt(request: dict) -> str | None:
    """The judge's reply to a judge request, None for a system's request."""
    prompt = request["messages"][-1]["content"]
    if request.get("tools") or not isinstance(prompt, str):
        return None
    return next((reply for cue, reply in JUDGE_REPLIES.items() if cue in prompt), None)


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


def reported_spend(tmp: Path, nth_parent: int) -> dict[str, float]:
    """The "Total spent" line of the ``nth_parent`` sweep run's report.md (by start time):
    what it calls new, earlier and reused from the response cache (0 where not said)."""
    from tests.conftest import client_for

    parents = sorted((r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent"),
                     key=lambda r: r.info.start_time)
    run_id = parents[nth_parent].info.run_id
    folder = tmp / f"report-{run_id}"
    folder.mkdir(exist_ok=True)
    text = Path(client_for(tmp).download_artifacts(run_id, "report.md", str(folder))).read_text()
    line = next(x for x in text.splitlines() if x.startswith("Total spent:"))
    found = {name: re.search(pattern, line) for name, pattern in (
        ("new", r"Total spent: \$([\d.]+) new"), ("earlier", r"earlier: \$([\d.]+)"),
        ("reused", r"reused from the response cache: \$([\d.]+)"))}
    return {name: float(m.group(1)) if m else 0.0 for name, m in found.items()}
