"""The A-RAG loop: bounded, traced, model errors fed back; the offline model's policy."""

from __future__ import annotations

import json

import pytest

from arag.agent.prompts import TOOL_CALL_CUT_OFF
from arag.datasets import load_dataset
from arag.llm import Completion, Prices, Usage
from arag.llm.offline import OfflineModel
from arag.llm.scripted import ScriptedModel, ScriptExhausted
from arag.retrieval import RetrievalSettings, load_or_build_index
from arag.systems import SystemContext, make_system
from arag.trace import ModelCall, step_to_dict
from metrics.aggregate import aggregate
from tests.conftest import ROOT, write_mini_dataset

TOOLS = ["keyword_search", "semantic_search", "chunk_read"]


@pytest.fixture
def world(make_cfg, tmp_path):
    root = write_mini_dataset(tmp_path / "agent")
    cfg = make_cfg(f"dataset.root={root}")
    ds = load_dataset(cfg.dataset, ROOT)
    index = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    return ds, index


def _system(kind, model, ds, index, max_loops=6, context_limit=200_000, budget=None,
            tools=TOOLS, hyde=False):
    ctx = SystemContext(model=model, prices=Prices(1.0, 5.0, 0.1, 1.25), corpus=ds.corpus,
                        index_loader=lambda: index, style="earnings_call", target_length=50,
                        max_loops=max_loops, top_k=3, scope="document", tools=tools,
                        max_tokens=512, temperature=0.0, context_limit=context_limit,
                        retrieval=RetrievalSettings(context_budget=budget, hyde=hyde))
    return make_system(kind, kind, ctx)


def test_budget_forces_a_final_answer_without_tools(world):
    ds, index = world
    search = {"tool": "semantic_search", "input": {"query": "revenue"}}
    model = ScriptedModel([search, search, "final answer"])
    pred = _system("arag", model, ds, index, max_loops=2).predict(ds.tasks[0], "mini")
    assert pred.predicted == "final answer"
    assert pred.max_loops_reached and pred.loops == 3
    last = model.requests[-1]
    assert last["tool_choice"] == "none"
    closing = last["messages"][-1]["content"]
    assert closing[0]["type"] == "tool_result" and "maximum number" in closing[-1]["text"]


def test_bad_tool_arguments_go_back_to_the_model_and_the_loop_goes_on(world):
    ds, index = world
    model = ScriptedModel([{"tool": "chunk_read", "input": {"chunk_ids": ["made-up"]}},
                           {"tool": "keyword_search", "input": {"keywords": ["revenue"]}},
                           "done"])
    pred = _system("arag", model, ds, index).predict(ds.tasks[0], "mini")
    assert pred.predicted == "done" and not pred.error and not pred.max_loops_reached
    error_result = model.requests[1]["messages"][-1]["content"][0]
    assert error_result["is_error"] is True and "Error:" in error_result["content"]
    tools = [t for t in map(step_to_dict, pred.trace) if t["type"] == "tool"]
    assert tools[0]["is_error"] and not tools[1]["is_error"]
    assert tools[1]["result_chunk_ids"], "search result ids are traced"


def test_a_top_k_of_1e400_is_a_tool_error_and_the_run_goes_on(world):
    """``1e400`` is valid JSON and reads as infinity: the model hears why, then answers."""
    ds, index = world
    model = ScriptedModel([{"tool": "semantic_search",
                            "input": json.loads('{"query": "revenue", "top_k": 1e400}')},
                           {"tool": "semantic_search", "input": {"query": "revenue", "top_k": 3}},
                           "done"])
    pred = _system("arag", model, ds, index).predict(ds.tasks[0], "mini")
    assert pred.predicted == "done" and pred.error is None
    first = model.requests[1]["messages"][-1]["content"][0]
    assert first["is_error"] is True and "top_k must be a whole number" in first["content"]
    tools = [t for t in map(step_to_dict, pred.trace) if t["type"] == "tool"]
    assert [t["is_error"] for t in tools] == [True, False] and tools[1]["result_chunk_ids"]
    # the history sent back and the record written are strict JSON (an SDK refuses infinity)
    json.dumps(model.requests[2]["messages"], allow_nan=False)
    assert '"top_k": "inf"' in pred.to_json()


def test_scripted_model_fails_loudly_when_its_script_runs_out(world):
    ds, index = world
    with pytest.raises(ScriptExhausted):
        _system("arag", ScriptedModel([]), ds, index).predict(ds.tasks[0], "mini")


def test_usage_and_cost_add_up_over_calls(world):
    ds, index = world
    model = ScriptedModel([{"tool": "semantic_search", "input": {"query": "eps"}}, "answer"])
    pred = _system("arag", model, ds, index).predict(ds.tasks[0], "mini")
    llm = [t for t in map(step_to_dict, pred.trace) if t["type"] == "llm"]
    assert len(llm) == 2
    assert pred.input_tokens == sum(t["usage"]["input_tokens"] for t in llm)
    expected = (pred.input_tokens * 1.0 + pred.output_tokens * 5.0) / 1e6
    assert pred.cost_usd == pytest.approx(expected)
    assert pred.latency_ms > 0


