"""The compared systems: A-RAG, naive top-k RAG, long-context stuffing, and the oracle and
closed-book bounds."""

from __future__ import annotations

from collections.abc import Callable

from arag.agent.loop import run_agent
from arag.agent.prompts import SYSTEM_SUMMARY, summarize_chunks_prompt, system_prompt, task_prompt
from arag.calls import CallLog
from arag.llm.base import estimate_tokens
from arag.records import Corpus, Prediction, Task
from arag.systems.base import Sources, System, SystemContext, register_system
from arag.systems.retriever import retrieve
from arag.tools.toolset import Toolset
from arag.trace import Retrieval


@register_system("arag")
class AgenticRAG(System):
    """A ReAct agent that searches and reads chunks within a loop budget and the context
    budget; its ranking is the chunks in the order it first read them."""

    retrieves = True
    ranks = True
    agentic = True
    cites = True

    @classmethod
    def ranking(cls, pred: Prediction) -> list[str] | None:
        return list(dict.fromkeys(pred.retrieved_chunk_ids))

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        toolset = Toolset(self.ctx.index(), self.ctx.scope_doc_ids(task), self.ctx.tools,
                          self.ctx.snippet_words, default_top_k=self.ctx.top_k,
                          method=self.ctx.retrieval.method, read_budget=self.ctx.budget,
                          summarize=self._summarizer(calls))
        result = run_agent(
            calls, toolset, system_prompt(task.task_type, agentic=True),
            task_prompt(task, self.ctx.style, self.ctx.target_length,
                        cite=self.asks_citations),
            self.ctx.max_loops, self.ctx.max_tokens, self.ctx.temperature,
        )
        pred.predicted = result.answer
        pred.loops = result.loops
        pred.max_loops_reached = result.max_loops_reached
        pred.stop_reason = result.stop_reason
        # chunks condensed by chunk_summarize reached the model too (as a summary)
        pred.retrieved_chunk_ids = toolset.used
        pred.context_chunk_ids = toolset.used
        pred.context_budget_reached = toolset.budget_spent

    def _summarizer(self, calls: CallLog) -> Callable[[str, str, int], str]:
        """chunk_summarize's one model call, through the task's call log: costed, cached by
        the response cache, and nested in the tool call's trace step."""
        def summarize(passages: str, focus: str, words: int) -> str:
            return calls.complete(
                system=SYSTEM_SUMMARY,
                messages=[{"role": "user", "content": summarize_chunks_prompt(passages, focus,
                                                                              words)}],
                max_tokens=self.ctx.max_tokens, temperature=self.ctx.temperature).text

        return summarize


@register_system("naive")
class NaiveRAG(System):
    """Top-k search over the task's documents (``retrieval.method``; optional HyDE, rerank
    and neighbours: ``arag.systems.retriever``), one call."""

    retrieves = True
    ranks = True
    cites = True

    @classmethod
    def ranking(cls, pred: Prediction) -> list[str] | None:
        """Its final ranked list (the last retrieval step: after rerank and neighbours),
        ranked deeper than it reads (``RANK_DEPTH``), deduplicated."""
        steps = [step for step in pred.trace if isinstance(step, Retrieval)]
        return list(dict.fromkeys(steps[-1].result_chunk_ids)) if steps else None

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        index = self.ctx.index()
        ids = retrieve(self.ctx, task, calls).context
        context = "\n\n".join(
            f'<chunk id="{cid}">\n{index.by_id[cid].text}\n</chunk>' for cid in ids
        )
        pred.retrieved_chunk_ids = ids
        pred.context_chunk_ids = ids
        self.one_call(task, calls, pred, context)


