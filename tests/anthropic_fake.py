"""A fake Anthropic Messages API on 127.0.0.1, for the real SDK over real HTTP.

Replies are real Messages-API bodies. Behaviour is scripted: ``queue`` specs are served
first, then ``handler(request_json, n)`` decides. A spec is a dict with any of:
``body`` (a full reply), ``status`` + ``error`` (an API error body), ``headers``,
``delay`` (seconds before answering), ``drop`` (close the socket, no reply),
``malformed`` (a 200 with a broken body). Every request is recorded.

Prompt caching is simulated as the API does it (a token is ~4 characters of JSON): the
prompt is tools, then system, then messages, block by block; a block carrying
``cache_control`` is a breakpoint, and one whose prefix is shorter than the model's minimum
cacheable prompt (``min_cache_tokens``; by default the documented minimum for the model)
caches nothing. The longest prefix cached before, found at a breakpoint or up to 20 blocks
before one, is ``cache_read_input_tokens``; from there to the last breakpoint is written,
``cache_creation_input_tokens``; what follows is ``input_tokens``. As in the API, a change
of ``tool_choice`` invalidates the cached messages but not tools and system.

``bucket`` (a ``tests.fake_bucket.TokenBucket``; off by default) holds the prompt tokens
per minute as the API does: over it, a 429 with ``retry-after``; every answer carries the
``anthropic-ratelimit-input-tokens-*`` headers.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from tests.fake_bucket import TokenBucket, retry_after
from tests.fake_http import FakeServer, JSONHandler

Spec = dict[str, Any]
# Minimum cacheable prompt length (Anthropic's prompt-caching docs); other models: 1,024.
MIN_CACHE_TOKENS = {"claude-haiku-4-5": 4096, "claude-opus-4-6": 4096, "claude-sonnet-4-6": 1024}
CACHE_LOOKBACK_BLOCKS = 20


class PromptBlock(NamedTuple):
    prefix: str  # hash of the prompt up to and including this block
    tokens: int  # prompt tokens up to and including this block
    breakpoint: bool


def prompt_blocks(request: dict) -> list[PromptBlock]:
    """The request's prompt in the order the cache sees it: tools, system, messages."""
    digest = hashlib.sha256(str(request.get("model")).encode())
    blocks: list[PromptBlock] = []
    tokens = 0

    def add(part: Any, block: dict) -> None:
        nonlocal tokens
        plain = json.dumps([part, {k: v for k, v in block.items() if k != "cache_control"}],
                           sort_keys=True)
        digest.update(plain.encode())
        tokens += len(plain) // 4
        blocks.append(PromptBlock(digest.hexdigest(), tokens, "cache_control" in block))

    for tool in request.get("tools") or []:
        add("tool", tool)
    system = request.get("system") or []
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
        add("system", block)
    digest.update(json.dumps(request.get("tool_choice"), sort_keys=True).encode())
    for i, message in enumerate(request.get("messages") or []):
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            add([i, message["role"]], block)
    return blocks


def text_reply(text: str, request: dict, usage: dict | None = None,
               stop_reason: str = "end_turn") -> Spec:
    return {"body": {"id": "msg_fake", "type": "message", "role": "assistant",
                     "model": request.get("model", "claude-fake"),
                     "content": [{"type": "text", "text": text}], "stop_reason": stop_reason,
                     "stop_sequence": None, "usage": usage or {}}}


def tool_reply(name: str, tool_input: dict | None, request: dict, n: int,
               usage: dict | None = None, stop_reason: str = "tool_use") -> Spec:
    """A tool call; ``tool_input=None`` with ``stop_reason="max_tokens"`` is one cut off
    before its input was written."""
    use = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": name}
    if tool_input is not None:
        use["input"] = tool_input
    return {"body": {"id": "msg_fake", "type": "message", "role": "assistant",
                     "model": request.get("model", "claude-fake"),
                     "content": [{"type": "text", "text": "Let me look."}, use],
                     "stop_reason": stop_reason, "stop_sequence": None, "usage": usage or {}}}


def error(status: int, kind: str, message: str, headers: dict | None = None) -> Spec:
    return {"status": status, "error": {"type": "error", "error": {"type": kind,
                                                                    "message": message}},
            "headers": headers or {}}


CHUNK = re.compile(r'<chunk id="([^"]+)">\n(.*?)\n</chunk>', re.DOTALL)
FIGURE = re.compile(r"\$\d|\d%|\d percent")
UNCITED = "management thanked employees for their work."


def request_text(request: dict) -> str:
    """Every text the request's messages hold: prompts and tool results."""
    parts: list[str] = []
    for message in request["messages"]:
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            inner = block.get("content", block.get("text", ""))
            parts.extend([inner] if isinstance(inner, str) else [b.get("text", "") for b in inner])
    return "\n".join(parts)


