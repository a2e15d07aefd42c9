"""Typed steps of a prediction's trace: every model call, tool call and retrieval of a task.

They are stored in ``predictions.jsonl`` as JSON objects with a ``type`` field (``llm``,
``tool``, ``retrieval``); ``step_from_dict`` reads them back, so traces round-trip.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ModelCall:
    """One model call: its tokens, cost, and the tools it asked for."""

    type: str = field(default="llm", init=False)
    model: str
    start_ms: float
    latency_ms: float
    stop_reason: str
    usage: dict[str, int]
    cost_usd: float
    cached: bool
    tool_calls: list[str] = field(default_factory=list)
    refusal: str | None = None  # the model's text when it refused (stop_reason refusal)


@dataclass
class ToolCall:
    """One tool call the model made: its arguments and the chunks it named or returned.

    ``steps``: calls the tool made itself (``chunk_summarize``'s model call), nested here
    so the trace shows them inside the tool call.
    """

    type: str = field(default="tool", init=False)
    name: str
    arguments: Any
    result_chunk_ids: list[str]
    is_error: bool
    error: str | None
    start_ms: float
    latency_ms: float
    steps: list[Step] = field(default_factory=list)


@dataclass
class Retrieval:
    """A search the system itself ran (not the model): the ranked chunk ids it returned."""

    type: str = field(default="retrieval", init=False)
    name: str
    arguments: dict[str, Any]
    result_chunk_ids: list[str]
    start_ms: float = 0.0
    latency_ms: float = 0.0


Step = ModelCall | ToolCall | Retrieval
_STEP_TYPES: dict[str, type[ModelCall] | type[ToolCall] | type[Retrieval]] = {
    "llm": ModelCall, "tool": ToolCall, "retrieval": Retrieval}


def step_from_dict(data: dict[str, Any]) -> Step:
    """A step read back from JSON; unknown keys (from a newer writer) are ignored."""
    try:
        cls = _STEP_TYPES[data["type"]]
    except KeyError:
        raise ValueError(f"trace step of unknown type {data.get('type')!r}; expected one of "
                         f"{sorted(_STEP_TYPES)}") from None
    known = {f for f in cls.__dataclass_fields__ if f != "type"}
    values = {k: v for k, v in data.items() if k in known}
    if "steps" in values:
        values["steps"] = [step_from_dict(s) for s in values["steps"] or []]
    return cls(**values)


def step_to_dict(step: Step) -> dict[str, Any]:
    return asdict(step)


def model_calls(steps: list[Step]) -> list[ModelCall]:
    """Every model call of a trace, those made inside tool calls included, in order."""
    out: list[ModelCall] = []
    for step in steps:
        if isinstance(step, ModelCall):
            out.append(step)
        elif isinstance(step, ToolCall):
            out.extend(model_calls(step.steps))
    return out


def called_a_tool(steps: list[Step]) -> bool:
    """Whether the model asked for any tool in this trace (a call refused before it ran, e.g.
    cut off at max_tokens, counts: the model did ask)."""
    return any(isinstance(step, ToolCall) for step in steps)
