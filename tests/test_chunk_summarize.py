"""chunk_summarize(chunk_ids, focus): the optional fourth A-RAG tool. One model call per use,
made through the task's call log (costed, cached, traced inside the tool call); the
offline agent uses it when offered; the trace keeps the call nested through JSON and into
MLflow; the CLI command of the issue logs chunk_summarize spans."""

from __future__ import annotations

import json

import pytest

from arag.datasets import load_dataset
from arag.llm import Prices, make_model
from arag.llm.cache import CachedModel
from arag.llm.offline import OfflineModel
from arag.records import Prediction
from arag.retrieval import load_or_build_index
from arag.systems import SystemContext, make_system
from arag.tools.toolset import ToolError, Toolset
from arag.trace import ModelCall, ToolCall, model_calls
from tests.anthropic_fake import FakeAnthropic, text_reply, tool_reply
from tests.conftest import ROOT, all_runs, client_for, run_cli, write_mini_dataset

TOOLS = ["keyword_search", "semantic_search", "chunk_read", "chunk_summarize"]


@pytest.fixture
def world(make_cfg, tmp_path):
    root = write_mini_dataset(tmp_path / "mini", n_docs=1)
    cfg = make_cfg(f"dataset.root={root}")
    ds = load_dataset(cfg.dataset, ROOT)
    return ds, load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)


FREE = Prices(0, 0, 0, 0)


def arag(model, ds, index, prices=FREE):
    ctx = SystemContext(model=model, prices=prices, corpus=ds.corpus, index_loader=lambda: index,
                        style="earnings_call", target_length=50, max_loops=10, top_k=3,
                        scope="document", tools=TOOLS, max_tokens=512, temperature=0.0,
                        context_limit=200_000)
    return make_system("arag", "arag", ctx)


def test_the_offline_agent_summarizes_what_it_read_in_one_nested_call(world):
    ds, index = world
    pred = arag(OfflineModel(max_chunks_read=4), ds, index).predict(ds.tasks[0], "mini")
    assert pred.error is None
    (summary,) = [s for s in pred.trace if isinstance(s, ToolCall) and s.name == "chunk_summarize"]
    read = [c for s in pred.trace if isinstance(s, ToolCall) and s.name == "chunk_read"
            for c in s.result_chunk_ids]
    assert summary.arguments["chunk_ids"] == read and not summary.is_error
    assert summary.arguments["focus"] == ds.tasks[0].question
    (inner,) = summary.steps  # the summarizing call, inside the tool call
    assert isinstance(inner, ModelCall) and inner.tool_calls == []
    # it is the task's cost and usage, but not one of the agent's loops
    assert pred.input_tokens == sum(c.usage["input_tokens"] for c in model_calls(pred.trace))
    assert pred.loops == sum(isinstance(s, ModelCall) for s in pred.trace)
    assert inner.usage["input_tokens"] > 0
    # the trace, nested call included, survives predictions.jsonl
    back = Prediction.from_dict(json.loads(pred.to_json()))
    assert back.trace == pred.trace
    assert pred.context_chunk_ids == read  # summarized chunks had all been read first


def test_bad_ids_go_back_to_the_model_and_a_toolset_needs_a_summarizer(world):
    ds, index = world
    calls = []
    toolset = Toolset(index, list(ds.tasks[0].doc_ids), TOOLS,
                      summarize=lambda passages, focus, words: calls.append(passages) or "s")
    with pytest.raises(ToolError, match="none of the chunk ids exist"):
        toolset.call("chunk_summarize", {"chunk_ids": ["nope"], "focus": "revenue"})
    with pytest.raises(ToolError, match="missing required argument"):
        toolset.call("chunk_summarize", {"chunk_ids": ["nope"]})
    first = index.chunks[0].chunk_id
    result = toolset.call("chunk_summarize", {"chunk_ids": [first, "nope"], "focus": "revenue"})
    assert result.chunk_ids == [first] and "['nope'] do not exist" in result.text
    assert f'<chunk id="{first}">' in calls[0] and toolset.used == [first]
    with pytest.raises(ValueError, match="chunk_summarize needs a model call"):
        Toolset(index, None, TOOLS)


