"""The Anthropic provider: the real SDK over real HTTP against a fake Messages API."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from arag.datasets import load_dataset
from arag.llm import ModelError, Prices, make_model
from arag.llm.base import MissingCredentials, ToolSpec
from arag.llm.cache import CachedModel
from arag.retrieval import load_or_build_index
from arag.systems import SystemContext, make_system
from arag.trace import step_to_dict
from runners.predict import predict
from tests.anthropic_fake import FakeAnthropic, agent_policy, error, text_reply, tool_reply
from tests.conftest import ROOT, write_mini_dataset

KEY = "sk-ant-test-not-a-real-key"
TOOL = ToolSpec("semantic_search", "search", {"type": "object", "properties": {
    "query": {"type": "string"}}, "required": ["query"]})


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        yield server


def claude(make_cfg, url, *extra):
    model = make_model(make_cfg("model=claude-haiku-4-5", f"model.base_url={url}",
                                "model.max_retries=3", "model.timeout_s=2", *extra).model)
    model.sleeps = []
    model.sleep = model.sleeps.append  # no waiting in tests; remember what would be waited
    return model


def ask(model, **kw):
    return model.complete("You summarize.", [{"role": "user", "content": "hello"}], **kw)


def test_tool_use_round_trip_and_tool_choice_none(make_cfg, fake):
    model = claude(make_cfg, fake.url)
    fake.handler = lambda req, n: (text_reply("done", req) if req["tool_choice"]["type"] == "none"
                                   else {"body": {"id": "m", "type": "message", "role": "assistant",
                                                  "model": req["model"], "stop_reason": "tool_use",
                                                  "stop_sequence": None, "usage": {}, "content": [
                                                      {"type": "tool_use", "id": "toolu_1",
                                                       "name": "semantic_search",
                                                       "input": {"query": "eps"}}]}})
    first = ask(model, tools=[TOOL])
    assert first.stop_reason == "tool_use"
    assert first.tool_uses == [{"type": "tool_use", "id": "toolu_1", "name": "semantic_search",
                                "input": {"query": "eps"}}]
    assert ask(model, tools=[TOOL], tool_choice="none").text == "done"
    sent = fake.requests[-1]
    assert sent["json"]["tool_choice"] == {"type": "none"}
    assert sent["json"]["model"] == "claude-haiku-4-5"
    headers = sent["headers"]
    assert KEY in headers.get("x-api-key", "") + headers.get("authorization", "")


def test_prompt_caching_marks_system_and_last_tool(make_cfg, fake):
    ask(claude(make_cfg, fake.url), tools=[TOOL, TOOL])
    body = fake.requests[-1]["json"]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" in body["tools"][-1] and "cache_control" not in body["tools"][0]
    ask(claude(make_cfg, fake.url, "model.prompt_caching=false"), tools=[TOOL])
    body = fake.requests[-1]["json"]
    assert "cache_control" not in body["system"][0] and "cache_control" not in body["tools"][0]


def test_a_tool_loop_marks_its_newest_block_on_a_copy_of_the_messages(make_cfg, fake):
    model = claude(make_cfg, fake.url)
    messages = [{"role": "user", "content": "hello"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                                   "name": "semantic_search",
                                                   "input": {"query": "eps"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                              "content": "Chunk ID: c1", "is_error": False}]}]
    before = json.dumps(messages)
    model.complete("You summarize.", messages, tools=[TOOL])
    sent = fake.requests[-1]["json"]["messages"]
    assert sent[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sum(json.dumps(m).count("cache_control") for m in sent) == 1
    assert json.dumps(messages) == before  # the caller's list is not touched
    ask(model, tools=[TOOL])  # a string turn becomes a marked text block
    assert fake.requests[-1]["json"]["messages"][-1]["content"] == [
        {"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]
    # a one-shot prompt or a forced last answer is never re-sent: no write surcharge
    for kw in ({}, {"tools": [TOOL], "tool_choice": "none"}):
        ask(model, **kw)
        assert "cache_control" not in json.dumps(fake.requests[-1]["json"]["messages"])
    ask(claude(make_cfg, fake.url, "model.prompt_caching=false"), tools=[TOOL])
    assert "cache_control" not in json.dumps(fake.requests[-1]["json"])


def run_arag_task(make_cfg, tmp_path, url, model_name, *extra, style_examples=()):
    """One A-RAG task through the real SDK against ``url``: its prediction."""
    root = write_mini_dataset(tmp_path / "d", n_docs=1)
    cfg = make_cfg(f"dataset.root={root}", f"model={model_name}")
    ds = load_dataset(cfg.dataset, ROOT)
    index = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    ctx = SystemContext(model=claude(make_cfg, url, f"model={model_name}", *extra),
                        prices=Prices.from_config(cfg.model), corpus=ds.corpus,
                        index_loader=lambda: index, style="earnings_call", target_length=50,
                        max_loops=8, top_k=3, scope="document",
                        tools=["keyword_search", "semantic_search", "chunk_read"],
                        max_tokens=512, temperature=0.0, context_limit=200_000)
    task = replace(ds.tasks[0], meta={"style_examples": list(style_examples)})
    return make_system("arag", "arag", ctx).predict(task, "d")


def arag_loop(make_cfg, tmp_path, model_name, *extra, style_examples=()):
    """A fresh fake (an empty prompt cache); the prediction and the usage of each call."""
    with FakeAnthropic(agent_policy(rounds=3)) as server:
        pred = run_arag_task(make_cfg, tmp_path, server.url, model_name, *extra,
                             style_examples=style_examples)
    assert pred.error is None and pred.loops == 7
    return pred, [t["usage"] for t in map(step_to_dict, pred.trace) if t["type"] == "llm"]


# ten reference summaries in the prompt (dataset.options.style_examples=10) put even the
# first request above Sonnet 4.6's minimum cacheable prompt (1,024 tokens)
STYLE_EXAMPLES = [f"q{q} revenue rose {k}.{q} percent to ${k}1{q}.4 million.\n"
                  f"q{q} adjusted earnings per share ${k}.{q}2 versus $0.{k}8 a year ago.\n"
                  f"sees fy{k} revenue ${k}.40 billion to ${k}.55 billion.\n"
                  f"q{q} gross margin {40 + k}.{q} percent; operating cash flow ${k}0{q} million."
                  for k in range(1, 6) for q in (2, 3)]


def test_every_loop_after_the_first_reads_the_previous_turn_from_cache(make_cfg, tmp_path,
                                                                        monkeypatch):
    sonnet = "claude-sonnet-4-6"
    uncached, plain = arag_loop(make_cfg, tmp_path, sonnet, "model.prompt_caching=false",
                                style_examples=STYLE_EXAMPLES)
    assert plain[0]["input_tokens"] >= 1024, "the first request must reach Sonnet's minimum"
    pred, usages = arag_loop(make_cfg, tmp_path, sonnet, style_examples=STYLE_EXAMPLES)
    assert usages[0]["cache_creation_input_tokens"] > 0
    assert all(u["cache_read_input_tokens"] > 0 for u in usages[1:])
    # the same prompts, split into fresh, written and read tokens
    assert [u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
            for u in usages] == [u["input_tokens"] for u in plain]
    assert pred.cost_usd < uncached.cost_usd
    llm = [t for t in map(step_to_dict, pred.trace) if t["type"] == "llm"]
    assert pred.cost_usd == pytest.approx(sum(t["cost_usd"] for t in llm), rel=1e-9)

    # the old placement (tools and system only, ~450 tokens) is below every model's minimum
    import arag.llm.claude as provider

    monkeypatch.setattr(provider, "_mark_last_block", lambda messages, cache: messages)
    _, old = arag_loop(make_cfg, tmp_path, sonnet, style_examples=STYLE_EXAMPLES)
    assert not any(u["cache_read_input_tokens"] or u["cache_creation_input_tokens"] for u in old)


def test_nothing_is_cached_below_the_models_minimum_cacheable_prompt(make_cfg, tmp_path):
    # Haiku 4.5 caches nothing under 4,096 tokens: this short loop never reaches it
    pred, usages = arag_loop(make_cfg, tmp_path, "claude-haiku-4-5")
    assert all(u["input_tokens"] < 4096 for u in usages)
    assert not any(u["cache_read_input_tokens"] or u["cache_creation_input_tokens"]
                   for u in usages)
    assert pred.cost_usd == pytest.approx(
        (pred.input_tokens * 1.0 + pred.output_tokens * 5.0) / 1e6, rel=1e-9)


def test_stop_reasons_over_http_cut_tool_call_pause_turn_and_cut_answer(make_cfg, tmp_path):
    with FakeAnthropic() as server:
        server.queue = [
            tool_reply("chunk_read", None, {}, 0, stop_reason="max_tokens"),  # no input yet
            text_reply("Searching the call...", {}, stop_reason="pause_turn"),
            text_reply("q3 revenue rose 8.0 percent to", {}, stop_reason="max_tokens"),
        ]
        pred = run_arag_task(make_cfg, tmp_path, server.url, "claude-haiku-4-5")
        sent = [r["json"]["messages"] for r in server.requests]
    assert pred.error is None and pred.loops == 3 and not pred.max_loops_reached
    assert pred.predicted == "q3 revenue rose 8.0 percent to"
    assert pred.stop_reason == "max_tokens"
    cut_call = sent[1][-2]["content"][-1]
    assert cut_call["type"] == "tool_use" and cut_call["input"] == {}
    result = sent[1][-1]["content"][0]
    assert result["is_error"] is True and "cut off at max_tokens" in result["content"]
    assert "shorter arguments" in result["content"]
    tools = [t for t in map(step_to_dict, pred.trace) if t["type"] == "tool"]
    assert [(t["name"], t["is_error"]) for t in tools] == [("chunk_read", True)]
    assert not pred.retrieved_chunk_ids  # the cut call was not run
    assert sent[2][-1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Searching the call...", "cache_control": {"type": "ephemeral"}}]}
    assert [t["stop_reason"] for t in map(step_to_dict, pred.trace) if t["type"] == "llm"] == [
        "max_tokens", "pause_turn", "max_tokens"]


def test_a_refusal_over_http_is_an_error_with_the_refusal_in_the_trace(make_cfg, tmp_path):
    refusal = "I can't help with that request."
    with FakeAnthropic() as server:
        server.handler = lambda req, n: (
            tool_reply("semantic_search", {"query": "revenue"}, req, n) if n == 0
            else text_reply(refusal, req, stop_reason="refusal"))
        pred = run_arag_task(make_cfg, tmp_path, server.url, "claude-haiku-4-5")
    assert pred.error.startswith("ModelRefused: the model refused to answer "
                                 "(stop_reason=refusal)") and refusal in pred.error
    assert pred.predicted is None and pred.stop_reason == "refusal" and pred.loops == 2
    llm = [t for t in map(step_to_dict, pred.trace) if t["type"] == "llm"]
    assert llm[-1]["refusal"] == refusal and llm[-1]["stop_reason"] == "refusal"
    assert pred.cost_usd == pytest.approx(sum(t["cost_usd"] for t in llm), rel=1e-9)


def test_exact_cost_from_usage_including_cache_tokens(make_cfg, fake):
    usage = {"input_tokens": 1200, "output_tokens": 300, "cache_read_input_tokens": 5000,
             "cache_creation_input_tokens": 800}
    fake.handler = lambda req, n: text_reply("ok", req, usage=usage)
    cfg = make_cfg("model=claude-haiku-4-5")
    completion = ask(claude(make_cfg, fake.url))
    assert vars(completion.usage) == usage
    cost = Prices.from_config(cfg.model).cost_usd(completion.usage)
    assert cost == pytest.approx((1200 * 1.0 + 300 * 5.0 + 5000 * 0.10 + 800 * 1.25) / 1e6)


def test_429_honours_retry_after_then_succeeds(make_cfg, fake):
    fake.queue = [error(429, "rate_limit_error", "slow down", {"retry-after": "7"})]
    model = claude(make_cfg, fake.url)
    assert ask(model).text and len(fake.requests) == 2
    assert model.sleeps == [7.0]


def test_529_storm_ends_in_an_error_after_all_retries(make_cfg, fake):
    fake.handler = lambda req, n: error(529, "overloaded_error", "Overloaded")
    model = claude(make_cfg, fake.url)
    with pytest.raises(ModelError, match="gave up after 4 attempts.*529.*Overloaded"):
        ask(model)
    assert len(fake.requests) == 4 and len(model.sleeps) == 3
    assert model.sleeps == sorted(model.sleeps) or max(model.sleeps) <= 60  # backoff grows


def test_500_then_success_and_401_fails_fast_with_the_api_message(make_cfg, fake):
    fake.queue = [error(500, "api_error", "Internal error")]
    assert ask(claude(make_cfg, fake.url)).text
    fake.queue = [error(401, "authentication_error", "invalid x-api-key")]
    before = len(fake.requests)
    with pytest.raises(ModelError, match="401.*invalid x-api-key") as err:
        ask(claude(make_cfg, fake.url))
    assert len(fake.requests) == before + 1
    assert KEY not in str(err.value)


def test_timeouts_dropped_connections_and_malformed_bodies_are_retried(make_cfg, fake):
    fake.queue = [{"drop": True}, {"malformed": True}, {"delay": 3.0, **text_reply("late", {})}]
    model = claude(make_cfg, fake.url)  # timeout 2 s
    assert ask(model).text == "q3 revenue rose 14.2 percent to $612.4 million."
    assert len(fake.requests) == 4 and len(model.sleeps) == 3
    fake.handler = lambda req, n: {"delay": 3.0, **text_reply("late", req)}
    with pytest.raises(ModelError, match="Timeout"):
        ask(claude(make_cfg, fake.url, "model.max_retries=1"))


def test_missing_key_says_how_to_set_it(make_cfg, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(MissingCredentials, match="export ANTHROPIC_API_KEY="):
        make_model(make_cfg("model=claude-sonnet-4-6").model)


def test_response_cache_makes_a_repeat_call_free(make_cfg, fake, tmp_path):
    cached = CachedModel(claude(make_cfg, fake.url), tmp_path, "read_write")
    first = ask(cached)
    again = ask(cached)
    assert len(fake.requests) == 1 and again.cached and not first.cached
    assert again.content == first.content and vars(again.usage) == vars(first.usage)
    entry = next((tmp_path / "responses").rglob("*.json"))
    entry.write_text("{truncated")
    assert not ask(cached).cached and len(fake.requests) == 2  # damaged: fetched again
    assert ask(cached).cached
    ro = CachedModel(claude(make_cfg, fake.url), tmp_path / "ro", "read_only")
    ask(ro)
    assert not (tmp_path / "ro" / "responses").exists()
    off = CachedModel(claude(make_cfg, fake.url), tmp_path, "off")
    ask(off)
    assert len(fake.requests) == 4


def test_agent_loop_over_http_and_a_failed_task_is_recorded(make_cfg, fake, tmp_path):
    root = write_mini_dataset(tmp_path / "d")
    cfg = make_cfg(f"dataset.root={root}", "model=claude-haiku-4-5")
    ds = load_dataset(cfg.dataset, ROOT)
    index = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    model = claude(make_cfg, fake.url)
    ctx = SystemContext(model=model, prices=Prices.from_config(cfg.model), corpus=ds.corpus,
                        index_loader=lambda: index, style="earnings_call", target_length=50,
                        max_loops=8, top_k=3, scope="document",
                        tools=["keyword_search", "semantic_search", "chunk_read"],
                        max_tokens=512, temperature=0.0, context_limit=200_000)
    system = make_system("arag", "arag", ctx)
    calls = iter(range(100))

    def storm_for_second_task(req, n):
        if "T1X" in json.dumps(req["messages"][0]):
            return error(529, "overloaded_error", "Overloaded")
        next(calls)
        from tests.anthropic_fake import agent_policy
        return agent_policy()(req, n)

    fake.handler = storm_for_second_task
    fake.min_cache_tokens = 1024  # this short loop never reaches Haiku's 4,096
    out = predict(system, ds.tasks, tmp_path / "p.jsonl", source="d", concurrency=2,
                  progress=False)
    ok, failed = out.predictions
    assert ok.error is None and ok.predicted.startswith("q3 revenue")
    assert [t["name"] for t in map(step_to_dict, ok.trace) if t["type"] == "tool"] == [
        "semantic_search", "chunk_read", "semantic_search", "chunk_read"]
    # the conversation is cached once past the minimum, and read back the next loop
    assert ok.retrieved_chunk_ids and ok.cache_read_input_tokens > 0
    llm = [t for t in map(step_to_dict, ok.trace) if t["type"] == "llm"]
    assert ok.cost_usd == pytest.approx(sum(t["cost_usd"] for t in llm))
    assert failed.error and "529" in failed.error and failed.predicted is None


def test_message_batches_merge_by_custom_id_and_record_failed_items(make_cfg, fake, tmp_path):
    from arag.llm.cache import MeteredModel

    fake.handler = lambda req, n: text_reply(f"answer to {req['messages'][0]['content']}", req,
                                             usage={"input_tokens": 1000, "output_tokens": 100,
                                                    "cache_creation_input_tokens": 0,
                                                    "cache_read_input_tokens": 0})
    fake.batch_failures = {"c": "errored", "d": "expired"}
    model = claude(make_cfg, fake.url)
    metered = MeteredModel(CachedModel(model, tmp_path, "read_write"),
                           Prices.from_config(make_cfg("model=claude-haiku-4-5").model))
    requests = {cid: {"system": "s", "messages": [{"role": "user", "content": cid}],
                      "max_tokens": 50} for cid in "abcd"}
    out = metered.complete_batch(requests)
    assert out["a"].text == "answer to a" and out["b"].text == "answer to b"
    assert isinstance(out["c"], ModelError) and "errored: bad item" in str(out["c"])
    assert isinstance(out["d"], ModelError) and "expired" in str(out["d"])
    assert model.sleeps == [model.batch_poll_s]  # polled until the batch ended
    # two successful items at half the list price
    assert metered.cost_usd == pytest.approx(2 * 0.5 * (1000 * 1.0 + 100 * 5.0) / 1e6)
    n = len(fake.requests)
    fake.batch_failures = {}
    again = metered.complete_batch(requests)
    assert again["a"].cached and again["c"].text == "answer to c"  # only c, d resubmitted
    submitted = [r for r in fake.requests[n:] if r["path"].endswith("/messages/batches")]
    assert [i["custom_id"] for i in submitted[0]["json"]["requests"]] == ["c", "d"]


def test_geval_through_message_batches_records_expired_items(make_cfg, fake, tmp_path):
    from arag.records import Prediction, Task
    from metrics import ScoringItem
    from metrics.geval import GEvalScorer

    fake.handler = lambda req, n: text_reply(
        "1. Check.\n2. Score." if "Write the evaluation steps" in req["messages"][0]["content"]
        else "Reasoning.\nFinal score: 2" if "Faithfulness" in req["messages"][0]["content"]
        else "Codes: H" if "error codes" in req["messages"][0]["content"]
        else "Final Score: 4/5", req)
    fake.batch_failures = {"1-coverage-0": "expired"}  # <task>-<dimension>-<sample>
    items = []
    for tid in ("t0", "t1"):
        task = Task(tid, "summarization", ("D",), "Summarize.", "q3 revenue $1.")
        pred = Prediction(id=tid, source="s", system="naive", model="m",
                          task_type="summarization", question="Summarize.", doc_ids=["D"],
                          ground_truth=task.reference, predicted=f"summary {tid}")
        items.append(ScoringItem(pred, task, None, "context", 50, True))
    scorer = GEvalScorer(claude(make_cfg, fake.url), "anthropic/haiku", tmp_path, batch=True)
    first, second = scorer.score(items)
    assert first.values["geval_faithfulness"] == 2 and first.values["geval_coverage"] == 4
    assert first.values["error_codes"] == ["H"]
    assert second.values["geval_coverage"] is None
    assert "batch item expired" in second.null_reasons["geval_coverage"]
    batches = [r for r in fake.requests if r["path"].endswith("/messages/batches")]
    assert len(batches) == 2  # one for all scoring calls, one for the taxonomy
    assert len(batches[0]["json"]["requests"]) == 4


def test_a_message_batch_that_never_ends_is_cancelled_and_named(make_cfg, fake):
    fake.handler = lambda req, n: text_reply("fine", req)
    fake.batch_polls_to_end = 10**9
    model = claude(make_cfg, fake.url)
    model.batch_timeout_s = 90.0  # three 30 s polls
    requests = {"a": {"system": "s", "messages": [{"role": "user", "content": "a"}],
                      "max_tokens": 50}}
    with pytest.raises(ModelError, match=r"did not end within 90 s .*batch_timeout_s"):
        model.complete_batch(requests)
    assert model.sleeps == [30.0, 30.0, 30.0]
    assert fake.requests[-1]["path"].endswith("/cancel")


def test_a_malformed_batch_item_is_an_item_error(make_cfg, fake):
    fake.handler = lambda req, n: {"body": {"id": "msg_x", "type": "message",
                                            "role": "assistant", "model": "m", "content": None,
                                            "stop_reason": "end_turn", "stop_sequence": None}}
    out = claude(make_cfg, fake.url).complete_batch(
        {"a": {"system": "s", "messages": [{"role": "user", "content": "a"}], "max_tokens": 5}})
    assert isinstance(out["a"], ModelError) and "batch item malformed" in str(out["a"])
