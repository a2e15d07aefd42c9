"""Every model and tool call of one task, timed, costed and traced."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from arag.llm.base import ChatModel, Completion, Usage
from arag.llm.pricing import Prices
from arag.tools.toolset import ToolError, ToolResult, Toolset


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
        return completion

    def tool(self, toolset: Toolset, name: str, arguments: Any) -> tuple[str, bool]:
        """Run one tool call; a model error comes back as (message, True)."""
        t0 = time.perf_counter()
        try:
            result: ToolResult | None = toolset.call(name, arguments)
            text, is_error, error = result.text, False, None
        except ToolError as exc:
            result, text, is_error, error = None, f"Error: {exc}", True, str(exc)
        self.trace.append({
            "type": "tool",
            "name": name,
            "arguments": arguments,
            "result_chunk_ids": result.chunk_ids if result else [],
            "is_error": is_error,
            "error": error,
            "start_ms": round((t0 - self.started) * 1000, 2),
            "latency_ms": round((time.perf_counter() - t0) * 1000, 2),
        })
        return text, is_error

    @property
    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000
