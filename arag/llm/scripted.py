"""A model that replays given completions: for tests. Fails loudly when the script runs out."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable
from typing import Any

from arag.llm.base import ChatModel, Completion, Message, ToolSpec, Usage
from arag.llm.registry import register_provider


class ScriptExhausted(AssertionError):
    pass


class ScriptedModel(ChatModel):
    provider = "scripted"

    def __init__(self, outputs: Iterable[str | dict[str, Any] | Completion], name: str = "scripted"):
        self.name = name
        self._outputs = list(outputs)
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []

    def complete(
        self,
        system: str,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        tool_choice: str = "auto",
    ) -> Completion:
        with self._lock:
            # a snapshot: the caller goes on appending to the same list
            self.requests.append({"system": system, "messages": copy.deepcopy(messages),
                                  "tools": tools, "tool_choice": tool_choice})
            if not self._outputs:
                raise ScriptExhausted(
                    f"scripted model {self.name!r} ran out of outputs after "
                    f"{len(self.requests) - 1} calls"
                )
            out = self._outputs.pop(0)
        if isinstance(out, Completion):
            return out
        if isinstance(out, str):
            content = [{"type": "text", "text": out}]
        else:  # a tool call: {"tool": name, "input": {...}}
            content = [
                {"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": out["tool"],
                 "input": out["input"]}
            ]
        prompt = system + str(messages)
        usage = Usage(input_tokens=self.count_tokens(prompt),
                      output_tokens=self.count_tokens(str(content)))
        stop = "tool_use" if content[0]["type"] == "tool_use" else "end_turn"
        return Completion(content=content, stop_reason=stop, usage=usage, model=self.name)


@register_provider("scripted")
def _scripted(cfg: Any) -> ChatModel:
    outputs = list(getattr(cfg, "script", None) or [])
    return ScriptedModel(outputs, name=cfg.name)
