"""The Anthropic provider: Claude through the official SDK (2.x, on httpx2).

* The key comes only from ``ANTHROPIC_API_KEY`` (declared with the provider, so the
  credential check before a run asks the catalogue); it is never a config value and never
  logged. ``model.base_url`` points the SDK elsewhere (a proxy, or the tests' fake server).
* Retries run in the shared loop (``arag.llm.retry``; the SDK's own are off, so behaviour
  is explicit and testable); ``classify_error`` says what is retried: 429 (honouring
  ``retry-after``), 529 overloaded, any 5xx, connection errors, timeouts and malformed
  replies, up to ``model.max_retries``; other 4xx (400/401/403/404 ...) fail at once with
  the API's message. ``sleep`` is an attribute, so tests remove the waits.
* Prompt caching (``model.prompt_caching``): breakpoints on the last tool definition, the
  system prompt and, while tools can be called, the newest block of the conversation, so
  each agent loop reads everything up to the previous turn from the cache. The API caches
  nothing shorter than the model's minimum cacheable prompt (4,096 tokens for Haiku 4.5
  and Opus 4.6, 1,024 for Sonnet 4.6): tools and system alone (~450 tokens) never do.
* Every request passes the account's rate limiter (``arag.llm.limits``), which learns the
  budgets from the ``anthropic-ratelimit-*`` headers of each answer (``rate_limit_headers``)
  and is seeded by ``model.requests_per_minute``, ``tokens_per_minute``,
  ``input_tokens_per_minute`` and ``output_tokens_per_minute``.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from arag.llm.api_errors import MalformedResponse, classify_sdk_error, parse_reply, probe
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
from arag.llm.rate_headers import ANTHROPIC
from arag.llm.registry import register_provider
from arag.llm.retry import RetryPolicy, call_with_retries
from arag.llm.tokens import prompt_tokens
from arag.redact import reveal

log = logging.getLogger(__name__)
KEY_ENV = "ANTHROPIC_API_KEY"


def api_key() -> str:
    key = os.environ.get(KEY_ENV, "").strip()
    if not key:
        raise MissingCredentials(
            f"provider anthropic needs an API key in the environment: export {KEY_ENV}=sk-ant-... "
            "(it is never read from a config file), or use model=offline")
    return key


class ClaudeModel(ChatModel):
    provider = "anthropic"
    rate_limit_headers = ANTHROPIC

    def __init__(self, cfg: Any):
        try:
            import anthropic
        except ImportError as exc:  # pragma: no cover - a dependency of the project
            raise ImportError("model.provider=anthropic needs the SDK: pip install anthropic") \
                from exc
        self._anthropic = anthropic
        self.name = cfg.name
        self.model_id = cfg.model_id
        self.max_retries = int(cfg.max_retries)
        self.prompt_caching = bool(cfg.prompt_caching)
        self.base_url: str | None = cfg.base_url or None  # as configured: credentials redacted
        # a URL given with credentials on the command line is redacted in the config
        key = api_key()
        self.client = anthropic.Anthropic(api_key=key,
                                          base_url=reveal(cfg.base_url) if cfg.base_url else None,
                                          max_retries=0, timeout=float(cfg.timeout_s))
        # None: no pacing at all (what a fixed concurrency did; the bench compares the two)
        self.limiter: RateLimiter | None = limiter_for(
            self.provider, reveal(cfg.base_url) if cfg.base_url else None, key, self.model_id,
            Seeds.from_config(cfg))
        self.sleep = time.sleep  # overridable: tests remove waits
        self.retry = RetryPolicy(int(cfg.max_retries), float(cfg.retry_base_delay_s),
                                 retry_after_max_s=float(cfg.retry_after_max_s))
        self.batch_poll_s = 30.0  # Message Batches usually end within the hour
        self.batch_timeout_s = float(getattr(cfg, "batch_timeout_s", 86_400.0))

    def endpoint(self) -> str | None:
        return self.base_url

    def complete(self, system: str, messages: list[Message], tools: list[ToolSpec] | None = None,
                 max_tokens: int = 1024, temperature: float = 0.0,
                 tool_choice: str = "auto") -> Completion:
        request = self._request(system, messages, tools, max_tokens, temperature, tool_choice)
        pace = None if self.limiter is None else Pace(
            self.limiter, Demand(lambda: prompt_tokens(system, messages, tools), max_tokens),
            self.rate_limit_headers)

        def call() -> Completion:
            started = time.perf_counter()
            raw = self.client.messages.with_raw_response.create(**request)
            if pace is not None:
                pace.heard(raw.headers)
            return parse_reply(self._completion, raw.parse(), started)

        return call_with_retries(call, self.classify_error, self.retry, self.name,
                                 lambda seconds: self.sleep(seconds), pace)

    def complete_batch(self, requests: dict[str, dict[str, Any]]) -> dict[str, Completion | ModelError]:
        """Message Batches (half price): submit, poll until ended, merge results by custom id.

        Items that errored, expired or were cancelled come back as ModelErrors naming why.
        """
        if not requests:
            return {}
        params: list[Any] = [{"custom_id": cid, "params": self._request(
            r["system"], r["messages"], r.get("tools"), r.get("max_tokens", 1024),
            r.get("temperature", 0.0), r.get("tool_choice", "auto"))}
            for cid, r in requests.items()]
        batches = self.client.messages.batches
        batch = self._with_retries(lambda: batches.create(requests=params))
        log.info("%s: message batch %s submitted (%d requests)", self.name, batch.id, len(params))
        batch_id = batch.id
        waited = 0.0
        while batch.processing_status != "ended":
            if waited >= self.batch_timeout_s:
                self._cancel_batch(batch_id)
                raise ModelError(f"message batch {batch_id} did not end within "
                                 f"{self.batch_timeout_s:.0f} s (judge.batch_timeout_s); "
                                 "it was cancelled")
            self.sleep(self.batch_poll_s)
            waited += self.batch_poll_s
            batch = self._with_retries(lambda: batches.retrieve(batch_id))
        out: dict[str, Completion | ModelError] = {}
        for entry in self._with_retries(lambda: list(batches.results(batch_id))):
            result = entry.result
            if result.type == "succeeded":
                try:
                    completion = parse_reply(self._completion, result.message, time.perf_counter())
                except MalformedResponse as exc:
                    out[entry.custom_id] = ModelError(f"batch item malformed: {exc}")
                    continue
                completion.meta["batch"] = True
                out[entry.custom_id] = completion
            else:
                detail = getattr(getattr(result, "error", None), "error", None)
                message = getattr(detail, "message", "") if detail else ""
                out[entry.custom_id] = ModelError(f"batch item {result.type}"
                                                  + (f": {message}" if message else ""))
        for cid in requests:
            out.setdefault(cid, ModelError("batch item missing from the batch's results"))
        return out

    def _cancel_batch(self, batch_id: str) -> None:
        try:
            self.client.messages.batches.cancel(batch_id)
        except self._anthropic.APIError as exc:  # best effort: it expires at 24 h anyway
            log.warning("%s: could not cancel message batch %s: %s", self.name, batch_id, exc)

    def _with_retries(self, call: Any) -> Any:
        return call_with_retries(call, self.classify_error, self.retry, self.name,
                                 lambda seconds: self.sleep(seconds))

    def probe(self, timeout_s: float) -> APIFailure | None:
        """``GET /v1/models``: free, and it needs the key and the endpoint a call needs."""
        return probe(lambda: self.client.models.list(limit=1, timeout=timeout_s),
                     self.classify_error)

    def sent_temperature(self, requested: float) -> float | None:
        return None  # the current Messages API takes no sampling parameters (``_request``)

    def classify_error(self, exc: Exception) -> APIFailure | None:
        """429 (with its retry-after), 529, 408/409, any 5xx, connection errors, timeouts and
        malformed replies are retried; other 4xx fail at once with the API's message."""
        return classify_sdk_error(exc, self._anthropic, "Anthropic API")

    def _request(self, system: str, messages: list[Message], tools: list[ToolSpec] | None,
                 max_tokens: int, temperature: float, tool_choice: str) -> dict[str, Any]:
        # the current Messages API takes no sampling parameters: temperature is not sent
        request: dict[str, Any] = {"model": self.model_id, "max_tokens": max_tokens,
                                   "messages": messages}
        cache = {"cache_control": {"type": "ephemeral"}} if self.prompt_caching else {}
        if system:
            request["system"] = [{"type": "text", "text": system, **cache}]
        if tools:
            specs = [t.to_api() for t in tools]
            if cache:
                specs[-1] = {**specs[-1], **cache}
            request["tools"] = specs
            request["tool_choice"] = {"type": "none" if tool_choice == "none" else "auto"}
        # Only a conversation that goes on re-sends this prefix: a one-shot prompt marked
        # here would pay the cache-write surcharge (1.25x) for a read that never comes.
        if cache and tools and tool_choice != "none":
            request["messages"] = _mark_last_block(messages, cache)
        return request

    def _completion(self, response: Any, started: float) -> Completion:
        content = []
        for block in response.content:
            if block.type == "text":
                content.append({"type": "text", "text": block.text})
            elif block.type == "tool_use":
                arguments = block.input
                if arguments is None and response.stop_reason == "max_tokens":
                    arguments = {}  # cut off before its input: the agent loop reports it
                content.append({"type": "tool_use", "id": block.id, "name": block.name,
                                "input": dict(arguments)})
        u = response.usage
        usage = Usage(int(u.input_tokens), int(u.output_tokens),
                      int(getattr(u, "cache_read_input_tokens", 0) or 0),
                      int(getattr(u, "cache_creation_input_tokens", 0) or 0))
        return Completion(content=content, stop_reason=str(response.stop_reason), usage=usage,
                          model=str(response.model),
                          latency_ms=(time.perf_counter() - started) * 1000)


def _mark_last_block(messages: list[Message], cache: dict[str, Any]) -> list[Message]:
    """A copy of ``messages`` whose last content block carries ``cache``; the caller's list,
    messages and blocks stay as they were."""
    if not messages or not messages[-1].get("content"):
        return messages
    last = messages[-1]
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    if blocks[-1].get("type") == "text" and not blocks[-1].get("text"):
        return messages  # the API refuses cache_control on an empty text block
    blocks[-1] = {**blocks[-1], **cache}
    return [*messages[:-1], {**last, "content": blocks}]


@register_provider("anthropic", env_vars=(KEY_ENV,), max_temperature=1.0)
def _claude(cfg: Any) -> ChatModel:
    return ClaudeModel(cfg)