def summarizing_agent(request: dict, n: int) -> dict:
    """Search once, summarize the first two hits, answer; the summary call gets a summary."""
    if not request.get("tools"):
        return text_reply("revenue rose 8.0 percent to $452.0 million.", request)
    turns = [m for m in request["messages"] if m["role"] == "assistant"]
    if not turns:
        return tool_reply("semantic_search", {"query": "revenue", "top_k": 2}, request, n)
    if len(turns) == 1:
        ids = [line.split("Chunk ID: ")[1] for line in
               request["messages"][-1]["content"][0]["content"].splitlines()
               if line.startswith("Chunk ID: ")]
        return tool_reply("chunk_summarize", {"chunk_ids": ids, "focus": "revenue"}, request, n)
    return text_reply("q3 revenue rose 8.0 percent.", request)


def test_over_http_the_summary_call_is_costed_and_served_by_the_response_cache(
        make_cfg, world, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-summarize")
    ds, index = world
    with FakeAnthropic(summarizing_agent) as fake:
        cfg = make_cfg("model=claude-haiku-4-5", f"model.base_url={fake.url}")
        model = CachedModel(make_model(cfg.model), tmp_path / "c")
        pred = arag(model, ds, index, Prices.from_config(cfg.model)).predict(ds.tasks[0], "m")
        n_first = len(fake.requests)
        again = arag(model, ds, index, Prices.from_config(cfg.model)).predict(ds.tasks[0], "m")
        assert len(fake.requests) == n_first == 4  # search, summarize, its call, answer
    assert pred.error is None and pred.predicted == "q3 revenue rose 8.0 percent."
    summary_request = next(r["json"] for r in fake.requests if not r["json"].get("tools"))
    prompt = summary_request["messages"][0]["content"]
    assert "<question>revenue</question>" in prompt and prompt.count('<chunk id="') == 2
    (tool,) = [s for s in pred.trace if isinstance(s, ToolCall) and s.name == "chunk_summarize"]
    assert "$452.0 million" in next(  # the summary reached the agent as the tool's result
        m for m in fake.requests[-1]["json"]["messages"][-1]["content"]
        if m["type"] == "tool_result")["content"]
    costs = [c.cost_usd for c in model_calls(pred.trace)]
    assert len(costs) == 4 and tool.steps[0].cost_usd > 0
    assert pred.cost_usd == pytest.approx(sum(costs))
    assert again.cost_usd == 0 and all(c.cached for c in model_calls(again.trace))


@pytest.mark.slow
def test_the_cli_sweep_logs_chunk_summarize_spans_with_the_model_call_inside(tmp_path,
                                                                            shared_cache):
    done = run_cli(tmp_path, "system=arag", "dataset=sample", "dataset.limit=2",
                   "system.tools=[keyword_search,semantic_search,chunk_read,chunk_summarize]",
                   cache=shared_cache)
    assert done.returncode == 0, done.stderr[-3000:]
    import mlflow

    (run,) = [r for r in all_runs(tmp_path) if r.data.tags.get("system") == "arag"]
    mlflow.set_tracking_uri(client_for(tmp_path).tracking_uri)
    traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id,
                                  return_type="list")
    assert len(traces) == 2
    for trace in traces:
        spans = {s.span_id: s for s in trace.data.spans}
        (tool,) = [s for s in spans.values() if s.name == "chunk_summarize"]
        assert tool.span_type == "TOOL" and len(tool.outputs["chunk_ids"]) >= 1
        inner = [s for s in spans.values() if s.parent_id == tool.span_id]
        assert [s.span_type for s in inner] == ["CHAT_MODEL"]
    assert run.data.metrics["citation_coverage_mean"] == 1.0  # the offline model cites


def test_summarized_chunks_count_against_the_context_budget(world):
    ds, index = world
    toolset = Toolset(index, list(ds.tasks[0].doc_ids), TOOLS, read_budget=2,
                      summarize=lambda passages, focus, words: "a summary")
    first, second, third = (c.chunk_id for c in index.chunks[:3])
    toolset.call("chunk_read", {"chunk_ids": [first]})
    result = toolset.call("chunk_summarize", {"chunk_ids": [first, second, third],
                                              "focus": "revenue"})
    assert result.chunk_ids == [first, second] and "not summarized" in result.text
    with pytest.raises(ToolError, match="context budget of 2 chunks is spent"):
        toolset.call("chunk_summarize", {"chunk_ids": [third], "focus": "revenue"})
    assert "budget of 2 chunks is spent" in toolset.call("chunk_read",
                                                         {"chunk_ids": [third]}).text
    # a chunk already summarized may still be read in full: it is in the budget already
    assert toolset.call("chunk_read", {"chunk_ids": [second]}).chunk_ids == [second]
    assert toolset.used == [first, second]
