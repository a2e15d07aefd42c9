"""Every model and tool call of one task, timed, costed and traced."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from arag.llm.base import ChatModel, Completion, ModelError, Usage
from arag.llm.pricing import Prices
from arag.tools.toolset import ToolError, ToolResult, Toolset


class ModelRefused(ModelError):
    """The model declined the request (stop_reason ``refusal``): the task has no answer."""

    stop_reason = "refusal"


@dataclass
class CallLog:
    model: ChatModel
    prices: Prices
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    cost_usd_uncached: float = 0.0
    trace: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    started_at: float = field(default_factory=time.time)  # wall clock, for trace timestamps

    def complete(self, **request: Any) -> Completion:
        """One model call, costed and traced; a refusal raises ModelRefused once traced."""
        t0 = time.perf_counter()
        completion = self.model.complete(**request)
        cost = self.prices.cost_usd(completion.usage)
        self.cost_usd_uncached += cost
        if not completion.cached:
            self.usage = self.usage + completion.usage
            self.cost_usd += cost
        self.trace.append({
            "type": "llm",
            "model": completion.model,
            "start_ms": round((t0 - self.started) * 1000, 2),
            "latency_ms": round((time.perf_counter() - t0) * 1000, 2),
            "stop_reason": completion.stop_reason,
            "usage": vars(completion.usage).copy(),
            "cost_usd": 0.0 if completion.cached else cost,
            "cached": completion.cached,
            "tool_calls": [b["name"] for b in completion.tool_uses],
        })
        if completion.stop_reason == "refusal":
            self.trace[-1]["refusal"] = completion.text
            # not an answer: scoring a refusal as a summary would skew every quality metric
            raise ModelRefused(f"the model refused to answer (stop_reason=refusal): "
                               f"{completion.text.strip()[:300]!r}")
        return completion

    @property
    def n_model_calls(self) -> int:
        return sum(1 for step in self.trace if step["type"] == "llm")

    def tool(self, toolset: Toolset, name: str, arguments: Any) -> tuple[str, bool]:
        """Run one tool call; a model error comes back as (message, True)."""
        t0 = time.perf_counter()
        try:
            result: ToolResult | None = toolset.call(name, arguments)
            text, is_error, error = result.text, False, None
        except ToolError as exc:
            result, text, is_error, error = None, f"Error: {exc}", True, str(exc)
        self._trace_tool(t0, name, arguments, result.chunk_ids if result else [], error)
        return text, is_error

    def tool_not_run(self, name: str, arguments: Any, reason: str) -> tuple[str, bool]:
        """A tool call refused before running (e.g. cut off at max_tokens): (reason, True)."""
        self._trace_tool(time.perf_counter(), name, arguments, [], reason)
        return f"Error: {reason}", True

    def _trace_tool(self, t0: float, name: str, arguments: Any, chunk_ids: list[str],
                    error: str | None) -> None:
        self.trace.append({
            "type": "tool",
            "name": name,
            "arguments": arguments,
            "result_chunk_ids": chunk_ids,
            "is_error": error is not None,
            "error": error,
            "start_ms": round((t0 - self.started) * 1000, 2),
            "latency_ms": round((time.perf_counter() - t0) * 1000, 2),
        })

    @property
    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000
