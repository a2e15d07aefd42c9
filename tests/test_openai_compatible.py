"""The OpenAI-compatible provider: the real ``openai`` SDK over real HTTP against a fake
chat-completions server (tests/openai_fake.py)."""

from __future__ import annotations

import pytest

from arag.config import ConfigError
from arag.llm import ModelError, Prices, make_model
from arag.llm.base import MissingCredentials, ToolSpec
from arag.llm.cache import CachedModel
from arag.llm.registry import require_credentials
from arag.trace import step_to_dict
from runners.job import build_system, prepare
from runners.settings import read
from tests.conftest import ROOT, write_mini_dataset
from tests.openai_fake import (
    ANSWER,
    LLAMA_CPP_NO_TOOLS,
    REASONING_TEMPERATURE,
    VLLM_NO_TOOLS,
    FakeOpenAI,
    agent_policy,
    answers_without_tools,
    error,
    rejects_temperature,
    text_reply,
    tool_reply,
)

KEY = "sk-proj-test-not-a-real-key"
TOOL = ToolSpec("semantic_search", "search", {"type": "object", "properties": {
    "query": {"type": "string"}}, "required": ["query"]})


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def quiet(model):
    model.sleeps = []
    model.sleep = model.sleeps.append  # no waiting in tests; remember what would be waited
    return model


def gpt(make_cfg, url, *extra):
    return quiet(make_model(make_cfg("model=gpt-4o-mini", f"model.base_url={url}",
                                     "model.max_retries=3", "model.timeout_s=2",
                                     *extra).model))


def ask(model, **kw):
    return model.complete("You summarize.", [{"role": "user", "content": "hello"}], **kw)


def predict(make_cfg, tmp_path, url, system, *extra, n_docs=1):
    """One task of a small dataset answered by ``system`` with gpt-4o-mini at ``url``."""
    root = write_mini_dataset(tmp_path / "d", n_docs=n_docs)
    cfg = make_cfg(f"system={system}", f"dataset.root={root}", "model=gpt-4o-mini",
                   f"model.base_url={url}", "model.max_retries=2", "retrieval.top_k=3", *extra)
    job = prepare(read(cfg))
    model = quiet(make_model(cfg.model))
    built = build_system(job, model)
    return [built.predict(task, "d") for task in job.dataset.tasks], cfg


def llm_steps(pred):
    return [t for t in map(step_to_dict, pred.trace) if t["type"] == "llm"]


def test_an_agent_task_calls_tools_both_ways_with_exact_tokens_and_cost(make_cfg, tmp_path):
    with FakeOpenAI(min_cache_tokens=256) as server:  # the loop reaches OpenAI's prefix cache
        (pred,), cfg = predict(make_cfg, tmp_path, server.url, "arag")
        sent = [r["json"] for r in server.requests]
        usages = list(server.usages)
    assert pred.error is None and pred.predicted == ANSWER and pred.loops == 5
    tools = [t for t in map(step_to_dict, pred.trace) if t["type"] == "tool"]
    assert [t["name"] for t in tools] == ["semantic_search", "chunk_read"] * 2
    assert pred.retrieved_chunk_ids and not any(t["is_error"] for t in tools)
    # out: tool definitions; the call and its result go back as tool_calls and a tool message
    first, second = sent[0], sent[1]
    assert first["tool_choice"] == "auto" and first["max_completion_tokens"] == 1024
    assert {t["function"]["name"] for t in first["tools"]} == {
        "keyword_search", "semantic_search", "chunk_read"}
    assert first["tools"][0]["type"] == "function" and first["tools"][0]["function"]["parameters"]
    assert first["messages"][0]["role"] == "system"
    call, result = second["messages"][-2:]
    assert call["role"] == "assistant" and call["tool_calls"][0]["id"] == "call_0000"
    assert call["tool_calls"][0]["function"]["name"] == "semantic_search"
    assert result == {"role": "tool", "tool_call_id": "call_0000", "content": result["content"]}
    assert "Chunk ID:" in result["content"]
    # tokens and cost from the replies' usage and the YAML's prices (cached input at 0.075)
    cached = [u["prompt_tokens_details"]["cached_tokens"] for u in usages]
    assert cached[0] == 0 and all(c > 0 for c in cached[1:])
    assert pred.input_tokens == sum(u["prompt_tokens"] for u in usages) - sum(cached)
    assert pred.cache_read_input_tokens == sum(cached)
    assert pred.output_tokens == sum(u["completion_tokens"] for u in usages)
    expected = sum((u["prompt_tokens"] - c) * 0.15 + c * 0.075 + u["completion_tokens"] * 0.60
                   for u, c in zip(usages, cached, strict=True)) / 1e6
    assert pred.cost_usd == pytest.approx(expected, rel=1e-9)
    assert pred.cost_usd == pytest.approx(sum(t["cost_usd"] for t in llm_steps(pred)), rel=1e-9)
    assert Prices.from_config(cfg.model).cache_read == 0.075


