"""The OpenAI-compatible provider: any server that speaks the chat-completions protocol
(OpenAI itself, vLLM, Ollama, llama.cpp's server, LM Studio, SGLang) through the official
``openai`` SDK, imported only when a model is built.

* ``model.base_url`` is the server (``http://127.0.0.1:8000/v1``; null: OpenAI's API) and
  ``model.model_id`` the model it serves. The key comes only from the environment variable
  ``model.api_key_env`` names (null: a local server that needs none; nothing is sent); it is
  never a config value and never logged. Key and server never come from the SDK's own
  variables (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) unless ``api_key_env`` names one.
* Messages stay in the project's format (``arag.llm.base``) everywhere else: ``tool_use``
  blocks go out as an assistant's ``tool_calls``, ``tool_result`` blocks as ``tool`` role
  messages, and a reply comes back as text and ``tool_use`` blocks. Finish reasons map onto
  the stop reasons the agent loop handles: ``stop`` -> ``end_turn``, ``tool_calls`` ->
  ``tool_use``, ``length`` -> ``max_tokens`` (a tool call cut there is reported to the
  model, not run), ``content_filter`` and a ``refusal`` -> ``refusal``.
* ``model.options`` (checked when the model is built; a misspelt key is refused with the
  known ones): ``max_tokens_param`` names the request field of the output budget
  (``max_tokens``; newer OpenAI models ``max_completion_tokens``), and
  ``send_temperature: false`` leaves ``temperature`` out of every request, for reasoning
  models that take only their default (OpenAI's o-series and gpt-5). A 400 refusing either
  field fails at once (``unsupported_parameter``) naming the option that fixes it; nothing
  is changed behind the config's back.
* A server that refuses tool definitions is told apart on the first call that offers tools
  (an error naming tools before any tool call worked): that call, and every later one
  offering tools, fails with a ``tools_unsupported`` error saying the agent cannot run here
  while naive and stuffing can, and how to enable tool calling on the server.
* Retries run in the shared loop (``arag.llm.retry``; the SDK's own are off): 429 with its
  ``retry-after``, 5xx, timeouts, connection errors and malformed replies
  (``arag.llm.api_errors``); other 4xx fail at once with the server's message.
* Every request passes the account's rate limiter (``arag.llm.limits``), which learns the
  budgets from the ``x-ratelimit-*`` headers of each answer (``rate_limit_headers``; a
  local server that sends none is paced only after a 429) and is seeded by the
  ``model.*_per_minute`` limits.
* Usage: ``prompt_tokens`` less the cached part (``prompt_tokens_details.cached_tokens``,
  priced at ``price_cache_read``) is ``input_tokens``; ``completion_tokens`` (reasoning
  included) is ``output_tokens``. A reply without usage is malformed: its cost is unknown.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import time
from typing import Any

from arag.config import ConfigError
from arag.llm.api_errors import MalformedResponse, api_message, classify_sdk_error, parse_reply, probe
from arag.llm.base import (
    APIFailure,
    ChatModel,
    Completion,
    Message,
    MissingCredentials,
    ModelError,
    ToolSpec,
    Usage,
)
from arag.llm.limits import Demand, Pace, RateLimiter, Seeds, limiter_for
from arag.llm.rate_headers import OPENAI
from arag.llm.registry import register_provider
from arag.llm.retry import RetryPolicy, call_with_retries
from arag.llm.tokens import prompt_tokens
from arag.redact import reveal

PROVIDER = "openai-compatible"
OPENAI_URL = "https://api.openai.com/v1"
NO_TOOLS = "tools_unsupported"
UNSUPPORTED = "unsupported_parameter"
# model.options this provider reads, with their defaults
OPTIONS: dict[str, Any] = {"max_tokens_param": "max_tokens", "send_temperature": True}
# the two fields that carry the output budget: a model refusing one takes the other
BUDGET_FIELDS = ("max_tokens", "max_completion_tokens")
# how a server says a field is refused as such (not for its value: "supports at most ...")
UNSUPPORTED_WORDS = re.compile(r"unsupported|not supported|does not support|only the default")
# finish_reason -> the stop reasons of arag.llm.base (what the agent loop handles)
FINISH_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                  "function_call": "tool_use", "content_filter": "refusal"}
# how servers without tool calling answer a request that offers tools
NO_TOOL_STATUS = (400, 404, 422, 500, 501)
FILTERED = "(no reply: the server's content filter withheld it, finish_reason=content_filter)"
# sent where no key is configured: the SDK wants one; a server without auth ignores it
NO_KEY = "no-key"


class ToolsUnsupported(Exception):
    """The server refused the tool definitions of a request."""


def api_key(key_env: str | None) -> str:
    if not key_env:
        return NO_KEY
    key = os.environ.get(key_env, "").strip()
    if not key:
        raise MissingCredentials(
            f"provider {PROVIDER} reads its API key from {key_env} (model.api_key_env): "
            f"export {key_env}=... (it is never read from a config file), or set "
            "model.api_key_env=null for a local server that needs no key")
    return key


class OpenAICompatibleModel(ChatModel):
    provider = PROVIDER
    rate_limit_headers = OPENAI

    def __init__(self, cfg: Any):
        try:
            import openai
        except ImportError as exc:
            raise ImportError(f"model.provider={PROVIDER} needs the SDK: pip install openai") \
                from exc
        self._openai = openai
        self.name = cfg.name
        self.model_id = cfg.model_id
        self.key_env = cfg.api_key_env
        self.server = cfg.base_url or OPENAI_URL  # as configured: credentials redacted
        # a URL given with credentials on the command line is redacted in the config
        key = api_key(self.key_env)
        url = reveal(cfg.base_url) if cfg.base_url else OPENAI_URL
        self.client = openai.OpenAI(api_key=key, base_url=url, max_retries=0,
                                    timeout=float(cfg.timeout_s))
        options = provider_options(cfg.name, dict(cfg.options or {}))
        # newer OpenAI models take max_completion_tokens; most local servers max_tokens
        self.max_tokens_param = str(options["max_tokens_param"])
        # reasoning models (OpenAI's o-series, gpt-5) refuse any temperature but their own
        self.send_temperature: bool = options["send_temperature"]
        # None: no pacing at all (what a fixed concurrency did; the bench compares the two)
        self.limiter: RateLimiter | None = limiter_for(self.provider, url, key, self.model_id,
                                                       Seeds.from_config(cfg))
        self.sleep = time.sleep  # overridable: tests remove waits
        self.retry = RetryPolicy(int(cfg.max_retries), float(cfg.retry_base_delay_s),
                                 retry_after_max_s=float(cfg.retry_after_max_s))
        self.tools_refused: str | None = None  # why, once the server refused tools
        self._tools_worked = False

    def probe(self, timeout_s: float) -> APIFailure | None:
        """``GET <base_url>/models``: free, and every OpenAI-compatible server answers it."""
        return probe(lambda: self.client.models.list(timeout=timeout_s), self.classify_error)

    def sent_temperature(self, requested: float) -> float | None:
        return requested if self.send_temperature else None

    def reply_settings(self) -> dict[str, Any]:
        return {} if self.send_temperature else {"temperature": "not sent"}

    def endpoint(self) -> str | None:
        return None if self.server == OPENAI_URL else self.server

    def complete(self, system: str, messages: list[Message], tools: list[ToolSpec] | None = None,
                 max_tokens: int = 1024, temperature: float = 0.0,
                 tool_choice: str = "auto") -> Completion:
        if tools and self.tools_refused:
            raise ModelError(self.tools_refused, kind=NO_TOOLS)
        request = self._request(system, messages, tools, max_tokens, temperature, tool_choice)
        pace = None if self.limiter is None else Pace(
            self.limiter, Demand(lambda: prompt_tokens(system, messages, tools), max_tokens),
            self.rate_limit_headers)

        def call() -> Completion:
            started = time.perf_counter()
            raw = self._send(request, bool(tools))
            if pace is not None:
                pace.heard(raw.headers)
            return parse_reply(self._completion, raw.parse(), started)

        completion = call_with_retries(call, self.classify_error, self.retry, self.name,
                                       lambda seconds: self.sleep(seconds), pace)
        self._tools_worked = self._tools_worked or bool(tools)
        return completion

    def _send(self, request: dict[str, Any], offers_tools: bool) -> Any:
        try:
            return self.client.chat.completions.with_raw_response.create(**request)
        except self._openai.APIStatusError as exc:
            if offers_tools and not self._tools_worked and _refuses_tools(exc, self.model_id):
                self.tools_refused = (
                    f"the server at {self.server} does not take tool definitions for model "
                    f"{self.model_id} (HTTP {exc.status_code}: {api_message(exc)}). The agent "
                    "(system=arag) needs tool calling; naive and stuffing do not. Fix: enable "
                    "tool calling on the server (vLLM: --enable-auto-tool-choice "
                    "--tool-call-parser <parser>; llama.cpp: llama-server --jinja; Ollama: a "
                    "model with tool support), or run system=naive,stuffing")
                raise ToolsUnsupported(self.tools_refused) from None
            raise

    def classify_error(self, exc: Exception) -> APIFailure | None:
        """429 (with its retry-after), 5xx, timeouts, connection errors and malformed replies
        are retried; other 4xx, a server refusing tools and a model refusing a field an
        option controls, fail at once."""
        if isinstance(exc, ToolsUnsupported):
            return APIFailure(NO_TOOLS, str(exc), retryable=False)
        failure = classify_sdk_error(exc, self._openai, f"{PROVIDER} API ({self.server})")
        refused = self._refused_field(exc)
        if failure is not None and refused is not None:
            return APIFailure(UNSUPPORTED, f"{failure.message.rstrip('.')}. {refused}",
                              retryable=False)
        if failure is not None and failure.kind == "auth":
            sent = (f"the key in {self.key_env} (model.api_key_env) was refused" if self.key_env
                    else "no key was sent: set model.api_key_env to the variable holding it")
            return APIFailure(failure.kind, f"{failure.message}; {sent}", retryable=False)
        return failure

    def _refused_field(self, exc: Exception) -> str | None:
        """What to do when a 400 refuses a field an option controls as unsupported (OpenAI
        names the field in the error's ``param``; other servers only in its message); None
        for any other error (a budget too large for the model is not one)."""
        if not isinstance(exc, self._openai.APIStatusError) or exc.status_code != 400:
            return None
        param, message = str(getattr(exc, "param", None) or ""), api_message(exc).lower()
        if not (str(getattr(exc, "code", None) or "").startswith("unsupported")
                or UNSUPPORTED_WORDS.search(message)):
            return None
        fixes = {self.max_tokens_param: "max_tokens_param=" + next(
            f for f in BUDGET_FIELDS if f != self.max_tokens_param)}
        if self.send_temperature:
            fixes["temperature"] = "send_temperature=false"
        field = next((f for f in fixes if param == f or (not param and f in message)), None)
        if field is None:
            return None
        option = fixes[field]
        what = ("leaves temperature out of every request, so the model's own default applies "
                "(reasoning models such as OpenAI's o-series and gpt-5 take no other)"
                if field == "temperature" else
                f"sends the output budget as {option.split('=')[1]} instead")
        return (f"Model {self.model_id} does not take `{field}`. Fix: "
                f"model.options.{option} (judge.options.{option} for a judge, or `options:` in "
                f"the model's YAML), which {what}; see docs/models.md")

    def _request(self, system: str, messages: list[Message], tools: list[ToolSpec] | None,
                 max_tokens: int, temperature: float, tool_choice: str) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model_id, "messages": to_chat(system, messages),
                                   self.max_tokens_param: max_tokens}
        if self.send_temperature:
            request["temperature"] = temperature
        if tools:
            request["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema}}
                for t in tools]
            request["tool_choice"] = "none" if tool_choice == "none" else "auto"
        return request

    def _completion(self, response: Any, started: float) -> Completion:
        choice = response.choices[0]
        message = choice.message
        cut = choice.finish_reason == "length"
        content: list[dict[str, Any]] = []
        refusal = getattr(message, "refusal", None)
        text = message.content or refusal or ""
        if text:
            content.append({"type": "text", "text": text})
        for i, call in enumerate(message.tool_calls or []):
            content.append({"type": "tool_use", "id": call.id or f"call_{i}",
                            "name": call.function.name,
                            "input": _arguments(call.function.arguments, cut)})
        stop = stop_reason(choice.finish_reason, bool(message.tool_calls), bool(refusal))
        if stop == "refusal" and not text:
            content.append({"type": "text", "text": FILTERED})
        return Completion(content=content, stop_reason=stop, usage=_usage(response.usage),
                          model=str(response.model or self.model_id),
                          latency_ms=(time.perf_counter() - started) * 1000)


def provider_options(model: str, given: dict[str, Any]) -> dict[str, Any]:
    """``model.options`` with their defaults; a key this provider does not read, or a
    ``send_temperature`` that is not true/false, raises ConfigError with the fix."""
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:
        close = difflib.get_close_matches(unknown[0], OPTIONS, n=1)
        raise ConfigError(
            f"options.{unknown[0]} of model {model} is not an option of provider {PROVIDER}: "
            f"nothing reads it (its options: {', '.join(OPTIONS)}). Fix: "
            + (f"correct it to options.{close[0]}" if close else f"remove options.{unknown[0]}"))
    options = {**OPTIONS, **given}
    if not isinstance(options["send_temperature"], bool):
        raise ConfigError(f"options.send_temperature={options['send_temperature']!r} of model "
                          f"{model} must be true or false. Fix: options.send_temperature=false")
    return options


def stop_reason(finish_reason: str | None, has_tool_calls: bool, refused: bool) -> str:
    """The project's stop reason for a chat-completions ``finish_reason``. Some servers
    (Ollama) finish a reply holding tool calls with ``stop``: the calls decide."""
    if refused:
        return "refusal"
    stop = FINISH_REASONS.get(str(finish_reason), str(finish_reason or "end_turn"))
    return "tool_use" if has_tool_calls and stop == "end_turn" else stop


def _usage(usage: Any) -> Usage:
    if usage is None:
        raise MalformedResponse("the reply has no usage (token counts), so its cost is unknown")
    details = getattr(usage, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    return Usage(input_tokens=int(usage.prompt_tokens) - cached,
                 output_tokens=int(usage.completion_tokens), cache_read_input_tokens=cached)


def _arguments(raw: Any, cut: bool) -> Any:
    """A tool call's arguments as a dict. Arguments cut off at ``length`` are ``{}`` (the
    agent loop reports the cut call to the model); other text that is not JSON stays text,
    so the tool answers that it takes a JSON object."""
    if isinstance(raw, dict):
        return raw
    try:
        return json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {} if cut else str(raw)


def _refuses_tools(exc: Any, model_id: str) -> bool:
    """An error about tools (the model's own name aside: ``llama3-groq-tool-use`` not found
    is not one)."""
    message = api_message(exc).lower().replace(model_id.lower(), "")
    return exc.status_code in NO_TOOL_STATUS and "tool" in message


def to_chat(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """The project's messages (Anthropic's format) as chat-completions messages."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
        elif message["role"] == "assistant":
            out.append(_assistant(content))
        else:
            out.extend(_user(content))
    return out


def _assistant(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    text = "".join(b["text"] for b in blocks if b.get("type") == "text")
    calls = [{"id": b["id"], "type": "function", "function": {
        "name": b["name"],
        "arguments": b["input"] if isinstance(b["input"], str) else json.dumps(b["input"])}}
        for b in blocks if b.get("type") == "tool_use"]
    out: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        out["tool_calls"] = calls
    return out


def _user(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results become ``tool`` messages (they must follow the calls directly); any
    text the turn adds follows them as one user message."""
    out = [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": _text(b["content"])}
           for b in blocks if b.get("type") == "tool_result"]
    text = "\n\n".join(b["text"] for b in blocks if b.get("type") == "text")
    if text:
        out.append({"role": "user", "content": text})
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content)


@register_provider(PROVIDER, env_var_keys=("api_key_env",), max_temperature=2.0)
def _openai_compatible(cfg: Any) -> ChatModel:
    return OpenAICompatibleModel(cfg)