def test_offline_agent_searches_then_reads_and_summarizes_what_it_read(world):
    ds, index = world
    pred = _system("arag", OfflineModel(), ds, index, budget=4).predict(ds.tasks[0], "m")
    names = [t["name"] for t in map(step_to_dict, pred.trace) if t["type"] == "tool"]
    assert names[:2] == ["semantic_search", "keyword_search"] and "chunk_read" in names
    assert len(pred.retrieved_chunk_ids) == 4
    assert pred.context_budget_reached and not pred.max_loops_reached  # read all it may
    assert "$452.0 million" in pred.predicted and "$1.10" in pred.predicted
    assert pred.word_count <= 50
    again = _system("arag", OfflineModel(), ds, index, budget=4).predict(ds.tasks[0], "m")
    assert again.predicted == pred.predicted and again.retrieved_chunk_ids == pred.retrieved_chunk_ids


def _words(text):
    return {w.strip(".,'?$").lower() for w in text.split()}


def test_offline_agent_knows_nothing_naive_does_not(world):
    """The mini dataset's gold lines are the only ones naming revenue, earnings per share
    and guidance, under a question that names none of them: a vocabulary of the agent's own
    would find them for it and not for naive. The agent's queries come only from the
    question and the chunks it had read; given naive's tool (semantic search) it reads
    exactly naive's top-k, and HyDE gives the offline naive nothing either."""
    ds, index = world
    for task in ds.tasks:
        naive = _system("naive", OfflineModel(), ds, index).predict(task, "m")
        hyde = _system("naive", OfflineModel(), ds, index, hyde=True).predict(task, "m")
        agent = _system("arag", OfflineModel(), ds, index,
                        tools=["semantic_search", "chunk_read"]).predict(task, "m")
        assert agent.retrieved_chunk_ids == naive.retrieved_chunk_ids == hyde.retrieved_chunk_ids
        full = _system("arag", OfflineModel(), ds, index).predict(task, "m")
        known = _words(task.question)
        for step in map(step_to_dict, full.trace):
            if step["type"] != "tool":
                continue
            if step["name"] in ("semantic_search", "keyword_search"):
                args = step["arguments"]
                asked = _words(" ".join([args.get("query", "")] + args.get("keywords", [])))
                assert asked <= known, f"{step['name']} asked for {asked - known}"
            else:  # what it read may feed its later queries
                known |= {w for cid in step["result_chunk_ids"]
                          for w in _words(index.by_id[cid].text)}


def test_offline_agent_respects_small_budgets(world):
    ds, index = world
    pred = _system("arag", OfflineModel(max_chunks_read=6), ds, index, max_loops=2).predict(
        ds.tasks[0], "m")
    assert pred.max_loops_reached and len(pred.retrieved_chunk_ids) == 2


def test_naive_uses_top_k_and_stuffing_reads_the_whole_document(world):
    ds, index = world
    naive = _system("naive", OfflineModel(), ds, index).predict(ds.tasks[0], "m")
    assert len(naive.retrieved_chunk_ids) == 3 and naive.loops == 1
    stuffing = _system("stuffing", OfflineModel(), ds, index).predict(ds.tasks[0], "m")
    assert stuffing.retrieved_chunk_ids == [] and "$1.80 billion" in stuffing.predicted


def test_stuffing_is_skipped_with_a_reason_over_the_context_limit(world):
    ds, index = world
    pred = _system("stuffing", OfflineModel(), ds, index, context_limit=1000).predict(
        ds.tasks[0], "m")
    assert pred.skipped and "exceeds the model's context" in pred.skip_reason
    assert pred.predicted is None and pred.input_tokens == 0


def test_oracle_gets_exactly_the_gold_lines_and_closed_book_gets_nothing(world):
    ds, index = world
    model = ScriptedModel(["oracle answer", "closed answer"])
    oracle = _system("oracle", model, ds, index).predict(ds.tasks[0], "m")
    prompt = model.requests[0]["messages"][0]["content"]
    doc = ds.corpus.documents[ds.tasks[0].doc_ids[0]]
    gold = ds.tasks[0].gold_lines[doc.doc_id]
    assert all(doc.lines[g - 1] in prompt for g in gold)
    assert "opened 3 new offices" not in prompt and oracle.predicted == "oracle answer"
    _system("closed_book", model, ds, index).predict(ds.tasks[0], "m")
    closed = model.requests[1]["messages"][0]["content"]
    assert "<document" not in closed and "<chunk" not in closed and "<question>" in closed


