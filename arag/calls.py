"""Every model, tool and retrieval call of one task, timed, costed and traced.

Below both ``arag.agent`` and ``arag.systems``: the agent loop and every system record
their calls here, as typed steps (``arag.trace``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arag.llm.base import ChatModel, Completion, ModelError, Usage
from arag.llm.pricing import Prices
from arag.retrieval.index import Hit
from arag.tools.toolset import ToolError, Toolset
from arag.trace import ModelCall, Retrieval, Step, ToolCall


class ModelRefused(ModelError):
    """The model declined the request (stop_reason ``refusal``): the task has no answer."""

    stop_reason = "refusal"

    def __init__(self, message: str):
        super().__init__(message, kind="refusal")


@dataclass
class CallLog:
    model: ChatModel
    prices: Prices
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    cost_usd_uncached: float = 0.0
    trace: list[Step] = field(default_factory=list)
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
        step = ModelCall(
            model=completion.model, start_ms=self._ms(t0), latency_ms=_since(t0),
            stop_reason=completion.stop_reason, usage=vars(completion.usage).copy(),
            cost_usd=0.0 if completion.cached else cost, cached=completion.cached,
            tool_calls=[b["name"] for b in completion.tool_uses],
        )
        self.trace.append(step)
        if completion.stop_reason == "refusal":
            step.refusal = completion.text
            # not an answer: scoring a refusal as a summary would skew every quality metric
            raise ModelRefused(f"the model refused to answer (stop_reason=refusal): "
                               f"{completion.text.strip()[:300]!r}")
        return completion

    @property
    def n_model_calls(self) -> int:
        """The task's own model calls (the agent's loops), not those tools make."""
        return sum(1 for step in self.trace if isinstance(step, ModelCall))

    def tool(self, toolset: Toolset, name: str, arguments: Any) -> tuple[str, bool]:
        """Run one tool call; a model error comes back as (message, True). Calls the tool
        makes through this log (chunk_summarize's model call) are nested in its step."""
        t0 = time.perf_counter()
        mark = len(self.trace)
        try:
            result = toolset.call(name, arguments)
        except ToolError as exc:
            self._trace_tool(t0, name, arguments, [], str(exc), self._take_since(mark))
            return f"Error: {exc}", True
        except BaseException as exc:  # e.g. the summarize call failed for good: a task error
            self._trace_tool(t0, name, arguments, [], f"{type(exc).__name__}: {exc}",
                             self._take_since(mark))
            raise
        self._trace_tool(t0, name, arguments, result.chunk_ids, None, self._take_since(mark))
        return result.text, False

    def _take_since(self, mark: int) -> list[Step]:
        nested = self.trace[mark:]
        del self.trace[mark:]
        return nested

    def tool_not_run(self, name: str, arguments: Any, reason: str) -> tuple[str, bool]:
        """A tool call refused before running (e.g. cut off at max_tokens): (reason, True)."""
        self._trace_tool(time.perf_counter(), name, arguments, [], reason)
        return f"Error: {reason}", True

    def retrieve(self, name: str, arguments: dict[str, Any], search: Callable[[], list[Hit]]
                 ) -> list[Hit]:
        """A search the system runs itself (not the model), traced with its ranked ids."""
        t0 = time.perf_counter()
        hits = search()
        self.trace.append(Retrieval(name=name, arguments=arguments,
                                    result_chunk_ids=[h.chunk_id for h in hits],
                                    start_ms=self._ms(t0), latency_ms=_since(t0)))
        return hits

    def _trace_tool(self, t0: float, name: str, arguments: Any, chunk_ids: list[str],
                    error: str | None, steps: list[Step] | None = None) -> None:
        self.trace.append(ToolCall(name=name, arguments=arguments, result_chunk_ids=chunk_ids,
                                   is_error=error is not None, error=error,
                                   start_ms=self._ms(t0), latency_ms=_since(t0),
                                   steps=steps or []))

    def _ms(self, t0: float) -> float:
        return round((t0 - self.started) * 1000, 2)

    @property
    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


def _since(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)
