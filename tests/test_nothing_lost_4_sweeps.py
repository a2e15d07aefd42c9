"""Nothing lost, round four, end to end: a sweep killed while it writes its report (fixed and
sequential) gets the uninterrupted sweep's report from the same command: each run once,
spend once, the judge's included, and a sequential sweep's looks as they were at each look."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from tests import forked
from tests.anthropic_fake import FakeAnthropic, text_reply
from tests.conftest import ROOT, all_runs, client_for, store_overrides
from tests.sweep_checks import judge_prompt

pytestmark = pytest.mark.slow

# the process is killed mid-report: report.md and report.html logged, compare.html not yet
KILL_MID_REPORT = """
import os, runpy, signal, sys
from mlflow import MlflowClient

logged = MlflowClient.log_artifact

def log_artifact(self, run_id, local_path, artifact_path=None):
    if local_path.endswith("compare.html"):
        os.kill(os.getpid(), signal.SIGKILL)
    return logged(self, run_id, local_path, artifact_path)

MlflowClient.log_artifact = log_artifact
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""


def _judge(request: dict, n: int) -> dict:
    return text_reply(judge_prompt(request) or "not a judge request", request)


def _sweep(tmp: Path, url: str, sequential: bool) -> list[str]:
    rounds = ["runner.sequential=true", "runner.batch_size=2", "runner.max_tasks=4",
              "report.decide_on=[rouge1_f1]"] if sequential else ["dataset.limit=4"]
    return ["-m", "system=naive,stuffing", "metrics.scorers=[rouge,geval]",
            "judge=claude-haiku-4-5", f"judge.base_url={url}", "judge.retry_base_delay_s=0.01",
            *rounds, *store_overrides(tmp)]


def _parent_files(tmp: Path, sequential: bool) -> tuple[str, list[dict], str]:
    """The latest finished sweep run's report.md, its looks and its id."""
    client = client_for(tmp)
    parent = max((r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent"
                  and r.info.status == "FINISHED"), key=lambda r: r.info.start_time)
    folder = tmp / f"got-{parent.info.run_id}"
    report = Path(client.download_artifacts(parent.info.run_id, "report.md", str(folder)))
    looks = [json.loads(x) for x in Path(client.download_artifacts(
        parent.info.run_id, "sequential.jsonl", str(folder))).read_text().splitlines()] \
        if sequential else []
    return report.read_text(), looks, parent.info.run_id


def _journaled_judge_spend(tmp: Path) -> float:
    return sum(json.loads(line)["cost_usd"] for path in tmp.glob("runs/*/judge_spend.*.jsonl")
               for line in path.read_text().splitlines() if line.strip())


def _total(report: str) -> tuple[float, float]:
    line = next(x for x in report.splitlines() if x.startswith("Total spent:"))
    new = float(re.search(r"Total spent: \$([\d.]+) new", line).group(1))
    earlier = re.search(r"earlier: \$([\d.]+)", line)
    return new, float(earlier.group(1)) if earlier else 0.0


@pytest.mark.parametrize("sequential", [False, True], ids=["fixed", "sequential"])
def test_a_sweep_killed_mid_report_gets_the_uninterrupted_report(tmp_path, sequential):
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    with FakeAnthropic(_judge) as fake:
        done = forked.run([sys.executable, "run.py", *_sweep(whole, fake.url, sequential),
                           f"hydra.sweep.dir={whole}/multirun/0"], cwd=ROOT, env=env, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        dead = forked.run([sys.executable, "-c", KILL_MID_REPORT,
                           *_sweep(killed, fake.url, sequential),
                           f"hydra.sweep.dir={killed}/multirun/0"], cwd=ROOT, env=env, timeout=900)
        assert dead.returncode == -signal.SIGKILL, dead.stderr[-3000:]
        asked = len(fake.requests)
        again = forked.run([sys.executable, "run.py", *_sweep(killed, fake.url, sequential),
                            f"hydra.sweep.dir={killed}/multirun/1"], cwd=ROOT, env=env,
                           timeout=900)
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(fake.requests) == asked  # the rerun asks nothing again
    expected, expected_looks, _ = _parent_files(whole, sequential)
    got, looks, _ = _parent_files(killed, sequential)
    for report in (expected, got):  # each run once
        assert "Runs: 2 finished." in report
    paid = _journaled_judge_spend(whole)
    assert paid > 0 and _journaled_judge_spend(killed) == pytest.approx(paid, abs=1e-9)
    # spend once, the judge's whole spend in it, every round
    assert sum(_total(expected)) == pytest.approx(paid, abs=1e-4)
    assert sum(_total(got)) == pytest.approx(paid, abs=1e-4)
    assert f"The judge cost ${paid:.4f} in all" in expected
    if not sequential:
        return
    assert [look["tasks"] for look in looks] == [look["tasks"] for look in expected_looks]
    assert len(looks) >= 2
    for mine, theirs in zip(looks, expected_looks, strict=True):  # as they were at each look
        assert mine["spend_usd"] == pytest.approx(theirs["spend_usd"], abs=1e-9)
        assert mine["estimated_full_usd"] == pytest.approx(theirs["estimated_full_usd"], abs=1e-9)
        assert mine["stop"] == theirs["stop"] and mine["comparisons"] == theirs["comparisons"]
    spends = [look["spend_usd"] for look in expected_looks]
    assert spends == sorted(spends) and spends[0] < spends[-1]  # each look its own spend
    assert spends[-1] == pytest.approx(paid, abs=1e-9)  # the judge's in it (the systems: free)
    assert expected_looks[0]["estimated_full_usd"] == pytest.approx(
        spends[0] * expected_looks[0]["tasks_total"] / expected_looks[0]["tasks"])
