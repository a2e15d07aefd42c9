"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, for the real ``openai``
SDK over real HTTP.

Replies are real ``chat.completion`` bodies. Behaviour is scripted: ``queue`` specs are
served first, then ``handler(request_json, n)`` decides. A spec is a dict with any of:
``body`` (a full reply), ``status`` + ``error`` (an error body), ``headers``, ``delay``
(seconds before answering), ``drop`` (close the socket, no reply), ``malformed`` (a 200
with a broken body), ``no_usage`` (a reply without ``usage``). Every request is recorded.

``rejects_temperature`` plays a reasoning model that refuses ``temperature`` (OpenAI's
real 400), ``answers_without_tools`` a model that is offered tools and never calls one.
``no_tools=(status, message)`` plays a server without tool calling: every request that
offers tools gets that error (``VLLM_NO_TOOLS``, ``LLAMA_CPP_NO_TOOLS`` are what those
servers answer). Usage is counted as a server does (~4 characters of JSON a token), and
prompt caching as OpenAI does it: the longest prefix of an earlier request (whole messages,
at least ``min_cache_tokens``), in steps of 128 tokens, is ``cached_tokens``.

``bucket`` (a ``tests.fake_bucket.TokenBucket``; off by default) holds the prompt tokens
per minute: over it, a 429 with ``retry-after``; every answer carries OpenAI's
``x-ratelimit-*-tokens`` headers.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.fake_bucket import TokenBucket, retry_after
from tests.fake_http import FakeServer, JSONHandler

Spec = dict[str, Any]
ANSWER = "q3 revenue rose 14.2 percent to $612.4 million."
VLLM_NO_TOOLS = (400, '"auto" tool choice requires --enable-auto-tool-choice and '
                      "--tool-call-parser to be set")
LLAMA_CPP_NO_TOOLS = (500, "tools param requires --jinja flag")
CACHE_STEP = 128


def _reply(request: dict, message: dict, finish_reason: str) -> Spec:
    return {"body": {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                     "model": request.get("model", "fake-model"),
                     "choices": [{"index": 0, "message": {"role": "assistant", **message},
                                  "finish_reason": finish_reason, "logprobs": None}]}}


def text_reply(text: str, request: dict, finish_reason: str = "stop", **message: Any) -> Spec:
    return _reply(request, {"content": text, **message}, finish_reason)


