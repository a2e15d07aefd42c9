"""A system turns a task into a prediction; systems differ only in how they get context."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass

from arag.agent.prompts import system_prompt, task_prompt
from arag.llm.base import ChatModel, ModelError
from arag.llm.pricing import Prices
from arag.records import Corpus, Prediction, Task
from arag.retrieval.index import SearchIndex
from arag.systems.calls import CallLog

log = logging.getLogger(__name__)


@dataclass
class SystemContext:
    """What every system is built from."""

    model: ChatModel
    prices: Prices
    corpus: Corpus
    index_loader: object  # () -> SearchIndex, called only by systems that search
    style: str
    target_length: int
    max_loops: int
    top_k: int
    scope: str  # document | corpus
    tools: list[str]
    max_tokens: int
    temperature: float
    context_limit: int
    snippet_words: int = 40

    def index(self) -> SearchIndex:
        return self.index_loader()  # type: ignore[operator]

    def scope_doc_ids(self, task: Task) -> list[str] | None:
        return list(task.doc_ids) if self.scope == "document" else None


class System(ABC):
    name: str
    agentic = False

    def __init__(self, name: str, ctx: SystemContext):
        self.name = name
        self.ctx = ctx

    def predict(self, task: Task, source: str) -> Prediction:
        calls = CallLog(self.ctx.model, self.ctx.prices)
        pred = Prediction(
            id=task.id, source=source, system=self.name, model=self.ctx.model.name,
            task_type=task.task_type, question=task.question, doc_ids=list(task.doc_ids),
            ground_truth=task.reference,
        )
        try:
            self.answer(task, calls, pred)
        except ModelError as exc:
            pred.error = f"{type(exc).__name__}: {exc}"
            pred.predicted = None  # whatever a system had filled in is not an answer
            pred.loops = calls.n_model_calls
            pred.stop_reason = getattr(exc, "stop_reason", None)
            log.warning("task %s: %s", task.id, pred.error)
        pred.word_count = len((pred.predicted or "").split())
        pred.input_tokens = calls.usage.input_tokens
        pred.output_tokens = calls.usage.output_tokens
        pred.cache_read_input_tokens = calls.usage.cache_read_input_tokens
        pred.cache_creation_input_tokens = calls.usage.cache_creation_input_tokens
        pred.cost_usd = round(calls.cost_usd, 8)
        pred.cost_usd_uncached = round(calls.cost_usd_uncached, 8)
        pred.latency_ms = round(calls.elapsed_ms, 2)
        pred.started_at = calls.started_at
        pred.trace = calls.trace
        return pred

    @abstractmethod
    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        """Fill ``pred`` (predicted, context ids, loops, ...) using ``calls`` for every call."""

    def one_call(self, task: Task, calls: CallLog, pred: Prediction, context: str) -> None:
        """One call answers; an answer cut at max_tokens is kept, its stop_reason says so."""
        completion = calls.complete(
            system=system_prompt(task.task_type, agentic=False),
            messages=[{"role": "user", "content": task_prompt(
                task, self.ctx.style, self.ctx.target_length, context)}],
            max_tokens=self.ctx.max_tokens, temperature=self.ctx.temperature,
        )
        pred.predicted = completion.text.strip()
        pred.loops = 1
        pred.stop_reason = completion.stop_reason
