"""A verdict to trust, end to end: one judged sweep over HTTP where stuffing skips tasks.

``system=arag,naive,stuffing dataset=sample`` with ``model.context_limit`` lowered so that
stuffing skips the longer half of the calls, judged by ``judge=claude-haiku-4-5
judge.samples=3 judge.panel=[claude-sonnet-4-6]`` against the fake Messages API. The report
must compare only on the tasks every run answered; the taxonomy request must define P and
IC as the plan does; the run must log factual consistency, ROUGE-Lsum, the judge's spread
and the panel's agreement; a second identical sweep must make no judge call; and an
outside script must recompute the retrieval means from ``predictions.eval.jsonl`` and the
dataset alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests import forked
from tests.anthropic_fake import FakeAnthropic, text_reply
from tests.conftest import ROOT, all_runs, client_for, compose_cfg, store_overrides

pytestmark = pytest.mark.slow
SAMPLE = ROOT / "data" / "sample"


class Judges:
    """Haiku varies between samples of one request (as a sampled LLM does); Sonnet agrees
    with Haiku's typical score up to one point."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def __call__(self, request: dict, n: int) -> dict:
        prompt = request["messages"][-1]["content"]
        if "Write the evaluation steps" in prompt:
            return text_reply("1. Check each figure.\n2. Score.", request)
        if "Assign the error codes" in prompt:
            return text_reply("Codes: P, O", request)
        predicted = prompt.split("Predicted summary:\n", 1)[1].split("\n\n", 1)[0]
        if "numerical claim" in prompt:
            lines = [line for line in predicted.splitlines() if re.search(r"\d", line)]
            verdicts = ["verified"] * len(lines)
            if verdicts:
                verdicts[-1] = "unsupported"
            return text_reply("\n".join(f"Claim: {line} | Verdict: {v}"
                                        for line, v in zip(lines, verdicts, strict=True))
                              or "Claims: none", request)
        dim = "faithfulness" if "Faithfulness (1-5)" in prompt else "coverage"
        h = int(hashlib.sha256(f"{dim}:{predicted}".encode()).hexdigest(), 16)
        score = 1 + h % 5
        if request["model"].startswith("claude-haiku"):
            self.seen[f"{dim}:{predicted}"] += 1
            score += (0, 1, -1)[self.seen[f"{dim}:{predicted}"] % 3]
        else:
            score -= h // 5 % 2
        return text_reply(f"Reasoning.\nFinal score: {min(5, max(1, score))}", request)


def context_limit_skipping_half() -> int:
    """A model.context_limit that stuffing's longer half of the sample calls exceeds,
    computed as stuffing counts its prompt (arag.systems.builtin.Stuffing)."""
    from arag.agent import system_prompt, task_prompt
    from arag.llm.offline import OfflineModel
    from runners.job import prepare
    from runners.settings import read

    cfg = compose_cfg(["dataset=sample"])
    dataset = prepare(read(cfg), call_models=False).dataset
    needed = []
    for task in dataset.tasks:
        docs = [dataset.corpus.documents[d] for d in task.doc_ids]
        context = "\n\n".join(f'<document id="{d.doc_id}">\n{d.header}\n{d.text}\n</document>'
                              for d in docs)
        prompt = task_prompt(task, "earnings_call", cfg.target_length, context)
        needed.append(OfflineModel().count_tokens(system_prompt(task.task_type, False) + prompt))
    assert len(set(needed)) == len(needed), "the sample calls need distinct prompt lengths"
    return int(np.median(needed)) + cfg.system.max_tokens


