"""``judge.pairwise=true`` end to end: offline systems, the real anthropic SDK over HTTP to a
fake judge with a hidden preference and a planted first-position bias."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

import pytest

from arag.citations import strip_citations
from tests import forked
from tests.anthropic_fake import FakeAnthropic, text_reply
from tests.conftest import ROOT, all_runs, client_for, store_overrides

pytestmark = pytest.mark.slow
BIAS = 0.25  # share of calls on which the judge names the summary shown first, unread
SUMMARIES = re.compile(r"Summary A:\n(.*?)\n\nSummary B:\n(.*?)\n\nCompare", re.DOTALL)


def _hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def decided(prompt: str) -> str:
    """What the fake judge answers: ``A`` on a planted share of calls, else the summary its
    hidden preference ranks higher (a hash of the text; the same text: a tie)."""
    first, second = SUMMARIES.search(prompt).groups()
    if _hash(prompt) % 100 < BIAS * 100:
        return "A"
    if first == second:
        return "tie"
    return "A" if _hash(first) > _hash(second) else "B"


def judge(request: dict, n: int) -> dict:
    prompt = request["messages"][-1]["content"]
    return text_reply(f"Both are close.\nWinner: {decided(prompt)}", request)


def cli(tmp: Path, url: str, *args: str):
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    cmd = [sys.executable, "run.py", "-m", "system=arag,naive,stuffing", "dataset=sample",
           "metrics.scorers=[rouge,length]", "judge=claude-haiku-4-5", "judge.pairwise=true",
           f"judge.base_url={url}", "judge.retry_base_delay_s=0.01", *args,
           *store_overrides(tmp), f"hydra.sweep.dir={tmp}/multirun", f"hydra.run.dir={tmp}/out"]
    return forked.run(cmd, cwd=ROOT, env=env, timeout=900)


def parents(tmp: Path) -> list:
    runs = [r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent"]
    return sorted(runs, key=lambda r: r.info.start_time)


def answers(client, tmp: Path) -> dict[str, dict[str, str]]:
    """run label -> task id -> the summary the judge was shown."""
    out = {}
    for run in [r for r in all_runs(tmp) if r.data.tags.get("system")]:
        path = client.download_artifacts(run.info.run_id, "predictions.jsonl",
                                         str(tmp / "dl" / run.info.run_id))
        out[run.data.tags["run_label"]] = {
            json.loads(x)["id"]: strip_citations(json.loads(x)["predicted"])
            for x in Path(path).read_text().splitlines()}
    return out


def expected(prompts: list[str], by_run: dict[str, dict[str, str]], a: str, b: str,
             dim: str) -> tuple[int, int, int, int]:
    """(wins of a, losses, position-inconsistent, tasks) as the fake judged the prompts it
    was sent: per task, the prompt showing a's summary first and the one showing b's."""
    asked = [p for p in prompts if f"\n{dim.capitalize()}: " in p]

    def said(task: str, first: str, second: str) -> str:
        shown = (by_run[first][task], by_run[second][task])
        verdict = decided(next(p for p in asked if SUMMARIES.search(p).groups() == shown
                               and (dim == "coverage" or task in p)))
        return "tie" if verdict == "tie" else first if verdict == "A" else second

    verdicts = [(said(t, a, b), said(t, b, a)) for t in by_run[a]]
    return (sum(x == y == a for x, y in verdicts), sum(x == y == b for x, y in verdicts),
            sum(x != y for x, y in verdicts), len(verdicts))


def test_pairwise_sweep_with_a_hidden_preference_and_a_planted_position_bias(tmp_path):
    with FakeAnthropic(judge) as fake:
        first = cli(tmp_path, fake.url)
        assert first.returncode == 0, first.stderr[-3000:]
        client = client_for(tmp_path)
        (parent,) = parents(tmp_path)
        metrics = parent.data.metrics
        prompts = [r["json"]["messages"][-1]["content"] for r in fake.requests if r["json"]]
        by_run = answers(client, tmp_path)
        n_tasks = len(by_run["arag"])
        # the agent against each baseline, each dimension, each task, in both orders (two
        # identical summaries make both orders one and the same request)
        asked = 2 * 3 * n_tasks * 2
        same = sum(by_run["arag"][t] == by_run[b][t] for b in ("naive", "stuffing")
                   for t in by_run["arag"])
        assert len(set(prompts)) == asked - 3 * same
        inconsistent = judged = 0
        for b in ("naive", "stuffing"):
            for dim in ("faithfulness", "coverage", "overall"):
                wins, losses, mixed, n = expected(prompts, by_run, "arag", b, dim)
                base = f"pairwise_{dim}_arag_vs_{b}"
                assert n == n_tasks == metrics[f"{base}_n_tasks"]
                ties = n - wins - losses  # a tie counts half a win each way
                assert metrics[f"{base}_win_rate"] == pytest.approx((wins + ties / 2) / n)
                assert metrics[f"{base}_loss_rate"] == pytest.approx((losses + ties / 2) / n)
                assert metrics[f"{base}_position_inconsistency"] == pytest.approx(mixed / n)
                inconsistent, judged = inconsistent + mixed, judged + n
        assert metrics["pairwise_position_inconsistency"] == pytest.approx(inconsistent / judged)
        assert abs(metrics["pairwise_position_inconsistency"] - BIAS) < 0.2
        assert metrics["pairwise_first_position_preference"] > 0.5
        assert metrics["pairwise_judge_calls"] == asked
        assert metrics["pairwise_judge_cost_usd_total"] > 0
        # three systems: ranked with CIs, every figure from the per-pair artifact
        folder = tmp_path / "parent"
        report = Path(client.download_artifacts(parent.info.run_id, "report.md",
                                                str(folder))).read_text()
        assert "## Pairwise judge" in report and "Bradley-Terry ranking on overall" in report
        # the preference in words as strong as its sign test ("beats" only at p < 0.05)
        stated = re.search(r"Pairwise judge \(overall\), arag vs naive: (no preference|\w+ "
                           r"beats \w+|\w+ ahead of \w+, not significant)[^\n]*?sign test "
                           r"p=([0-9.e-]+)\)", report)
        assert stated is not None, report
        assert ("beats" in stated.group(1)) == (float(stated.group(2)) < 0.05)
        assert "of which the pairwise judge $" in report
        rows = [json.loads(x) for x in Path(client.download_artifacts(
            parent.info.run_id, "pairwise.jsonl", str(folder))).read_text().splitlines()]
        assert len(rows) == asked
        from metrics.pairwise import metrics_of, summarize

        recomputed = metrics_of(summarize(rows))
        assert {k: v for k, v in metrics.items() if k in recomputed} == pytest.approx(recomputed)
        assert any("_bt_arag_ci_low" in k for k in recomputed)
        compare = Path(client.download_artifacts(parent.info.run_id, "compare.html",
                                                 str(folder))).read_text()
        assert "judge, arag vs naive (overall)" in compare and "shown first:" in compare
        # the verdicts are assessments on both tasks' traces, with the replies as rationale
        import mlflow

        mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
        naive = next(r for r in all_runs(tmp_path) if r.data.tags.get("run_label") == "naive")
        traces = mlflow.search_traces(locations=[naive.info.experiment_id],
                                      run_id=naive.info.run_id, return_type="list")
        found = [a for t in traces for a in t.info.assessments
                 if a.name == "pairwise_overall_vs_arag"]
        assert len(found) == n_tasks and all("shown first" in a.rationale for a in found)

        # a re-run asks the judge nothing: every reply is in the response cache
        before = len(fake.requests)
        again = cli(tmp_path, fake.url, "runner.rerun=true")
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(fake.requests) == before
        rerun = parents(tmp_path)[-1].data.metrics
        assert rerun["pairwise_judge_cached_calls"] == rerun["pairwise_judge_calls"]
        assert rerun["pairwise_overall_arag_vs_naive_win_rate"] == \
            metrics["pairwise_overall_arag_vs_naive_win_rate"]


def test_the_dry_run_counts_the_pairwise_calls(tmp_path):
    dry = cli(tmp_path, "http://127.0.0.1:9", "runner.dry_run=true")
    assert dry.returncode == 0, dry.stderr[-3000:]
    # sample: 6 tasks x 2 pairs (the agent against each baseline) x 3 dimensions x 2 orders
    line = next(x for x in dry.stdout.splitlines() if x.startswith("[dry run] pairwise judge"))
    assert "72 calls to claude-haiku-4-5" in line, dry.stdout
    totals = dict(re.findall(r"\[dry run\] (.+?) total: (?:\d+ jobs, )?([\d,]+) calls",
                             dry.stdout))
    jobs = sum(int(n.replace(",", "")) for run, n in totals.items() if run != "sweep")
    assert len(totals) == 4  # each job's, and the sweep's
    assert int(totals["sweep"].replace(",", "")) == jobs + 72  # the sweep's total counts them
    assert not (tmp_path / "mlflow.db").exists()  # a dry run records nothing
