"""A system turns a task into a prediction; systems differ only in how they get context.

Each system declares what it is, once, on its class; the runner, the scorers, the traces
and the report ask these declarations and never the system's name:

* ``retrieves``: it answers from chunks it picks from the index (retrieval precision and
  recall apply; the index is loaded before the task clock starts);
* ``ranks``: it produces a ranking of chunks (``ranking``), scored by Recall/MRR/nDCG@k;
* ``agentic``: the model decides what to search and read, in a loop of tool calls;
* ``judged_sources``: what the system put in front of the model, source by source (the
  chunks it read, the whole documents, the contexts a pipeline gave); joined, it is
  ``judged_context``, the text G-Eval faithfulness and numeric precision are judged against;
* ``context_chunks``: how many chunks that context amounts to (``context_chunks`` on every
  record, beside ``context_tokens``), so budgets can be compared across systems.
* ``bound``: it is a reference point, not a contender (the oracle's gold context, the
  closed book's none): the report shows it as a bound and never names it the winner;
* ``cites``: its context names chunk ids, so its prompt asks for ``[c:<chunk id>]``
  citations (``system.citations=false`` turns the request off) and they are scored.
* ``long_context``: it puts the task's whole documents in front of the model (the report
  may then say it reads the whole document);
* ``calls_models``: its model calls are made here, so the run counts them from the trace
  (predictions made elsewhere say theirs, or the count is null).

A new system is one module in this package (``@register_system("name")`` on its class)
and one YAML in ``conf/system/`` whose ``kind`` names it.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from arag.agent.prompts import system_prompt, task_prompt
from arag.calls import CallLog
from arag.config import SystemConfig
from arag.llm.base import ChatModel, ModelError
from arag.llm.pricing import Prices
from arag.records import Chunk, Corpus, Prediction, Task
from arag.registry import Registry
from arag.retrieval.index import SearchIndex
from arag.retrieval.search import RetrievalSettings

log = logging.getLogger(__name__)


@dataclass
class SystemContext:
    """What every system is built from."""

    model: ChatModel
    prices: Prices
    corpus: Corpus
    index_loader: Callable[[], SearchIndex]  # called only by systems that search
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
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    citations: bool = True  # system.citations: ask systems that cite for [c:<chunk id>]

    def index(self) -> SearchIndex:
        return self.index_loader()

    @property
    def budget(self) -> int:
        """Chunks a retrieving system may put in front of the model (retrieval.context_budget,
        else top_k): the same for naive's hits and neighbours and for what A-RAG reads."""
        return self.retrieval.context_budget or self.top_k

    def scope_doc_ids(self, task: Task) -> list[str] | None:
        return list(task.doc_ids) if self.scope == "document" else None


@dataclass
class RunSetup:
    """What a system may read, before any run opens, to declare itself for one run
    (``System.configure``): its config node, the dataset, the run's chunks."""

    options: SystemConfig  # the system's settings (system.*; a plugin's own: .options)
    corpus: Corpus
    tasks: list[Task]
    chunks: Callable[[], list[Chunk]]  # the chunks of this run's index (chunking settings)
    base: Path  # relative paths in the options resolve against it
    # re-scoring (mode=evaluate): the run's own predictions, instead of any input file
    recorded: list[Prediction] | None = None
    past_limit: frozenset[str] = frozenset()  # ids of the tasks dataset.limit cut


@dataclass
class Sources:
    """What a judged context is assembled from: the corpus and its chunks by id."""

    corpus: Corpus
    chunks: dict[str, Chunk]


class System(ABC):
    retrieves: ClassVar[bool] = False
    ranks: ClassVar[bool] = False
    agentic: ClassVar[bool] = False
    bound: ClassVar[bool] = False
    cites: ClassVar[bool] = False
    searches: ClassVar[bool] = True  # a retrieving system searches the index itself
    long_context: ClassVar[bool] = False
    calls_models: ClassVar[bool] = True
    # system.* settings that only this kind reads (system.predictions, ...): another kind's
    # run leaves them out of its identity, so setting one for a sweep's external run does
    # not make its arag and naive runs new runs
    own_settings: ClassVar[tuple[str, ...]] = ()
    # what the run's report should say about how this system was scored, and run metrics
    # of its own (e.g. how many context texts could not be located)
    notes: ClassVar[tuple[str, ...]] = ()
    run_metrics: ClassVar[dict[str, float]] = {}
    # JSON artifacts of its own for the run (name -> data), e.g. traces kept as given
    artifacts: ClassVar[dict[str, object]] = {}

    name: str

    def __init__(self, name: str, ctx: SystemContext):
        self.name = name
        self.ctx = ctx

    @classmethod
    def configure(cls, setup: RunSetup) -> type[System]:
        """The class that answers this run. A system whose declarations depend on its
        input (``external``: what the predictions file carries) returns a subclass that
        declares them; an input it cannot use raises, before any run opens."""
        return cls

    @classmethod
    def run_label(cls, name: str, predictions: str | None) -> str:
        """What a run of this system is called, before any option a sweep varies."""
        return name

    @classmethod
    def answers(cls, task: Task) -> bool:
        """Whether this run answers ``task`` (``external`` with ``allow_missing``: only
        the tasks its file has)."""
        return True

    @classmethod
    def ranking(cls, pred: Prediction) -> list[str] | None:
        """The chunk ids the system ranked, best first (None: it does not rank)."""
        return None

    @classmethod
    def retrieves_task(cls, pred: Prediction) -> bool:
        """Whether this task's answer rests on chunks the system picked (``retrieves``;
        ``routed``: whether the member that answered retrieves)."""
        return cls.retrieves

    @classmethod
    def judged_sources(cls, pred: Prediction, task: Task, sources: Sources
                       ) -> list[tuple[str, str]] | None:
        """What the system put in front of the model, source by source as ``(name, text)``:
        by default the chunks it used (None: the record does not say which, e.g. a hand-made
        one re-scored). A person labelling the answer reads them one by one."""
        if "context_chunk_ids" in pred.not_recorded:
            return None
        return [(c, sources.chunks[c].text) for c in pred.context_chunk_ids
                if c in sources.chunks]

    @classmethod
    def judged_context(cls, pred: Prediction, task: Task, sources: Sources) -> str | None:
        """What the judge reads as the system's context: its ``judged_sources``, joined."""
        found = cls.judged_sources(pred, task, sources)
        return None if found is None else "\n\n".join(text for _, text in found)

    @classmethod
    def context_chunks(cls, pred: Prediction, task: Task, sources: Sources) -> int | None:
        """How many chunks the model was given; by default those in ``context_chunk_ids``
        (None: the record does not say)."""
        if "context_chunk_ids" in pred.not_recorded:
            return None
        return len(dict.fromkeys(pred.context_chunk_ids))

    @property
    def asks_citations(self) -> bool:
        """Whether this run's prompts ask the model to cite chunks."""
        return self.cites and self.ctx.citations

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
            pred.error_kind = exc.kind
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
                task, self.ctx.style, self.ctx.target_length, context,
                cite=self.asks_citations)}],
            max_tokens=self.ctx.max_tokens, temperature=self.ctx.temperature,
        )
        pred.predicted = completion.text.strip()
        pred.loops = 1
        pred.stop_reason = completion.stop_reason


SYSTEMS: Registry[type[System]] = Registry("system", "system.kind", "arag.systems",
                                             group="arag_eval.systems")
register_system = SYSTEMS.register


def make_system(kind: str, name: str, ctx: SystemContext) -> System:
    return SYSTEMS.get(kind)(name, ctx)
