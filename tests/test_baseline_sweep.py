"""Real sweeps against a baseline sweep on the sample (offline model, real MLflow store):
a change that lowers naive's ROUGE-2 fails the command with the regression exit status,
the same sweep against itself passes, a baseline on other data is refused, and every
figure of the comparison is recomputed from the two sweeps' artifacts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from metrics.aggregate import task_means
from metrics.stats import holm, paired_difference
from report.baseline_report import REFUSED_EXIT, REGRESSION_EXIT
from tests import forked
from tests.conftest import ROOT, client_for, run_cli, write_mini_dataset

pytestmark = pytest.mark.slow
RULE = "report.fail_on=[rouge2_f1:0.01]"


def parent_of(tmp: Path) -> str:
    folder = max((tmp / "multirun").iterdir(), key=lambda p: int(p.name))
    return str(json.loads((folder / "mlflow_parent.json").read_text())["run_id"])


def compare_cli(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return forked.run([sys.executable, "-m", "report", "compare", *args,
                      f"--tracking-uri=sqlite:///{tmp}/mlflow.db"], cwd=ROOT, timeout=300)


def run_report_cli(tmp: Path, run_id: str) -> subprocess.CompletedProcess:
    return forked.run([sys.executable, "-m", "report", run_id,
                      f"--tracking-uri=sqlite:///{tmp}/mlflow.db"], cwd=ROOT, timeout=300)


def artifact(client, run_id: str, name: str, tmp: Path) -> Path:
    (tmp / run_id).mkdir(parents=True, exist_ok=True)
    return Path(client.download_artifacts(run_id, name, str(tmp / run_id)))


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_a_regression_of_naive_fails_the_sweep_and_itself_passes(tmp_path):
    first = run_cli(tmp_path, "system=naive", "dataset=sample")
    assert first.returncode == 0, first.stderr[-2000:]
    baseline = parent_of(tmp_path)
    # naive reads one chunk instead of five: its summaries lose most reference facts
    worse = run_cli(tmp_path, "system=naive", "dataset=sample", "system.top_k=1",
                    f"report.baseline={baseline}", RULE)
    assert worse.returncode == REGRESSION_EXIT, worse.stderr[-3000:]
    assert "REGRESSION: naive is worse on rouge2_f1" in worse.stdout
    candidate = parent_of(tmp_path)
    client = client_for(tmp_path)
    tags = client.get_run(candidate).data.tags
    assert tags["regression"] == "true" and tags["baseline_run_id"] == baseline
    assert f"runs/{baseline})" in tags["mlflow.note.content"]
    report = artifact(client, candidate, "report.md", tmp_path).read_text()
    section = report.split("## Against the baseline", 1)[1]
    assert "- worse: `" in section and "baseline trace](#/experiments/" in section
    # the answer states the regression first, wherever it is read
    answer = report.split("**Answer:** ", 1)[1].split("\n", 1)[0]
    assert answer.startswith("Decided: **naive** regressed on `rouge2_f1` against baseline"), answer
    assert tags["mlflow.note.content"].startswith("**Decided: **naive** regressed on")
    assert any(line.startswith("Decided: naive regressed on rouge2_f1")
               for line in worse.stdout.splitlines()), worse.stdout[-3000:]
    assert report.count("## Against the baseline") == 1
    recompute(client, tmp_path, baseline, candidate)
    rebuilt = run_report_cli(tmp_path, candidate)  # a rebuild reads the stored comparison
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    again = artifact(client, candidate, "report.md", tmp_path / "rebuilt").read_text()
    assert again.split("**Answer:** ", 1)[1].startswith("Decided: **naive** regressed on")

    # a sweep held against itself is refused (it would pass, and write onto its own run);
    # the stored sweep keeps its own gate's outcome
    before = client.get_run(candidate).data.tags
    for extra in ((), ("--record",)):
        itself = compare_cli(tmp_path, candidate, candidate, "--fail-on", "rouge2_f1:0.01",
                             *extra)
        assert itself.returncode == REFUSED_EXIT, itself.stderr[-2000:]
        assert "is the candidate sweep itself" in itself.stdout + itself.stderr
        assert client.get_run(candidate).data.tags == before

    mini = write_mini_dataset(tmp_path / "mini")
    other = run_cli(tmp_path, "system=naive", "dataset=sample", f"dataset.root={mini}",
                    "dataset.name=mini", f"report.baseline={baseline}", RULE)
    assert other.returncode == REFUSED_EXIT, other.stderr[-2000:]
    assert "refused" in other.stdout and "dataset 'sample'" in other.stdout \
        and "'mini'" in other.stdout and "not comparable" in other.stdout


def recompute(client, tmp: Path, baseline: str, candidate: str) -> None:
    """Every figure of baseline_comparison.json from the child runs' artifacts alone."""
    comparison = json.loads(artifact(client, candidate, "baseline_comparison.json",
                                     tmp).read_text())
    assert comparison["decision"] == "regressed"
    cells, p_values = [], []
    for system in comparison["systems"]:
        base = jsonl(artifact(client, system["baseline_run_id"], "predictions.eval.jsonl", tmp))
        cand = jsonl(artifact(client, system["candidate_run_id"], "predictions.eval.jsonl", tmp))
        for key, cell in system["metrics"].items():
            b, c = task_means(base, key), task_means(cand, key)
            ids = [t for t in c if t in b]
            res = paired_difference([c[t] for t in ids], [b[t] for t in ids])
            assert res is not None and cell["n"] == len(ids)
            assert (cell["diff"], cell["ci_low"], cell["ci_high"], cell["p"]) == \
                pytest.approx((res.mean_diff, res.ci_low, res.ci_high, res.p))
            flipped = {t for t in ids if abs(c[t] - b[t]) > comparison["flip_share"] * (
                max([*b.values(), *c.values()]) - min([*b.values(), *c.values()]))}
            assert {f["task"] for f in cell["flipped"]} == flipped
            cells.append(cell)
            p_values.append(res.p)
        for key, cell in system["costs"].items():
            b, c = task_means(base, key), task_means(cand, key)
            assert cell["diff"] == pytest.approx(
                sum(c.values()) / len(c) - sum(b.values()) / len(b))
    assert [c["p_holm"] for c in cells] == pytest.approx(holm(p_values))
    [reg] = comparison["regressions"]
    rouge = comparison["systems"][0]["metrics"]["rouge2_f1"]
    assert reg["system"] == "naive" and reg["ci_high"] == rouge["ci_high"] < -0.01