def citing_answer(request: dict) -> str:
    """An answer that cites as the prompt asks: for each chunk shown (at most two), its first
    line with a figure, verbatim, with ``[c:<id>]``; then one claim that cites nothing."""
    bullets = []
    for chunk_id, body in CHUNK.findall(request_text(request))[:2]:
        line = next((ln for ln in body.splitlines()
                     if FIGURE.search(ln) and not ln.startswith("[COMPANY")), None)
        if line is not None:
            bullets.append(f"{line.strip()} [c:{chunk_id}]")
    return "\n".join([*bullets, UNCITED])


def agent_policy(rounds: int = 2, cite: bool = False) -> Callable[[dict, int], Spec]:
    """Search, then read the first chunk each search named, ``rounds`` times; then answer.
    ``cite``: when the prompt asks for citations, the answer cites (``citing_answer``)."""

    def handle(request: dict, n: int) -> Spec:
        tools = request.get("tools") or []
        choice = (request.get("tool_choice") or {}).get("type", "auto")
        turns = [m for m in request["messages"] if m["role"] == "assistant"]
        if tools and choice != "none" and len(turns) < 2 * rounds:
            if len(turns) % 2 == 0:
                return tool_reply("semantic_search", {"query": "quarterly revenue and guidance",
                                                      "top_k": 3}, request, n)
            last = json.dumps(request["messages"][-1]["content"])
            ids = re.findall(r"Chunk ID: (\S+?)\\n", last)
            return tool_reply("chunk_read", {"chunk_ids": ids[:1] or ["missing"]}, request, n)
        if cite and "<cite_format>" in request_text(request):
            return text_reply(citing_answer(request), request)
        return text_reply("q3 revenue rose 14.2 percent to $612.4 million.", request)

    return handle