def test_finish_reasons_map_onto_the_loops_stop_reasons(make_cfg, tmp_path):
    with FakeOpenAI() as server:
        server.queue = [
            tool_reply("chunk_read", '{"chunk_ids": ["d', {}, 0, finish_reason="length"),
            tool_reply("semantic_search", "revenue", {}, 1),  # not JSON: the tool says so
            tool_reply("semantic_search", {"query": "eps"}, {}, 2, finish_reason="stop"),
            text_reply("q3 revenue rose 8.0 percent to", {}, finish_reason="length"),
        ]
        (pred,), _ = predict(make_cfg, tmp_path, server.url, "arag")
        sent = [r["json"]["messages"] for r in server.requests]
    assert pred.error is None and pred.loops == 4 and pred.stop_reason == "max_tokens"
    assert pred.predicted == "q3 revenue rose 8.0 percent to"
    assert [t["stop_reason"] for t in llm_steps(pred)] == [
        "max_tokens", "tool_use", "tool_use", "max_tokens"]  # Ollama's "stop" with a call
    tools = [t for t in map(step_to_dict, pred.trace) if t["type"] == "tool"]
    assert [(t["name"], t["is_error"]) for t in tools] == [
        ("chunk_read", True), ("semantic_search", True), ("semantic_search", False)]
    cut = sent[1][-1]
    assert cut["role"] == "tool" and "cut off at max_tokens" in cut["content"]
    assert sent[1][-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert "JSON object" in sent[2][-1]["content"]
    assert sent[2][-2]["tool_calls"][0]["function"]["arguments"] == "revenue"


def test_a_content_filter_or_a_refusal_is_an_error_with_the_reason_in_the_trace(make_cfg, fake):
    fake.queue = [text_reply(None, {}, finish_reason="content_filter")]
    filtered = ask(gpt(make_cfg, fake.url))
    assert filtered.stop_reason == "refusal" and "content_filter" in filtered.text
    fake.queue = [text_reply(None, {}, refusal="I can't help with that.")]
    refused = ask(gpt(make_cfg, fake.url))
    assert (refused.stop_reason, refused.text) == ("refusal", "I can't help with that.")


def test_a_refused_task_is_recorded_as_an_error(make_cfg, tmp_path):
    with FakeOpenAI() as server:
        server.queue = [text_reply(None, {}, finish_reason="content_filter")]
        (pred,), _ = predict(make_cfg, tmp_path, server.url, "naive")
    assert pred.error.startswith("ModelRefused") and "content_filter" in pred.error
    assert pred.error_kind == "refusal" and pred.predicted is None
    assert llm_steps(pred)[-1]["refusal"]


def test_429_honours_retry_after_and_500_and_malformed_replies_are_retried(make_cfg, fake):
    fake.queue = [error(429, "Rate limit reached", "requests", {"retry-after": "7"}),
                  error(500, "The server had an error"), {"malformed": True},
                  {"no_usage": True, **text_reply("no usage", {})},
                  {"body": {"id": "x", "object": "chat.completion", "choices": []}}]
    model = gpt(make_cfg, fake.url, "model.max_retries=5")
    assert ask(model).text == ANSWER and len(fake.requests) == 6
    assert model.sleeps[0] == 7.0 and len(model.sleeps) == 5
    fake.handler = lambda req, n: error(503, "Service Unavailable", "server_error")
    with pytest.raises(ModelError, match="gave up after 4 attempts.*503.*Service Unavailable"):
        ask(gpt(make_cfg, fake.url))
    fake.handler = lambda req, n: {"no_usage": True, **text_reply("x", req)}
    with pytest.raises(ModelError, match="no usage") as err:
        ask(gpt(make_cfg, fake.url, "model.max_retries=0"))
    assert err.value.kind == "malformed"


def test_timeouts_and_dropped_connections_are_retried(make_cfg, fake):
    fake.queue = [{"drop": True}, {"delay": 1.5, **text_reply("late", {})}]
    model = gpt(make_cfg, fake.url, "model.timeout_s=1")
    assert ask(model).text == ANSWER and len(model.sleeps) == 2
    fake.handler = lambda req, n: {"delay": 1.5, **text_reply("late", req)}
    with pytest.raises(ModelError, match="Timeout") as err:
        ask(gpt(make_cfg, fake.url, "model.timeout_s=1", "model.max_retries=0"))
    assert err.value.kind == "timeout"


def test_4xx_fail_at_once_with_the_servers_message_and_never_the_key(make_cfg, fake):
    fake.queue = [error(401, "Incorrect API key provided", "invalid_request_error")]
    with pytest.raises(ModelError, match="401.*Incorrect API key.*OPENAI_API_KEY") as err:
        ask(gpt(make_cfg, fake.url))
    assert err.value.kind == "auth" and KEY not in str(err.value) and len(fake.requests) == 1
    assert fake.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    fake.queue = [error(404, "The model `nope` does not exist.")]
    with pytest.raises(ModelError, match="404.*does not exist") as err:
        ask(gpt(make_cfg, fake.url))
    assert err.value.kind == "not_found" and len(fake.requests) == 2


@pytest.mark.parametrize("refusal", [VLLM_NO_TOOLS, LLAMA_CPP_NO_TOOLS], ids=["vllm", "llama.cpp"])
def test_a_server_without_tools_stops_the_agent_with_the_fix_and_answers_the_rest(
        refusal, make_cfg, tmp_path):
    with FakeOpenAI(no_tools=refusal) as server:
        arag, _ = predict(make_cfg, tmp_path, server.url, "arag", "runner.concurrency=1",
                          n_docs=2)
        asked = len(server.requests)
        naive, _ = predict(make_cfg, tmp_path, server.url, "naive")
        stuffing, _ = predict(make_cfg, tmp_path, server.url, "stuffing")
    assert asked == 1  # found on the first call; the next task is not sent at all
    for pred in arag:
        assert pred.error_kind == "tools_unsupported" and pred.predicted is None
        assert "does not take tool definitions" in pred.error and refusal[1] in pred.error
        assert "system=naive,stuffing" in pred.error and "--enable-auto-tool-choice" in pred.error
    assert naive[0].error is None and stuffing[0].error is None
    assert naive[0].predicted == stuffing[0].predicted == ANSWER


def test_a_tool_error_after_tools_worked_is_not_taken_for_a_server_without_tools(make_cfg, fake):
    model = gpt(make_cfg, fake.url)
    assert ask(model, tools=[TOOL]).tool_uses
    fake.queue = [error(400, "Invalid 'messages[2]': tool_call_id not found")]
    with pytest.raises(ModelError) as err:
        ask(model, tools=[TOOL])
    assert err.value.kind == "bad_request" and model.tools_refused is None


def test_a_local_server_needs_no_key_and_sends_none(make_cfg, fake, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    cfg = make_cfg("model=openai-compatible", "model.name=llama3.1:8b",
                   f"model.base_url={fake.url}")
    require_credentials({"model=openai-compatible": cfg.model})
    assert (cfg.model.model_id, cfg.model.price_input, cfg.model.context_limit) == (
        "llama3.1:8b", 0.0, 32768)
    completion = ask(make_model(cfg.model))
    sent = fake.requests[-1]
    assert sent["json"]["model"] == "llama3.1:8b" and sent["json"]["max_tokens"] == 1024
    assert "OPENAI" not in str(sent["headers"]) and completion.model == "llama3.1:8b"
    assert Prices.from_config(cfg.model).cost_usd(completion.usage) == 0.0


def test_the_key_variable_is_named_by_the_config_and_checked_before_a_run(make_cfg, monkeypatch):
    cfg = make_cfg("model=openai-compatible", "model.api_key_env=VLLM_TEST_KEY").model
    with pytest.raises(MissingCredentials, match="model=openai-compatible.*export VLLM_TEST_KEY"):
        require_credentials({"model=openai-compatible": cfg})
    with pytest.raises(MissingCredentials, match="export VLLM_TEST_KEY="):
        make_model(cfg)
    pasted = make_cfg("model=openai-compatible", f"model.api_key_env={KEY}").model
    with pytest.raises(MissingCredentials, match="must name an environment variable") as err:
        require_credentials({"model=openai-compatible": pasted})
    assert KEY not in str(err.value)


def test_the_response_cache_makes_a_repeat_free(make_cfg, fake, tmp_path):
    cached = CachedModel(gpt(make_cfg, fake.url), tmp_path, "read_write")
    first = ask(cached, tools=[TOOL])
    again = ask(cached, tools=[TOOL])
    assert len(fake.requests) == 1 and again.cached and not first.cached
    assert again.content == first.content and vars(again.usage) == vars(first.usage)
    assert KEY not in "".join(p.read_text() for p in tmp_path.rglob("*.json"))


def test_a_panel_judge_keeps_the_server_and_model_its_own_file_names(make_cfg, tmp_path,
                                                                     monkeypatch):
    import shutil

    import runners.judges as judges

    conf = shutil.copytree(ROOT / "conf", tmp_path / "conf")
    (conf / "model" / "qwen-local.yaml").write_text(
        "defaults:\n  - openai-compatible\n  - _self_\nname: qwen2.5:7b\n"
        "base_url: http://gpu-box:11434/v1\nprice_input: 0.05\n")
    (conf / "judge" / "qwen-local.yaml").write_text(
        "defaults:\n  - /model@_here_: qwen-local\nbatch: false\n")
    monkeypatch.setattr(judges, "PROJECT_ROOT", tmp_path)
    cfg = make_cfg("judge=gpt-4o-mini", "judge.base_url=http://127.0.0.1:9/v1",
                   "judge.max_retries=1", "judge.panel=[qwen-local,openai-compatible]")
    panel = judges.panel_configs(cfg)
    mine, template = panel["qwen-local"], panel["openai-compatible"]
    assert (mine.model_id, mine.base_url, mine.price_input, mine.max_retries) == (
        "qwen2.5:7b", "http://gpu-box:11434/v1", 0.05, 1)
    assert (template.model_id, template.base_url) == ("openai-compatible",
                                                      "http://127.0.0.1:8000/v1")
    # a panel judge without a server of its own is reached where the primary judge is
    cfg = make_cfg("judge=openai-compatible", "judge.base_url=http://127.0.0.1:9/v1",
                   "judge.panel=[gpt-4o-mini]")
    assert judges.panel_configs(cfg)["gpt-4o-mini"].base_url == "http://127.0.0.1:9/v1"


def test_a_missing_model_named_like_a_tool_is_not_a_server_without_tools(make_cfg, fake):
    fake.queue = [error(404, "The model `llama3-groq-tool-use` does not exist.")]
    model = gpt(make_cfg, fake.url, "model.model_id=llama3-groq-tool-use")
    with pytest.raises(ModelError, match="does not exist") as err:
        ask(model, tools=[TOOL])
    assert err.value.kind == "not_found" and model.tools_refused is None


def test_where_the_key_is_read_from_is_not_part_of_a_runs_identity(make_cfg):
    from runners.identity import config_hash, predictions_hash

    a = make_cfg("model=gpt-4o-mini")
    b = make_cfg("model=gpt-4o-mini", "model.api_key_env=TEAM_OPENAI_KEY")
    assert config_hash(a) == config_hash(b) and predictions_hash(a) == predictions_hash(b)
    assert config_hash(a) != config_hash(make_cfg("model=gpt-4o-mini", "model.model_id=gpt-4o"))


def test_a_reasoning_model_refusing_temperature_fails_at_once_naming_the_option(make_cfg,
                                                                                  tmp_path):
    with FakeOpenAI(rejects_temperature) as server:
        (pred,), _ = predict(make_cfg, tmp_path, server.url, "naive")  # max_retries=2
        sent = [r["json"] for r in server.requests]
    assert len(sent) == 1 and sent[0]["temperature"] == 0.0  # refused once, not retried
    assert pred.error_kind == "unsupported_parameter" and pred.predicted is None
    assert "error 400" in pred.error and "Only the default (1) value is supported" in pred.error
    assert "does not take `temperature`" in pred.error
    assert "Fix: model.options.send_temperature=false" in pred.error


@pytest.mark.parametrize("system", ["arag", "naive"])
def test_with_send_temperature_false_no_request_carries_one_and_the_task_is_answered(
        system, make_cfg, tmp_path):
    def reasoning_agent(request, n):
        return REASONING_TEMPERATURE if "temperature" in request else agent_policy()(request, n)

    with FakeOpenAI(reasoning_agent) as server:
        (pred,), _ = predict(make_cfg, tmp_path, server.url, system,
                             "model.options.send_temperature=false")
        sent = [r["json"] for r in server.requests]
    assert pred.error is None and pred.predicted == ANSWER
    assert sent and not any("temperature" in r for r in sent)
    assert all(r["max_completion_tokens"] == 1024 for r in sent)


def test_a_refused_output_budget_field_names_the_other_one(make_cfg, fake):
    fake.queue = [error(400, "Unsupported parameter: 'max_tokens' is not supported with this "
                        "model. Use 'max_completion_tokens' instead.", param="max_tokens",
                        code="unsupported_parameter")]
    with pytest.raises(ModelError, match="Fix: model.options.max_tokens_param="
                                         "max_completion_tokens") as err:
        ask(gpt(make_cfg, fake.url, "model.options.max_tokens_param=max_tokens"))
    assert err.value.kind == "unsupported_parameter" and len(fake.requests) == 1
    # a budget too large for the model is refused for its value: no option would help
    fake.queue = [error(400, "max_tokens is too large: 100000. This model supports at most "
                        "16384 completion tokens.", param="max_tokens", code="invalid_value")]
    with pytest.raises(ModelError) as err:
        ask(gpt(make_cfg, fake.url, "model.options.max_tokens_param=max_tokens"))
    assert err.value.kind == "bad_request" and "options" not in str(err.value)


def test_leaving_temperature_out_is_recorded_and_keyed_apart_in_the_response_cache(
        make_cfg, fake, tmp_path):
    sends, omits = gpt(make_cfg, fake.url), gpt(make_cfg, fake.url,
                                                "model.options.send_temperature=false")
    assert (sends.sent_temperature(0.0), omits.sent_temperature(0.0)) == (0.0, None)
    ask(CachedModel(sends, tmp_path, "read_write"))
    cached = CachedModel(omits, tmp_path, "read_write")
    assert cached.sent_temperature(0.7) is None
    assert not ask(cached).cached and len(fake.requests) == 2  # a reply at 0 is not its reply
    assert ask(cached).cached and len(fake.requests) == 2
    assert "temperature" in fake.requests[0]["json"]
    assert "temperature" not in fake.requests[1]["json"]


def test_a_misspelt_or_mistyped_option_is_refused_with_the_fix(make_cfg):
    with pytest.raises(ConfigError, match="options.send_temprature of model gpt-4o-mini is "
                                          "not an option.*correct it to options.send_temperature"):
        make_model(make_cfg("model=gpt-4o-mini", "+model.options.send_temprature=false").model)
    with pytest.raises(ConfigError, match="must be true or false"):
        make_model(make_cfg("model=gpt-4o-mini", "model.options.send_temperature=omit").model)


def test_send_temperature_at_its_default_keeps_earlier_runs_identity(make_cfg):
    from omegaconf import open_dict

    from runners.identity import config_hash, predictions_hash

    now = make_cfg("model=gpt-4o-mini")
    earlier = make_cfg("model=gpt-4o-mini")  # recorded before the option existed
    with open_dict(earlier):
        del earlier.model.options["send_temperature"]
    assert config_hash(now) == config_hash(earlier)
    assert predictions_hash(now) == predictions_hash(earlier)
    omitted = make_cfg("model=gpt-4o-mini", "model.options.send_temperature=false")
    assert predictions_hash(omitted) != predictions_hash(now)


def test_a_model_that_answers_without_calling_tools_is_flagged_in_the_run_and_its_report(
        make_cfg, tmp_path, capsys, caplog):
    """A server that takes tool definitions and a model that never calls one (a chat
    template without tool calling): the run finishes, its metrics, tag, log and report say
    the agentic comparison is void."""
    from runners.experiment import run
    from tests.conftest import client_for

    root = write_mini_dataset(tmp_path / "d", n_docs=2)
    with FakeOpenAI(answers_without_tools) as server:
        metrics = run(read(make_cfg(
            "system=arag", f"dataset.root={root}", "model=openai-compatible",
            "model.name=llama3-no-tools", f"model.base_url={server.url}",
            "metrics.scorers=[retrieval]", "model.options.send_temperature=false")))
        offered = [bool(r["json"].get("tools")) for r in server.requests]
    assert offered and all(offered)  # tools were offered on every call
    assert metrics["n_answered"] == 2 and metrics["n_errors"] == 0
    assert metrics["tasks_without_tool_call"] == 2
    assert metrics["tasks_without_tool_call_share"] == 1.0
    (logged,) = client_for(tmp_path).search_runs(
        [e.experiment_id for e in client_for(tmp_path).search_experiments()])
    assert logged.info.status == "FINISHED"
    tag = logged.data.tags["tasks_without_tool_call"]
    assert "no tool on any of its 2 answered tasks" in tag
    assert "the agentic comparison is void for this run" in tag and 'tagged "tools"' in tag
    assert logged.data.params["temperature_sent"] == "not sent (the model's default applies)"
    assert any("agentic comparison is void" in r.getMessage() for r in caplog.records
               if r.levelname == "WARNING")
    console = capsys.readouterr().out
    caveats = console.split("\nrun ", 1)[0]  # above the table, each a line of its own
    assert "! arag called no tool: closed-book, its agentic comparison is void" in caveats
