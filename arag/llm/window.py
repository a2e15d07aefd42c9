"""A model's context window, held before a request is sent.

The rule: a request needs the tokens of its prompt (system, messages and tool definitions as
the JSON the API is sent, estimated by the model's ``count_tokens``: about 4 characters a
token) plus the ``max_tokens`` it reserves for the reply. A request that needs more than the
window (``judge.context_limit`` for a judge) is not sent and never truncated: the call fails
with a ``ModelError`` of kind ``context_window`` that says so, and the scorer records its
score null with that reason. The dry run applies the same rule (``request_tokens``), so
what it counts in advance is what a run leaves unsent. Near the limit the API's own count
decides: a request the estimate lets through and the API refuses fails as any refused call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from arag.llm.base import ChatModel, Completion, Message, ModelError, ToolSpec, call_arguments
from arag.llm.cache import WrappedModel

CONTEXT_WINDOW = "context_window"  # ModelError.kind of a request left unsent


def request_tokens(count: Callable[[str], int], system: str, messages: list[Message],
                   tools: list[ToolSpec] | None = None, max_tokens: int = 1024,
                   **_: Any) -> int:
    """The tokens one request needs: its prompt as sent (``count`` estimates them) plus the
    reply it reserves."""
    prompt = json.dumps({"system": system, "messages": messages,
                         "tools": [t.to_api() for t in tools or []]}, ensure_ascii=False)
    return count(prompt) + max_tokens


def judge_window(panel_judge: str | None = None) -> str:
    """The setting a judge's window is read from: the primary judge's, or a panel judge's
    (its own ``conf/judge`` file)."""
    return "judge.context_limit" if panel_judge is None else \
        f"context_limit of judge.panel's {panel_judge}"


def too_long(needed: int, limit: int, key: str) -> str:
    """What an unsent request's score says."""
    return (f"not sent: the judge request needs ~{needed:,} tokens (its prompt, estimated, "
            f"plus the reply it reserves), more than {key}={limit:,}")


class WindowedModel(WrappedModel):
    """Sends only the requests that fit ``limit`` tokens (``request_tokens``); ``key`` names
    the setting in what an unsent request says."""

    def __init__(self, inner: ChatModel, limit: int, key: str):
        super().__init__(inner)
        self.limit = limit
        self.key = key

    def refusal(self, request: dict[str, Any]) -> ModelError | None:
        """The error of a request that does not fit, or None."""
        needed = request_tokens(self.count_tokens, **request)
        if needed <= self.limit:
            return None
        return ModelError(too_long(needed, self.limit, self.key), kind=CONTEXT_WINDOW)

    def complete(self, system: str, messages: list[Message], tools: list[ToolSpec] | None = None,
                 max_tokens: int = 1024, temperature: float = 0.0,
                 tool_choice: str = "auto") -> Completion:
        refused = self.refusal({"system": system, "messages": messages, "tools": tools,
                                "max_tokens": max_tokens})
        if refused is not None:
            raise refused
        return self.inner.complete(system, messages, tools, max_tokens, temperature, tool_choice)

    def complete_batch(self, requests: dict[str, dict[str, Any]]
                       ) -> dict[str, Completion | ModelError]:
        refused = {cid: self.refusal(call_arguments(r)) for cid, r in requests.items()}
        out: dict[str, Completion | ModelError] = {
            cid: error for cid, error in refused.items() if error is not None}
        fitting = {cid: r for cid, r in requests.items() if cid not in out}
        if fitting:
            out.update(self.inner.complete_batch(fitting))
        return out
