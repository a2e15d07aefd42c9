"""How much context each system gave the model: the budget beside the quality it bought.

    context_chunks  chunks in front of the model (System.context_chunks: the chunks a
                    retriever gave or A-RAG read, every chunk of the documents for stuffing,
                    the chunks holding the gold lines for the oracle, 0 for closed book)
    context_tokens  tokens of that context (the judged context, System.judged_context),
                    estimated as ChatModel.count_tokens does: about 4 characters a token
    answer_input_tokens  input tokens of the call that wrote the answer, as the provider
                    counted them (cache reads and writes included): everything that call
                    saw -- prompts, tool definitions, search results with their snippets,
                    tool results -- so an agent's extra material is not hidden by
                    context_tokens, which counts only the chunks

Computed for every system, answered or not, except skipped and errored tasks (null with the
reason), so naive, A-RAG, stuffing and the oracle can be compared on what they were given.
"""

from __future__ import annotations

from arag.llm.base import estimate_tokens
from arag.records import Prediction
from arag.trace import model_calls
from metrics.base import NO_CONTEXT, Metric, Scorer, Scores, ScoringItem, register_scorer


@register_scorer("context")
class ContextScorer(Scorer):
    metrics = [Metric("context_chunks", "context chunks", histogram=False, report=True),
               Metric("context_tokens", "context tokens", histogram=False, report=True),
               Metric("answer_input_tokens", "answer-call input tokens", histogram=False,
                      report=True)]

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        return [self.score_one(item) for item in items]

    def score_one(self, item: ScoringItem) -> Scores:
        p = item.prediction
        if p.skipped or p.error:
            why = f"skipped: {p.skip_reason}" if p.skipped else f"error: {p.error}"
        elif item.context_text is None:
            why = NO_CONTEXT
        elif item.context_chunks is None:
            why = "the system did not say what its context was"
        else:
            tokens = estimate_tokens(item.context_text) if item.context_text else 0
            s = Scores({"context_chunks": float(item.context_chunks),
                        "context_tokens": float(tokens)})
            seen = answer_input_tokens(p)
            if seen is None:
                s.null(["answer_input_tokens"], "the prediction has no model call in its trace")
            else:
                s.values["answer_input_tokens"] = float(seen)
            return s
        s = Scores()
        s.null(self.fields, why)
        return s


def answer_input_tokens(pred: Prediction) -> int | None:
    """Input tokens of the last model call (the one that wrote the answer)."""
    calls = model_calls(pred.trace)
    if not calls:
        return None
    usage = calls[-1].usage
    return sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_read_input_tokens",
                                                "cache_creation_input_tokens"))