@register_system("stuffing")
class Stuffing(System):
    """The whole document(s) in one prompt; skipped when it would not fit the context."""

    long_context = True

    @classmethod
    def context_chunks(cls, pred: Prediction, task: Task, sources: Sources) -> int:
        """Every chunk of its documents: the whole document is the context."""
        docs = set(pred.doc_ids)
        return sum(1 for c in sources.chunks.values() if c.doc_id in docs)

    @classmethod
    def judged_sources(cls, pred: Prediction, task: Task, sources: Sources
                       ) -> list[tuple[str, str]]:
        return whole_documents(pred, sources)

    @staticmethod
    def stuffed(task: Task, corpus: Corpus) -> str:
        """The whole documents of a task, as stuffing puts them in its prompt."""
        return "\n\n".join(f'<document id="{d.doc_id}">\n{d.header}\n{d.text}\n</document>'
                           for d in (corpus.documents[d] for d in task.doc_ids))

    @classmethod
    def prompt_tokens(cls, task: Task, ctx: SystemContext) -> int:
        """The tokens of stuffing's whole request for a task: what its skip rule weighs."""
        return cls.request_tokens(task, ctx.corpus, ctx.style, ctx.target_length,
                                  ctx.model.count_tokens)

    @classmethod
    def request_tokens(cls, task: Task, corpus: Corpus, style: str, target_length: int,
                       count: Callable[[str], int] = estimate_tokens) -> int:
        """``prompt_tokens`` from the settings alone, where no model is built (re-scoring):
        ``count`` is the model's token count, every provider's being the local estimate."""
        prompt = task_prompt(task, style, target_length, cls.stuffed(task, corpus))
        return count(system_prompt(task.task_type, False) + prompt)

    @classmethod
    def fits(cls, task: Task, ctx: SystemContext) -> bool:
        """Stuffing's skip rule: the request fits the context less the output's tokens."""
        return cls.prompt_tokens(task, ctx) <= ctx.context_limit - ctx.max_tokens

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        context = self.stuffed(task, self.ctx.corpus)
        if not self.fits(task, self.ctx):
            needed = self.prompt_tokens(task, self.ctx)
            pred.skipped = True
            pred.skip_reason = (f"prompt of ~{needed} tokens exceeds the model's context "
                                f"({self.ctx.context_limit} minus {self.ctx.max_tokens} for output)")
            return
        self.one_call(task, calls, pred, context)


def whole_documents(pred: Prediction, sources: Sources) -> list[tuple[str, str]]:
    """The prediction's documents, each ``(doc id, text)``: the context of a system that
    reads them all."""
    docs = sources.corpus.documents
    return [(d, docs[d].text) for d in pred.doc_ids if d in docs]


def gold_passages(task: Task, corpus: Corpus) -> str:
    """The task's gold key sentences (or evidence pages), in document order."""
    return corpus.excerpt(task.gold_lines or {})


@register_system("oracle")
class Oracle(System):
    """The ceiling: the gold key sentences (or evidence pages) given to one call."""

    bound = True

    @classmethod
    def context_chunks(cls, pred: Prediction, task: Task, sources: Sources) -> int:
        """The chunks holding its gold lines: what a retriever would need to give."""
        gold = task.gold_lines or {}
        return sum(1 for c in sources.chunks.values()
                   if any(c.covers(line) for line in gold.get(c.doc_id, ())))

    @classmethod
    def judged_sources(cls, pred: Prediction, task: Task, sources: Sources
                       ) -> list[tuple[str, str]]:
        return [("the gold key sentences", gold_passages(task, sources.corpus))]

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        if not task.gold_lines:
            pred.skipped = True
            pred.skip_reason = "the task has no gold key sentences to give the oracle"
            return
        self.one_call(task, calls, pred, gold_passages(task, self.ctx.corpus))


@register_system("closed_book")
class ClosedBook(System):
    """The floor: no context at all, one call."""

    bound = True

    @classmethod
    def context_chunks(cls, pred: Prediction, task: Task, sources: Sources) -> int:
        return 0

    @classmethod
    def judged_sources(cls, pred: Prediction, task: Task, sources: Sources
                       ) -> list[tuple[str, str]]:
        return []

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        self.one_call(task, calls, pred, "")
