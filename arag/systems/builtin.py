"""The compared systems: A-RAG, naive top-k RAG, long-context stuffing."""

from __future__ import annotations

from arag.agent.loop import run_agent
from arag.agent.prompts import system_prompt, task_prompt
from arag.records import Corpus, Prediction, Task
from arag.systems.base import System
from arag.systems.calls import CallLog
from arag.tools.toolset import Toolset

RANK_DEPTH = 10


class AgenticRAG(System):
    """A ReAct agent that searches and reads chunks within a loop budget."""

    agentic = True

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        toolset = Toolset(self.ctx.index(), self.ctx.scope_doc_ids(task), self.ctx.tools,
                          self.ctx.snippet_words)
        result = run_agent(
            calls, toolset, system_prompt(task.task_type, agentic=True),
            task_prompt(task, self.ctx.style, self.ctx.target_length),
            self.ctx.max_loops, self.ctx.max_tokens, self.ctx.temperature,
        )
        pred.predicted = result.answer
        pred.loops = result.loops
        pred.max_loops_reached = result.max_loops_reached
        pred.stop_reason = result.stop_reason
        pred.retrieved_chunk_ids = list(toolset.read_order)
        pred.context_chunk_ids = list(toolset.read_order)


class NaiveRAG(System):
    """Top-k semantic search over the task's documents, one call."""

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        index = self.ctx.index()
        # rank deeper than k once, so Recall@k/MRR@k/nDCG@k come from the same pass
        depth = max(self.ctx.top_k, RANK_DEPTH)
        hits = index.semantic_search(task.question, depth, self.ctx.scope_doc_ids(task))
        ranked = [h.chunk_id for h in hits]
        ids = ranked[: self.ctx.top_k]
        context = "\n\n".join(
            f'<chunk id="{cid}">\n{index.by_id[cid].text}\n</chunk>' for cid in ids
        )
        calls.trace.append({"type": "retrieval", "name": "semantic_search",
                            "arguments": {"query": task.question, "top_k": depth},
                            "result_chunk_ids": ranked})
        pred.retrieved_chunk_ids = ids
        pred.context_chunk_ids = ids
        self.one_call(task, calls, pred, context)


class Stuffing(System):
    """The whole document(s) in one prompt; skipped when it would not fit the context."""

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        docs = [self.ctx.corpus.documents[d] for d in task.doc_ids]
        context = "\n\n".join(
            f'<document id="{d.doc_id}">\n{d.header}\n{d.text}\n</document>' for d in docs
        )
        prompt = task_prompt(task, self.ctx.style, self.ctx.target_length, context)
        needed = self.ctx.model.count_tokens(system_prompt(task.task_type, False) + prompt)
        available = self.ctx.context_limit - self.ctx.max_tokens
        if needed > available:
            pred.skipped = True
            pred.skip_reason = (f"prompt of ~{needed} tokens exceeds the model's context "
                                f"({self.ctx.context_limit} minus {self.ctx.max_tokens} for output)")
            return
        self.one_call(task, calls, pred, context)


def gold_passages(task: Task, corpus: Corpus) -> str:
    """The task's gold key sentences (or evidence pages), in document order."""
    return corpus.excerpt(task.gold_lines or {})


class Oracle(System):
    """The ceiling: the gold key sentences (or evidence pages) given to one call."""

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        if not task.gold_lines:
            pred.skipped = True
            pred.skip_reason = "the task has no gold key sentences to give the oracle"
            return
        self.one_call(task, calls, pred, gold_passages(task, self.ctx.corpus))


class ClosedBook(System):
    """The floor: no context at all, one call."""

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        self.one_call(task, calls, pred, "")


SYSTEMS: dict[str, type[System]] = {"arag": AgenticRAG, "naive": NaiveRAG, "stuffing": Stuffing,
                                    "oracle": Oracle, "closed_book": ClosedBook}