def sweep(tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    cmd = [sys.executable, "run.py", "-m", "system=arag,naive,stuffing", "dataset=sample",
           f"model.context_limit={context_limit_skipping_half()}", "judge=claude-haiku-4-5",
           f"judge.base_url={url}", "judge.retry_base_delay_s=0.01", "judge.samples=3",
           "judge.panel=[claude-sonnet-4-6]", *store_overrides(tmp),
           f"hydra.sweep.dir={tmp}/multirun/{len(list(tmp.glob('multirun/*')))}",
           f"hydra.run.dir={tmp}/out", *extra]
    return forked.run(cmd, cwd=ROOT, env=env, timeout=900)


def recompute_retrieval(eval_path: Path, tasks_path: Path) -> tuple[float, float]:
    """What an outside script does: retrieval recall and precision means from the eval
    records and the dataset's tasks, checking the stored gold against the dataset."""
    tasks = {t["id"]: t for t in map(json.loads, tasks_path.read_text().splitlines())}
    recalls, precisions = [], []
    for r in map(json.loads, eval_path.read_text().splitlines()):
        if r["error"] or r["skipped"] or not r["gold_chunk_ids"]:
            continue
        assert r["gold_lines"] == tasks[r["id"]]["gold_lines"]
        for chunk_id in r["gold_chunk_ids"]:  # <doc>#L<first>-<last> holds a gold line
            doc, span = chunk_id.rsplit("#L", 1)
            first, last = map(int, span.split("-"))
            assert any(first <= line <= last for line in r["gold_lines"][doc])
        read, gold = set(r["retrieved_chunk_ids"]), set(r["gold_chunk_ids"])
        recalls.append(len(read & gold) / len(gold))
        if read:
            precisions.append(len(read & gold) / len(read))
    return float(np.mean(recalls)), float(np.mean(precisions))


def key_finding_pairs(report: str) -> list[tuple[str, str, int, float, float]]:
    """Each comparison of the key finding: the two runs, n and their means."""
    finding = report.split("## Key finding\n", 1)[1].split("\n## ", 1)[0]
    return [(a, b, int(n), float(x), float(y)) for a, b, n, x, y in re.findall(
        r"\*\*(\w+)\*\* vs \*\*(\w+)\*\* \(n=(\d+)[^\n]*?\): (\d\.\d{3}) vs (\d\.\d{3})", finding)]


def test_judged_sweep_with_skipped_tasks_gives_a_verdict_on_common_tasks(tmp_path):
    with FakeAnthropic(Judges()) as fake:
        first = sweep(tmp_path, fake.url)
        assert first.returncode == 0, first.stderr[-3000:]
        client = client_for(tmp_path)
        runs = {r.data.tags["system"]: r for r in all_runs(tmp_path)
                if r.data.tags.get("system")}
        answered = {name: int(r.data.metrics["n_answered"]) for name, r in runs.items()}
        assert 0 < answered["stuffing"] < answered["naive"] == answered["arag"] == 6
        records = {}
        for name, run in runs.items():
            m = run.data.metrics
            for key in ("factual_consistency_mean", "rougeLsum_f1_mean",
                        "geval_coverage_judge_sd_mean", "judge_agreement_coverage",
                        "judge_agreement_coverage_ci_low"):
                assert key in m, (name, key)
            assert m["geval_coverage_judge_sd_mean"] > 0 and -1 <= m[
                "judge_agreement_coverage"] <= 1
            assert m["panel_claude-sonnet-4-6_judge_calls"] > 0
            params = run.data.params
            paths = json.loads(Path(client.download_artifacts(
                run.info.run_id, "paths.json", str(tmp_path / "paths" / name))).read_text())
            assert Path(paths["embedder_path_used"]).exists()  # machine paths: not params
            assert Path(paths["bertscore_model_path_used"]).exists()
            assert "embedder_path_used" not in params
            assert params["prompt_version"] and params["judge.samples"] == "3"
            folder = tmp_path / "dl" / name
            path = Path(client.download_artifacts(run.info.run_id, "predictions.eval.jsonl",
                                                  str(folder)))
            records[name] = {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}
            assert "prompts.json" in {a.path for a in client.list_artifacts(run.info.run_id)}
            if name != "stuffing":
                recall, precision = recompute_retrieval(path, SAMPLE / "tasks.jsonl")
                assert recall == pytest.approx(m["retrieval_recall_mean"], rel=1e-3)
                assert precision == pytest.approx(m["retrieval_precision_mean"], rel=1e-3)
        taxonomy = [r["json"]["messages"][-1]["content"] for r in fake.requests
                    if r["json"] and "Assign the error codes" in
                    str(r["json"].get("messages", ""))]
        assert taxonomy and all("P: premature termination" in t and "IC: incoherence" in t
                                for t in taxonomy)
        check_report(tmp_path, client, runs, records)
        calls_before = len(fake.requests)
        again = sweep(tmp_path, fake.url, "runner.rerun=true")
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(fake.requests) == calls_before  # every judge reply came from the cache
    reruns = [r for r in all_runs(tmp_path) if r.data.tags.get("system")
              and r.info.run_id not in {x.info.run_id for x in runs.values()}]
    assert len(reruns) == 3
    for run in reruns:
        m = run.data.metrics
        assert m["judge_calls"] == m["judge_cached_calls"] > 0
        assert m["judge_cost_usd_total"] == 0


def check_report(tmp: Path, client, runs: dict, records: dict) -> None:
    """The key finding's means use the tasks all three runs answered; each pair is tested on
    the tasks both its runs answered."""
    parent = next(r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent")
    report = Path(client.download_artifacts(parent.info.run_id, "report.md",
                                            str(tmp / "report"))).read_text()
    common = [t for t in records["arag"]
              if all(not recs[t]["skipped"] and not recs[t]["error"] for recs in records.values())]
    n = len(common)
    assert n == int(runs["stuffing"].data.metrics["n_answered"])
    assert f"**{n} tasks every compared run answered** (of 6 in the sweep)" in report
    assert "> **Caveats" in report and "synthetic" in report.split("Runs:", 1)[0]
    pairs = key_finding_pairs(report)
    # the agent against each baseline
    assert [(a, b) for a, b, *_ in pairs] == [("arag", "naive"), ("arag", "stuffing")], \
        report.split("## Key finding", 1)[1][:800]
    scored = [t for t in common if all(recs[t]["geval_coverage"] is not None
                                       for recs in records.values())]
    assert f"On the **{len(scored)} tasks**" in report
    for a, b, n, mean_a, mean_b in pairs:
        both = [t for t in records[a] if all(
            not records[r][t]["skipped"] and not records[r][t]["error"]
            and records[r][t]["geval_coverage"] is not None for r in (a, b))]
        assert n == len(both)
        for run, mean in ((a, mean_a), (b, mean_b)):
            expected = np.mean([records[run][t]["geval_coverage"] for t in both])
            assert mean == pytest.approx(expected, abs=5e-4)  # on the tasks both answered
    assert "minimum detectable difference" in report
    paired = report.split("## Paired comparisons", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in paired.splitlines()
            if line.startswith(("| arag vs", "| naive vs", "| stuffing vs"))]
    assert len(rows) == 3 and all(int(line.split("|")[2].split()[0]) <= 6 for line in rows)
    # a pair with stuffing: only the tasks stuffing answered
    assert all(int(line.split("|")[2].split()[0]) <= n for line in rows if "stuffing" in line)
    assert "Krippendorff's alpha" in report and "Where the judges disagree most" in report
    assert "| arag | 3 |" in report.split("## The judge", 1)[1]
    assert "## By document length" in report and "(n=0)" in report


def test_a_factual_consistency_unreadable_on_every_task_fails_the_run(tmp_path):
    """A judge whose claim-check replies can never be read: the run does not end FINISHED
    with exit 0 and a "–" in the report; it ends FAILED, non-zero, naming the field."""
    judges = Judges()

    def judge(request: dict, n: int) -> dict:
        if "numerical claim" in request["messages"][-1]["content"]:
            return text_reply("I looked at the numbers and they seem fine overall.", request)
        return judges(request, n)

    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    with FakeAnthropic(judge) as fake:
        done = forked.run(
            [sys.executable, "run.py", "system=naive", "dataset=sample", "dataset.limit=2",
            "judge=claude-haiku-4-5", f"judge.base_url={fake.url}", *store_overrides(tmp_path),
            f"hydra.run.dir={tmp_path}/out"],
            cwd=ROOT, env=env, timeout=900)
    assert done.returncode != 0, done.stdout[-2000:]
    assert "factual_consistency unreadable on 2 of 2 answered tasks" in done.stderr
    (run,) = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
    assert run.info.status == "FAILED"
    assert run.data.metrics["factual_consistency_parse_failures"] == 2