class FakeAnthropic(FakeServer):
    def __init__(self, handler: Callable[[dict, int], Spec] | None = None, delay: float = 0.0,
                 min_cache_tokens: int | None = None, bucket: TokenBucket | None = None):
        self.handler = handler or agent_policy()
        self.bucket = bucket
        self.queue: list[Spec] = []
        self.delay = delay
        self.min_cache_tokens = min_cache_tokens  # None: the documented minimum of the model
        self.requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, int]] = []  # usage of every successful reply
        self._cached_prefixes: set[str] = set()
        self.batches: dict[str, dict[str, Any]] = {}
        # custom_id -> "errored" | "expired" | "canceled" for batch items that do not succeed
        self.batch_failures: dict[str, str] = {}
        self.batch_polls_to_end = 1  # a batch reports "ended" at this poll
        self._lock = threading.Lock()
        # GET /v1/models, the free request a sweep checks the endpoint with: recorded here,
        # not in ``requests``; ``models_reply``: an ``error(...)`` spec to answer it with
        self.probes: list[dict[str, Any]] = []
        self.models_reply: Spec | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def models_list(self) -> Spec:
        """The Models API's list page (``GET /v1/models``), or ``models_reply``."""
        return self.models_reply or {"body": {"data": [{
            "type": "model", "id": "claude-haiku-4-5", "display_name": "Claude Haiku 4.5",
            "created_at": "2025-10-01T00:00:00Z"}], "has_more": False,
            "first_id": "claude-haiku-4-5", "last_id": "claude-haiku-4-5"}}

    def __enter__(self) -> FakeAnthropic:
        fake = self

        class Handler(JSONHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                if self.path.split("?")[0] == "/v1/models":
                    with fake._lock:
                        fake.probes.append({"path": self.path, "headers": self.header_dict()})
                    spec = fake.models_list()
                    self._send(spec.get("status", 200), json.dumps(
                        spec.get("error", spec.get("body"))).encode(), spec.get("headers", {}))
                    return
                with fake._lock:
                    fake.requests.append({"path": self.path, "headers": {}, "json": None})
                batch_id = self.path.split("/")[4].split("?")[0]
                batch = fake.batches[batch_id]
                if self.path.split("?")[0].endswith("/results"):
                    lines = "\n".join(json.dumps(r) for r in batch["results"]) + "\n"
                    self._send(200, lines.encode(), {"content-type": "application/x-jsonl"})
                    return
                batch["polls"] += 1
                ended = batch["polls"] >= fake.batch_polls_to_end
                self._send(200, json.dumps(fake._batch_body(batch_id, ended=ended))
                           .encode(), {})

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                request = self.read_json()
                if request is None:
                    self.hang_up()
                    return
                if self.path.split("?")[0].endswith("/cancel"):
                    batch_id = self.path.split("/")[4]
                    with fake._lock:
                        fake.requests.append({"path": self.path, "headers": {}, "json": None})
                    self._send(200, json.dumps(fake._batch_body(batch_id, ended=False)).encode(),
                               {})
                    return
                if self.path.split("?")[0].endswith("/messages/batches"):
                    with fake._lock:
                        fake.requests.append({"path": self.path, "headers": {}, "json": request})
                    batch_id = fake._new_batch(request["requests"])
                    self._send(200, json.dumps(fake._batch_body(batch_id, ended=False)).encode(), {})
                    return
                with fake._lock:
                    n = len(fake.requests)
                    fake.requests.append({"path": self.path, "headers": self.header_dict(),
                                          "json": request})
                    wait = fake._over_the_limit(request)
                    spec = fake.queue.pop(0) if fake.queue and wait is None else None
                limits = fake.bucket.anthropic_headers() if fake.bucket else {}
                if wait is not None:
                    spec = error(429, "rate_limit_error", "input tokens per minute exceeded",
                                 {**limits, "retry-after": retry_after(wait)})
                spec = spec or fake.handler(request, n)
                spec = {**spec, "headers": {**limits, **spec.get("headers", {})}}
                time.sleep(spec.get("delay", fake.delay))
                if spec.get("drop"):
                    self.hang_up()
                    return
                if spec.get("malformed"):
                    self._send(200, b'{"id": "msg_x", "type": "message", "content": [', {})
                    return
                if "error" in spec:
                    self._send(spec["status"], json.dumps(spec["error"]).encode(),
                               spec.get("headers", {}))
                    return
                body = spec["body"]
                body["usage"] = {**fake._usage(request), **body.get("usage", {})}
                with fake._lock:
                    fake.usages.append(dict(body["usage"]))
                self._send(200, json.dumps(body).encode(), spec.get("headers", {}))

        self.serve(Handler)
        return self

    def _over_the_limit(self, request: dict) -> float | None:
        """The bucket's retry-after for a request over it; None: admitted (or no bucket)."""
        if self.bucket is None:
            return None
        blocks = prompt_blocks(request)
        return self.bucket.take(blocks[-1].tokens if blocks else 0)

    def _new_batch(self, items: list[dict]) -> str:
        results = []
        for item in items:
            cid, params = item["custom_id"], item["params"]
            failure = self.batch_failures.get(cid)
            if failure == "errored":
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "invalid_request_error", "message": "bad item"}}}
            elif failure:
                result = {"type": failure}
            else:
                body = self.handler(params, len(self.requests))["body"]
                body["usage"] = {**self._usage(params), **body.get("usage", {})}
                result = {"type": "succeeded", "message": body}
            results.append({"custom_id": cid, "result": result})
        with self._lock:
            batch_id = f"msgbatch_{len(self.batches) + 1:04d}"
            self.batches[batch_id] = {"results": results, "polls": 0, "n": len(items)}
        return batch_id

    def _batch_body(self, batch_id: str, ended: bool) -> dict[str, Any]:
        n = self.batches[batch_id]["n"]
        return {"id": batch_id, "type": "message_batch",
                "processing_status": "ended" if ended else "in_progress",
                "request_counts": {"processing": 0 if ended else n, "succeeded": n if ended else 0,
                                   "errored": 0, "canceled": 0, "expired": 0},
                "created_at": "2026-11-22T00:00:00Z", "expires_at": "2026-11-23T00:00:00Z",
                "ended_at": "2026-11-22T00:01:00Z" if ended else None,
                "archived_at": None, "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{batch_id}/results" if ended
                else None}

    def _usage(self, request: dict) -> dict[str, int]:
        blocks = prompt_blocks(request)
        total = blocks[-1].tokens if blocks else 0
        minimum = self.min_cache_tokens
        if minimum is None:
            minimum = next((n for model, n in MIN_CACHE_TOKENS.items()
                            if str(request.get("model", "")).startswith(model)), 1024)
        breakpoints = [i for i, b in enumerate(blocks) if b.breakpoint and b.tokens >= minimum]
        usage = {"input_tokens": total, "output_tokens": 20,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not breakpoints:
            return usage
        looked_at = {j for i in breakpoints for j in range(max(0, i - CACHE_LOOKBACK_BLOCKS + 1), i + 1)}
        written = blocks[breakpoints[-1]].tokens
        with self._lock:
            read = max((blocks[j].tokens for j in looked_at
                        if blocks[j].prefix in self._cached_prefixes), default=0)
            self._cached_prefixes.update(blocks[i].prefix for i in breakpoints)
        usage.update(input_tokens=total - written, cache_read_input_tokens=read,
                     cache_creation_input_tokens=written - read)
        return usage


def main() -> None:
    """Serve the agent policy from its own process: ``python -m tests.anthropic_fake``."""
    import argparse
    import sys

    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with FakeAnthropic(agent_policy(args.rounds), delay=args.delay) as fake:
        print(fake.url, flush=True)
        sys.stdin.read()  # serve until the parent closes our stdin


if __name__ == "__main__":
    main()
