"""A Claude sweep end to end: CLI -> real SDK -> fake Messages API -> MLflow.

Exact cost from usage, rate-limit answers retried, a re-run served by the response cache
with no HTTP request at all, the API key nowhere in the store, artifacts or logs, and
citations (the fake cites chunks when the prompt asks) scored per claim.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from arag.citations import strip_citations
from tests import forked
from tests.anthropic_fake import UNCITED, FakeAnthropic, agent_policy, error, text_reply
from tests.conftest import ROOT, all_runs, client_for, store_overrides
from tests.sweep_checks import (
    assert_rerun_was_free,
    assert_secret_nowhere,
    judge_prompt,
    reported_spend,
)

pytestmark = pytest.mark.slow
MARKER = "sk-ant-MARKER-7f3a9c-never-log-me"
HAIKU = {"input_tokens": 1.0, "output_tokens": 5.0, "cache_read_input_tokens": 0.10,
         "cache_creation_input_tokens": 1.25}


def sweep(tmp, url, *extra):
    env = {**os.environ, "ANTHROPIC_API_KEY": MARKER}
    cmd = [sys.executable, "run.py", "-m", "system=arag,naive,stuffing", "dataset=sample",
           "dataset.limit=3", "model=claude-haiku-4-5", f"model.base_url={url}",
           "model.max_retries=3", f"hydra.sweep.dir={tmp}/multirun", *extra,
           *store_overrides(tmp)]
    return forked.run(cmd, cwd=ROOT, env=env, timeout=600)


def answers_and_judges(request: dict, n: int):
    """The agent's replies, a readable reply to each G-Eval prompt, "Winner: A" to each
    pairwise one."""
    prompt = request["messages"][-1]["content"]
    if isinstance(prompt, str) and not request.get("tools"):
        if "Summary A:" in prompt:
            return text_reply("Comparing both.\nWinner: A", request)
        if judge_prompt(request):
            return text_reply(judge_prompt(request), request)
    return POLICY(request, n)


POLICY = agent_policy(cite=True)


@pytest.fixture(scope="module")
def claude_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("claude")
    with FakeAnthropic(answers_and_judges) as fake:
        fake.queue = [error(429, "rate_limit_error", "slow down", {"retry-after": "0"})]
        first = sweep(tmp, fake.url)
        n_first = len(fake.requests)
        usages = list(fake.usages)
        again = sweep(tmp, fake.url, "runner.rerun=true")
        n_again = len(fake.requests) - n_first
        # the same answers judged, pairwise too: the systems' answers come from the cache
        judged = sweep(tmp, fake.url, "judge=claude-haiku-4-5", f"judge.base_url={fake.url}",
                       "judge.pairwise=true", "metrics.scorers=[rouge,geval]")
        judged_usages = list(fake.usages[len(usages):])
    return tmp, first, again, usages, n_first, n_again, judged, judged_usages


def test_claude_sweep_finishes_with_exact_cost(claude_sweep):
    tmp, first, _, usages, n_first, *_ = claude_sweep
    assert first.returncode == 0, first.stderr[-3000:]
    children = [r for r in all_runs(tmp) if r.data.tags.get("system")
                and r.data.tags.get("mlflow.parentRunId")]
    first_children = sorted(children, key=lambda r: r.info.start_time)[:3]
    assert sorted(r.data.tags["system"] for r in first_children) == ["arag", "naive", "stuffing"]
    assert all(r.info.status == "FINISHED" for r in first_children)
    assert all(r.data.metrics["n_errors"] == 0 for r in first_children)
    expected = sum(sum(u[k] * p for k, p in HAIKU.items()) for u in usages) / 1e6
    logged = sum(r.data.metrics["cost_usd_total"] for r in first_children)
    assert logged == pytest.approx(expected, rel=1e-9)
    assert n_first == len(usages) + 1  # every answered call, plus the one 429 retried
    assert "retry 1/3" in first.stderr


def test_rerun_is_served_by_the_response_cache_without_any_request(claude_sweep):
    tmp, _, again, _, _, n_again, *_ = claude_sweep
    assert_rerun_was_free(tmp, again, n_again)


def _paid(usages: list[dict]) -> float:
    return sum(sum(u.get(k, 0) * p for k, p in HAIKU.items()) for u in usages) / 1e6


def test_each_sweeps_new_spend_is_what_the_server_served_it_and_nothing_twice(claude_sweep):
    """Reconciled with the fake server's request log: the first sweep's new spend is every
    reply it was served; the cached re-run paid nothing new and shows what its cached
    replies first cost as reused; the judged re-run's new spend is its judge calls alone."""
    tmp, first, again, usages, _, _, judged, judged_usages = claude_sweep
    assert judged.returncode == 0, judged.stderr[-3000:]
    assert judged_usages  # the judge and the pairwise judge were asked
    reports = [reported_spend(tmp, i) for i in range(3)]
    assert reports[0]["new"] == pytest.approx(_paid(usages), abs=6e-5)
    assert reports[0]["earlier"] == 0.0
    assert reports[1]["new"] == 0.0  # no request was sent: nothing new was paid
    assert reports[1]["reused"] == pytest.approx(_paid(usages), abs=6e-5)
    assert reports[2]["new"] == pytest.approx(_paid(judged_usages), abs=6e-5)
    # summed over the sweeps, "new" is the request log's total: nothing counted twice
    assert sum(r["new"] for r in reports) == pytest.approx(_paid(usages + judged_usages),
                                                           abs=2e-4)