def tool_reply(name: str, arguments: dict | str, request: dict, n: int,
               finish_reason: str = "tool_calls", text: str | None = None) -> Spec:
    """One tool call; ``arguments`` as a string is sent as it is (e.g. cut-off JSON)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    call = {"id": f"call_{n:04d}", "type": "function",
            "function": {"name": name, "arguments": raw}}
    return _reply(request, {"content": text, "tool_calls": [call]}, finish_reason)


def error(status: int, message: str, kind: str = "invalid_request_error",
          headers: dict | None = None, param: str | None = None, code: str | None = None
          ) -> Spec:
    return {"status": status, "headers": headers or {},
            "error": {"error": {"message": message, "type": kind, "param": param, "code": code}}}


# OpenAI's 400 to o-series and gpt-5 models sent temperature=0, body as the API sends it
REASONING_TEMPERATURE = error(
    400, "Unsupported value: 'temperature' does not support 0 with this model. Only the "
    "default (1) value is supported.", param="temperature", code="unsupported_value")


def rejects_temperature(request: dict, n: int) -> Spec:
    """OpenAI's answer to a reasoning model (o-series, gpt-5) asked for a temperature other
    than its default; without one, an answer."""
    if "temperature" in request:
        return REASONING_TEMPERATURE
    return text_reply(ANSWER, request)


def answers_without_tools(request: dict, n: int) -> Spec:
    """A model whose chat template has no tool calling (Ollama, llama.cpp): the server takes
    the tool definitions, and the model answers in text."""
    return text_reply(ANSWER, request)


def agent_policy(rounds: int = 2) -> Callable[[dict, int], Spec]:
    """Search, then read the first chunk the search named, ``rounds`` times; then answer."""

    def handle(request: dict, n: int) -> Spec:
        turns = [m for m in request["messages"] if m["role"] == "assistant"]
        if request.get("tools") and request.get("tool_choice") != "none" \
                and len(turns) < 2 * rounds:
            if len(turns) % 2 == 0:
                return tool_reply("semantic_search", {"query": "quarterly revenue and guidance",
                                                      "top_k": 3}, request, n)
            ids = re.findall(r"Chunk ID: (\S+)", request["messages"][-1]["content"])
            return tool_reply("chunk_read", {"chunk_ids": ids[:1] or ["missing"]}, request, n)
        return text_reply(ANSWER, request)

    return handle


class FakeOpenAI(FakeServer):
    def __init__(self, handler: Callable[[dict, int], Spec] | None = None, delay: float = 0.0,
                 no_tools: tuple[int, str] | None = None, min_cache_tokens: int = 1024,
                 bucket: TokenBucket | None = None):
        self.handler = handler or agent_policy()
        self.bucket = bucket
        self.queue: list[Spec] = []
        self.delay = delay
        self.no_tools = no_tools
        self.min_cache_tokens = min_cache_tokens
        self.requests: list[dict[str, Any]] = []
        self.replies: list[tuple[dict, dict]] = []  # (request, usage) of every reply
        self._prefixes: dict[str, int] = {}  # prefix hash -> its tokens
        self._lock = threading.Lock()
        # GET /v1/models, the free request a sweep checks the endpoint with: recorded here,
        # not in ``requests``; ``models_reply``: an ``error(...)`` spec to answer it with
        self.probes: list[dict[str, Any]] = []
        self.models_reply: Spec | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def usages(self) -> list[dict[str, Any]]:
        """The usage of every reply that reported one, in order."""
        return [usage for _, usage in self.replies]

    def __enter__(self) -> FakeOpenAI:
        fake = self

        class Handler(JSONHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                if self.path.split("?")[0] != "/v1/models":
                    self._send(404, b'{"error": {"message": "not found"}}', {})
                    return
                with fake._lock:
                    fake.probes.append({"path": self.path, "headers": self.header_dict()})
                spec = fake.models_reply or {"body": {"object": "list", "data": [
                    {"id": "fake-model", "object": "model", "created": 0, "owned_by": "fake"}]}}
                self._send(spec.get("status", 200), json.dumps(
                    spec.get("error", spec.get("body"))).encode(), spec.get("headers", {}))

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                request = self.read_json()
                if request is None:
                    self.hang_up()
                    return
                with fake._lock:
                    n = len(fake.requests)
                    fake.requests.append({"path": self.path, "headers": self.header_dict(),
                                          "json": request})
                    wait = fake.bucket.take(_prompt_tokens(request)) if fake.bucket else None
                    spec = fake.queue.pop(0) if fake.queue and wait is None else None
                limits = fake.bucket.openai_headers() if fake.bucket else {}
                if wait is not None:
                    spec = error(429, "Rate limit reached for tokens per min", "tokens",
                                 {**limits, "retry-after": retry_after(wait)})
                if spec is None and fake.no_tools and request.get("tools"):
                    spec = error(fake.no_tools[0], fake.no_tools[1])
                spec = spec or fake.handler(request, n)
                spec = {**spec, "headers": {**limits, **spec.get("headers", {})}}
                time.sleep(spec.get("delay", fake.delay))
                if spec.get("drop"):
                    self.hang_up()
                elif spec.get("malformed"):
                    self._send(200, b'{"id": "chatcmpl-x", "choices": [', {})
                elif "error" in spec:
                    self._send(spec["status"], json.dumps(spec["error"]).encode(),
                               spec.get("headers", {}))
                else:
                    self._send(200, json.dumps(fake._answer(request, spec)).encode(),
                               spec.get("headers", {}))

        self.serve(Handler)
        return self

    def _answer(self, request: dict, spec: Spec) -> dict[str, Any]:
        body = spec["body"]
        if not spec.get("no_usage"):
            body["usage"] = self._usage(request, body)
            with self._lock:
                self.replies.append((request, body["usage"]))
        return body

    def _usage(self, request: dict, body: dict) -> dict[str, Any]:
        digest = hashlib.sha256(json.dumps([request.get("model"), request.get("tools")],
                                           sort_keys=True).encode())
        tokens = len(json.dumps(request.get("tools") or [])) // 4
        prefixes = []
        for message in request.get("messages") or []:
            part = json.dumps(message, sort_keys=True)
            digest.update(part.encode())
            tokens += len(part) // 4
            prefixes.append((digest.hexdigest(), tokens))
        with self._lock:
            seen = max((t for h, t in prefixes if h in self._prefixes), default=0)
            self._prefixes.update(prefixes)
        cached = seen // CACHE_STEP * CACHE_STEP if seen >= self.min_cache_tokens else 0
        message = body["choices"][0]["message"]
        completion = max(1, len(json.dumps([message.get("content"),
                                            message.get("tool_calls")])) // 4)
        return {"prompt_tokens": tokens, "completion_tokens": completion,
                "total_tokens": tokens + completion,
                "prompt_tokens_details": {"cached_tokens": cached}}


def _prompt_tokens(request: dict) -> int:
    """A request's prompt tokens as ``_usage`` counts them (~4 characters of JSON a token)."""
    return len(json.dumps(request.get("tools") or [])) // 4 + sum(
        len(json.dumps(m, sort_keys=True)) // 4 for m in request.get("messages") or [])