def test_style_examples_reach_the_prompt_but_not_the_offline_summary(world):
    from dataclasses import replace

    ds, index = world
    example = "q1 sales of widgets rose 99.9 percent to $1 trillion."
    task = replace(ds.tasks[0], meta={"style_examples": [example]})
    model = ScriptedModel(["ok"])
    _system("stuffing", model, ds, index).predict(task, "m")
    assert example in model.requests[0]["messages"][0]["content"]
    offline = _system("stuffing", OfflineModel(), ds, index).predict(task, "m")
    assert "99.9" not in offline.predicted


def reply(stop_reason, *blocks):
    """A scripted completion with a given stop reason."""
    return Completion(content=list(blocks), stop_reason=stop_reason,
                      usage=Usage(input_tokens=100, output_tokens=10), model="scripted")


def text(t):
    return {"type": "text", "text": t}


@pytest.mark.parametrize("kind", ["arag", "naive", "stuffing"])
def test_a_refusal_is_an_error_counted_in_n_errors_not_an_answer(world, kind):
    ds, index = world
    refusal = reply("refusal", text("I can't help with that."))
    search = {"tool": "semantic_search", "input": {"query": "revenue"}}
    model = ScriptedModel([search, refusal] if kind == "arag" else [refusal])
    pred = _system(kind, model, ds, index).predict(ds.tasks[0], "m")
    assert pred.error == ("ModelRefused: the model refused to answer (stop_reason=refusal): "
                          "\"I can't help with that.\"")
    assert pred.predicted is None and pred.stop_reason == "refusal"
    assert pred.loops == len(model.requests)
    assert [t for t in pred.trace if isinstance(t, ModelCall)][-1].refusal == \
        "I can't help with that."
    assert pred.cost_usd > 0  # the refused call was paid for
    totals = aggregate([json.loads(pred.to_json())])
    assert totals["n_errors"] == 1 and totals["n_answered"] == 0


@pytest.mark.parametrize("kind", ["arag", "naive", "stuffing"])
def test_an_answer_cut_at_max_tokens_is_kept_and_says_so(world, kind):
    ds, index = world
    model = ScriptedModel([reply("max_tokens", text("q3 revenue rose 8.0 percent to"))])
    pred = _system(kind, model, ds, index).predict(ds.tasks[0], "m")
    assert pred.error is None and pred.predicted == "q3 revenue rose 8.0 percent to"
    assert pred.stop_reason == "max_tokens" and pred.loops == 1


def test_a_tool_call_cut_at_max_tokens_is_sent_back_as_an_error_not_run(world):
    ds, index = world
    search = {"type": "tool_use", "id": "toolu_a", "name": "semantic_search",
              "input": {"query": "revenue"}}
    cut = {"type": "tool_use", "id": "toolu_b", "name": "chunk_read", "input": {}}
    model = ScriptedModel([reply("max_tokens", text("Two calls."), search, cut),
                           {"tool": "keyword_search", "input": {"keywords": ["revenue"]}},
                           "done"])
    pred = _system("arag", model, ds, index, max_loops=3).predict(ds.tasks[0], "m")
    assert pred.predicted == "done" and pred.error is None and pred.loops == 3
    complete, cut_off = model.requests[1]["messages"][-1]["content"]
    assert complete["tool_use_id"] == "toolu_a" and complete["is_error"] is False
    assert cut_off["tool_use_id"] == "toolu_b" and cut_off["is_error"] is True
    assert cut_off["content"] == f"Error: {TOOL_CALL_CUT_OFF}"
    tools = [(t["name"], t["is_error"]) for t in map(step_to_dict, pred.trace) if t["type"] == "tool"]
    assert tools == [("semantic_search", False), ("chunk_read", True), ("keyword_search", False)]
    assert not pred.retrieved_chunk_ids  # chunk_read never ran


def test_pause_turn_sends_the_turn_back_and_the_loop_goes_on(world):
    ds, index = world
    paused = reply("pause_turn", text("Searching the call..."))
    model = ScriptedModel([paused, {"tool": "semantic_search", "input": {"query": "eps"}},
                           "done"])
    pred = _system("arag", model, ds, index).predict(ds.tasks[0], "m")
    assert pred.predicted == "done" and pred.loops == 3 and pred.stop_reason == "end_turn"
    assert model.requests[1]["messages"][-1] == {"role": "assistant",
                                                 "content": [text("Searching the call...")]}


def test_the_offline_agent_calls_a_tool_on_every_sample_task(make_cfg):
    """So the sample sweep carries no caveat about tasks answered without tool calls."""
    from arag.llm import make_model
    from runners.job import build_system, prepare
    from runners.scoring import tool_call_counts
    from runners.settings import read

    cfg = make_cfg("system=arag", "dataset=sample")
    job = prepare(read(cfg))
    system = build_system(job, make_model(cfg.model))
    predictions = [system.predict(task, "sample") for task in job.dataset.tasks]
    assert len(predictions) == 6 and all(p.error is None for p in predictions)
    assert tool_call_counts(predictions, job.system_class, cfg.system.tools) == {
        "tasks_without_tool_call": 0.0, "tasks_without_tool_call_share": 0.0}