def test_the_api_key_appears_nowhere(claude_sweep):
    tmp, first, again, *_, judged, _ = claude_sweep
    assert_secret_nowhere(tmp, MARKER, first, again, judged)


def test_citations_are_scored_per_claim_and_stripped_before_rouge(claude_sweep):
    from rouge_score import rouge_scorer

    tmp, first, *_ = claude_sweep
    assert first.returncode == 0, first.stderr[-3000:]
    runs = {r.data.tags["system"]: r for r in sorted(
        (r for r in all_runs(tmp) if r.data.tags.get("mlflow.parentRunId")),
        key=lambda r: r.info.start_time)[:3]}
    client = client_for(tmp)
    rouge = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    for system in ("arag", "naive"):  # their prompts show chunk ids and ask for citations
        metrics = runs[system].data.metrics
        assert metrics["citation_precision_mean"] == 1.0  # each cites the chunk it quotes
        assert 0 < metrics["citation_coverage_mean"] < 1  # the last claim cites nothing
        folder = tmp / system
        records = [json.loads(line) for line in Path(client.download_artifacts(
            runs[system].info.run_id, "predictions.eval.jsonl", str(folder))).read_text()
            .splitlines()]
        predictions = {p["id"]: p for p in (json.loads(line) for line in Path(
            client.download_artifacts(runs[system].info.run_id, "predictions.jsonl",
                                      str(folder))).read_text().splitlines())}
        for r in records:
            *cited, last = r["citations"]
            assert cited and all(c["valid"] == c["cited"] and len(c["cited"]) == 1
                                 and c["supported"] is True and c["checked_by"] == "figures"
                                 for c in cited)
            assert (last["claim"], last["cited"], last["supported"]) == (UNCITED, [], None)
            assert r["citation_coverage"] == len(cited) / (len(cited) + 1)
            # every chunk cited was in the prompt; ROUGE read the answer without markers
            pred = predictions[r["id"]]
            assert {c["cited"][0] for c in cited} <= set(pred["context_chunk_ids"])
            assert "[c:" in pred["predicted"]
            clean = rouge.score(pred["ground_truth"], strip_citations(pred["predicted"]))
            raw = rouge.score(pred["ground_truth"], pred["predicted"])
            assert r["rouge1_f1"] == pytest.approx(clean["rouge1"].fmeasure)
            assert r["rouge1_f1"] != pytest.approx(raw["rouge1"].fmeasure)
        # the eval table shows which chunk backs which claim
        table = json.loads(Path(client.download_artifacts(
            runs[system].info.run_id, "eval_table.json", str(folder))).read_text())
        column = table["data"][0][table["columns"].index("citations")]
        assert " (backed)" in column and f"{UNCITED} <- no valid citation" in column
    stuffing = runs["stuffing"].data.metrics  # whole documents, no chunk ids: not asked
    assert "citation_coverage_mean" not in stuffing and stuffing["n_errors"] == 0


def test_a_loop_budget_sweep_prices_every_budget_without_the_response_cache(tmp_path):
    """In a max_loops sweep later jobs reuse earlier jobs' cached calls (same conversation
    prefix): what a task costs at each budget is still its full price, actual spend beside
    it, and the curve's cost is on its own axis."""
    env = {**os.environ, "ANTHROPIC_API_KEY": MARKER}
    with FakeAnthropic(agent_policy()) as fake:
        cmd = [sys.executable, "run.py", "-m", "system=arag", "dataset=sample",
               "dataset.limit=2", "max_loops=1,2,3", "model=claude-haiku-4-5",
               f"model.base_url={fake.url}", "runner.concurrency=1",
               f"hydra.sweep.dir={tmp_path}/multirun", *store_overrides(tmp_path)]
        done = forked.run(cmd, cwd=ROOT, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    client = client_for(tmp_path)
    parent = next(r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent")
    children = {r.data.tags["run_label"]: r for r in all_runs(tmp_path)
                if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert len(children) == 3
    for name, child in children.items():
        m = child.data.metrics
        assert m["cost_usd_uncached_per_task"] > 0, name
        label = name.replace("=", ":")
        assert parent.data.metrics[f"{label}/cost_usd_uncached_per_task"] == pytest.approx(
            m["cost_usd_uncached_per_task"])
    report = Path(client.download_artifacts(parent.info.run_id, "report.md",
                                            str(tmp_path / "dl"))).read_text()
    curve = report.split("## Retrieval and the loop budget", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in curve.splitlines() if line.startswith("| 3 |")]
    assert rows and float(rows[0][5].strip().lstrip("$")) > 0  # cost / task at the largest budget: not $0
    assert "loop_budget_curve.png" in {a.path.split("/")[-1] for a in
                                       client.list_artifacts(parent.info.run_id, "plots")}
