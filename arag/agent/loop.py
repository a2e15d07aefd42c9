"""The A-RAG loop: bounded, with model-caused errors fed back as tool errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arag.agent.prompts import BUDGET_REACHED, TOOL_CALL_CUT_OFF
from arag.calls import CallLog
from arag.llm.base import Completion
from arag.records import json_safe
from arag.tools.toolset import Toolset


@dataclass
class AgentResult:
    answer: str
    loops: int  # model calls made
    max_loops_reached: bool
    stop_reason: str


def run_agent(calls: CallLog, toolset: Toolset, system: str, prompt: str, max_loops: int,
              max_tokens: int, temperature: float) -> AgentResult:
    """Let the model search and read for at most ``max_loops`` calls, then make it answer.

    If the ``max_loops``-th call still asks for tools, those tools run (the API needs a
    result for every tool_use), the model is told the budget is spent, and one more call
    with tool_choice "none" gets the answer: ``max_loops_reached`` is then true.

    Stop reasons: ``pause_turn`` sends the turn back so the model goes on; an answer cut at
    ``max_tokens`` is kept (``stop_reason`` says so); a tool call cut at ``max_tokens`` is not
    run but answered with an error asking for shorter arguments; a ``refusal`` raises
    ModelRefused in ``calls.complete``, so the task becomes an error.
    """
    messages: list[dict] = [{"role": "user", "content": prompt}]
    request = dict(system=system, tools=toolset.specs, max_tokens=max_tokens,
                   temperature=temperature)
    for loop in range(1, max_loops + 1):
        completion = calls.complete(messages=messages, **request)
        # sent back as it came, but as strict JSON: a tool input of 1e400 reads as infinity
        messages.append({"role": "assistant", "content": json_safe(completion.content)})
        if completion.stop_reason == "pause_turn" and not completion.tool_uses:
            continue  # the API paused a long turn: sending it back lets the model go on
        if not completion.tool_uses:
            return AgentResult(completion.text.strip(), loop, False, completion.stop_reason)
        cut = _cut_off_tool_use(completion)
        results = []
        for use in completion.tool_uses:
            if use is cut:
                text, is_error = calls.tool_not_run(use["name"], use["input"], TOOL_CALL_CUT_OFF)
            else:
                text, is_error = calls.tool(toolset, use["name"], use["input"])
            results.append({"type": "tool_result", "tool_use_id": use["id"], "content": text,
                            "is_error": is_error})
        if loop == max_loops:
            results.append({"type": "text", "text": BUDGET_REACHED})
        messages.append({"role": "user", "content": results})
    final = calls.complete(messages=messages, tool_choice="none", **request)
    return AgentResult(final.text.strip(), max_loops + 1, True, final.stop_reason)


def _cut_off_tool_use(completion: Completion) -> dict[str, Any] | None:
    """The tool_use block that max_tokens cut short (the reply's last block), if any.

    Its input is partial or empty: running it would act on arguments the model never
    finished writing.
    """
    if completion.stop_reason != "max_tokens" or not completion.content:
        return None
    last = completion.content[-1]
    return last if last.get("type") == "tool_use" else None
