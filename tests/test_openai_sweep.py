"""An OpenAI-compatible sweep end to end: CLI -> real ``openai`` SDK -> fake chat-completions
server -> MLflow, as agent and as judge.

``system=arag,naive,stuffing`` with ``model=gpt-4o-mini`` (pointed at the fake), judged by
a "local" model (``judge=openai-compatible``, no key) with ``gpt-4o-mini`` on the panel:
exact tokens and cost from the replies' usage and the YAML prices, a 429 retried, traces
and retrieval metrics logged, a re-run served by the response cache with no request at
all, and the key nowhere in the store, artifacts, runs dir, caches or logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forked
from tests.conftest import ROOT, all_runs, client_for, store_overrides
from tests.openai_fake import (
    VLLM_NO_TOOLS,
    FakeOpenAI,
    agent_policy,
    answers_without_tools,
    error,
    text_reply,
)
from tests.sweep_checks import assert_rerun_was_free, assert_secret_nowhere, judge_prompt

pytestmark = pytest.mark.slow
MARKER = "sk-proj-MARKER-5b1e0d-never-log-me"
JUDGE = "judge-llama"  # the local judge's served model
GPT = {"input": 0.15, "cached": 0.075, "output": 0.60}  # conf/model/gpt-4o-mini.yaml

def handler(request: dict, n: int) -> dict:
    reply = judge_prompt(request)
    return text_reply(reply, request) if reply else agent_policy()(request, n)


def cost(usage: dict) -> float:
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    return ((usage["prompt_tokens"] - cached) * GPT["input"] + cached * GPT["cached"]
            + usage["completion_tokens"] * GPT["output"]) / 1e6


def sweep(tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_API_KEY": MARKER}
    cmd = [sys.executable, "run.py", "-m", "system=arag,naive,stuffing", "dataset=sample",
           "dataset.limit=3", "model=gpt-4o-mini", f"model.base_url={url}",
           "model.max_retries=3", "judge=openai-compatible", f"judge.name={JUDGE}",
           f"judge.base_url={url}", "judge.panel=[gpt-4o-mini]",
           "metrics.scorers=[retrieval,geval]", f"hydra.sweep.dir={tmp}/multirun", *extra,
           *store_overrides(tmp)]
    return forked.run(cmd, cwd=ROOT, env=env, timeout=600)


@pytest.fixture(scope="module")
def openai_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("openai")
    with FakeOpenAI(handler, min_cache_tokens=256) as fake:
        fake.queue = [error(429, "Rate limit reached", "requests", {"retry-after": "0"})]
        first = sweep(tmp, fake.url)
        n_first = len(fake.requests)
        replies = list(fake.replies)
        again = sweep(tmp, fake.url, "runner.rerun=true")
        n_again = len(fake.requests) - n_first
    return tmp, first, again, replies, n_first, n_again


def children(tmp: Path) -> dict[str, object]:
    runs = sorted((r for r in all_runs(tmp) if r.data.tags.get("mlflow.parentRunId")),
                  key=lambda r: r.info.start_time)
    return {r.data.tags["system"]: r for r in runs[:3]}


def test_the_sweep_finishes_with_exact_tokens_and_cost(openai_sweep):
    tmp, first, _, replies, n_first, _ = openai_sweep
    assert first.returncode == 0, first.stderr[-3000:]
    runs = children(tmp)
    assert sorted(runs) == ["arag", "naive", "stuffing"]
    assert all(r.info.status == "FINISHED" and r.data.metrics["n_errors"] == 0
               for r in runs.values())
    assert n_first == len(replies) + 1  # every answered call, plus the one 429 retried
    assert "retry 1/3" in first.stderr
    systems = [u for req, u in replies if req["model"] == "gpt-4o-mini" and not judge_prompt(req)]
    assert any(u["prompt_tokens_details"]["cached_tokens"] for u in systems)
    logged = sum(r.data.metrics["cost_usd_total"] for r in runs.values())
    assert logged == pytest.approx(sum(map(cost, systems)), rel=1e-9)
    client = client_for(tmp)
    predictions = []
    for system, run in runs.items():
        path = client.download_artifacts(run.info.run_id, "predictions.jsonl", str(tmp / system))
        predictions += [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert sum(p["input_tokens"] + p["cache_read_input_tokens"] for p in predictions) == sum(
        u["prompt_tokens"] for u in systems)
    assert sum(p["output_tokens"] for p in predictions) == sum(
        u["completion_tokens"] for u in systems)
    assert {p["model"] for p in predictions} == {"gpt-4o-mini"}


def test_traces_and_retrieval_metrics_are_logged(openai_sweep):
    import mlflow

    tmp, first, *_ = openai_sweep
    assert first.returncode == 0, first.stderr[-3000:]
    mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
    runs = children(tmp)
    for system, run in runs.items():
        traces = mlflow.search_traces(locations=[run.info.experiment_id],
                                      run_id=run.info.run_id, return_type="list")
        assert len(traces) == run.data.metrics["n_tasks"] == 3
        kinds = {s.span_type for s in traces[0].data.spans}
        assert "CHAT_MODEL" in kinds and ("TOOL" in kinds) == (system == "arag")
    for system in ("arag", "naive"):
        metrics = runs[system].data.metrics
        assert 0 < metrics["retrieval_recall_mean"] <= 1
        assert 0 < metrics["retrieval_precision_mean"] <= 1


def test_the_local_judge_and_the_openai_panel_judge(openai_sweep):
    tmp, first, _, replies, *_ = openai_sweep
    assert first.returncode == 0, first.stderr[-3000:]
    runs = children(tmp)
    judged = [req["model"] for req, _ in replies if judge_prompt(req)]
    assert JUDGE in judged and "gpt-4o-mini" in judged
    panel = [u for req, u in replies if req["model"] == "gpt-4o-mini" and judge_prompt(req)]
    for run in runs.values():
        metrics = run.data.metrics
        assert metrics["geval_faithfulness_mean"] == metrics["geval_coverage_mean"] == 4.0
        assert metrics["panel_gpt-4o-mini_judge_calls"] > 0
        assert run.data.params["judge.model_id"] == JUDGE
    # the local judge is free (prices 0); the panel's cost is its replies' usage at its prices
    total = sum(r.data.metrics["panel_gpt-4o-mini_judge_cost_usd_total"] for r in runs.values())
    assert total == pytest.approx(sum(map(cost, panel)), rel=1e-9) and total > 0
    assert sum(r.data.metrics["judge_cost_usd_total"] for r in runs.values()) == \
        pytest.approx(total, rel=1e-9)


def test_a_rerun_is_served_by_the_response_cache_without_any_request(openai_sweep):
    tmp, _, again, _, _, n_again = openai_sweep
    assert_rerun_was_free(tmp, again, n_again)


def test_the_api_key_appears_nowhere(openai_sweep):
    tmp, first, again, *_ = openai_sweep
    assert (tmp / "cache" / "responses").is_dir() and (tmp / "runs").is_dir()
    assert_secret_nowhere(tmp, MARKER, first, again)


def local_sweep(tmp: Path, url: str, served: str) -> subprocess.CompletedProcess:
    """``system=arag,naive`` on two sample tasks with a local model (no key) at ``url``."""
    cmd = [sys.executable, "run.py", "-m", "system=arag,naive", "dataset=sample",
           "dataset.limit=2", "model=openai-compatible", f"model.name={served}",
           f"model.base_url={url}", "metrics.scorers=[retrieval]",
           f"hydra.sweep.dir={tmp}/multirun", *store_overrides(tmp)]
    return forked.run(cmd, cwd=ROOT, timeout=600)


def test_a_server_without_tools_fails_the_agent_run_with_the_fix_and_the_sweep_goes_on(
        tmp_path):
    with FakeOpenAI(no_tools=VLLM_NO_TOOLS) as fake:
        result = local_sweep(tmp_path, fake.url, "llama3")
    assert result.returncode != 0
    assert "tools_unsupported x2" in result.stderr
    assert "enable tool calling on the model's server (docs/models.md)" in result.stderr
    runs = {r.data.tags["system"]: r for r in all_runs(tmp_path) if r.data.tags.get("system")}
    assert runs["arag"].info.status == "FAILED" and runs["naive"].info.status == "FINISHED"
    assert runs["naive"].data.metrics["n_errors"] == 0


def test_a_model_that_never_calls_tools_finishes_and_the_sweep_says_the_agent_is_void(tmp_path):
    """The server takes the tool definitions; the model answers every task in text. The
    sweep finishes (some tasks need no tool), and the agent's run, the log, the sweep
    report and the console all say its comparison is void."""
    with FakeOpenAI(answers_without_tools) as fake:
        result = local_sweep(tmp_path, fake.url, "llama3-no-tools")
    assert result.returncode == 0, result.stderr[-3000:]
    runs = {r.data.tags["system"]: r for r in all_runs(tmp_path) if r.data.tags.get("system")}
    arag, naive = runs["arag"], runs["naive"]
    assert arag.info.status == naive.info.status == "FINISHED"
    assert arag.data.metrics["tasks_without_tool_call"] == 2
    assert arag.data.metrics["tasks_without_tool_call_share"] == 1.0
    assert "agentic comparison is void" in arag.data.tags["tasks_without_tool_call"]
    assert "tasks_without_tool_call" not in naive.data.metrics | naive.data.tags
    assert arag.data.params["temperature_sent"] == "0"
    assert "arag: the model called no tool on any of its 2 answered tasks" in result.stderr
    parent = next(r for r in all_runs(tmp_path) if r.data.tags.get("role") == "sweep_parent")
    report = Path(client_for(tmp_path).download_artifacts(
        parent.info.run_id, "report.md", str(tmp_path / "dl"))).read_text()
    banner = report.split("Runs:", 1)[0]
    assert "`arag`: the model called no tool on any of its 2 answered tasks" in banner
    assert "**the agentic comparison is void for this run**" in banner
    caveats = result.stdout.split("\nrun ", 1)[0]  # the console's caveats, above the table
    assert "! arag called no tool: closed-book, its agentic comparison is void" in caveats
