"""Retrieval precision/recall against gold key sentences, and summary length."""

from __future__ import annotations

from metrics.base import (
    Metric,
    Scorer,
    Scores,
    ScoringItem,
    answered,
    register_scorer,
    retrieval_unknown,
)

UNANSWERABLE = ("the task is unanswerable from its documents (answerable=false): there is no "
                "evidence to retrieve")


def precision_recall(read: list[str], gold: set[str]) -> tuple[float | None, float | None]:
    """Chunks read vs chunks containing a gold line; each chunk counted once."""
    read_set = set(read)
    hits = len(read_set & gold)
    precision = hits / len(read_set) if read_set else None
    recall = hits / len(gold) if gold else None
    return precision, recall


@register_scorer("retrieval")
class RetrievalScorer(Scorer):
    """Chunks the system used vs chunks holding gold lines; for systems that retrieve."""

    metrics = [Metric("retrieval_precision", "retrieval precision", report=True,
                      compare_priority=5, bounds=(0.0, 1.0)),
               Metric("retrieval_recall", "retrieval recall", report=True, bounds=(0.0, 1.0))]

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = []
        for item in items:
            s = Scores()
            p = item.prediction
            if p.skipped or p.error:
                why = f"skipped: {p.skip_reason}" if p.skipped else f"error: {p.error}"
                s.null(self.fields, why)
            elif not item.task.answerable:
                s.null(self.fields, UNANSWERABLE)
            elif retrieval_unknown(item):
                s.null(self.fields, retrieval_unknown(item) or "")
            elif not item.retrieves:
                s.null(self.fields, "this system does not retrieve (whole documents, the gold, "
                       "or nothing)")
            elif item.gold_chunk_ids is None:
                s.null(self.fields, "the dataset has no retrieval gold for this task")
            elif not item.gold_chunk_ids:
                s.null(self.fields, "no gold line of this task falls in any chunk")
            else:
                precision, recall = precision_recall(p.retrieved_chunk_ids, item.gold_chunk_ids)
                s.values = {"retrieval_precision": precision, "retrieval_recall": recall}
                if precision is None:
                    s.null_reasons["retrieval_precision"] = "no chunk was read"
            out.append(s)
        return out


@register_scorer("length")
class LengthScorer(Scorer):
    metrics = [Metric("word_count", "words", ci=False, histogram=False),
               Metric("length_ratio", "length / target", ci=False, histogram=False)]

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = []
        for item in items:
            s = Scores()
            why = answered(item)
            if why and not item.prediction.predicted:
                s.null(self.fields, why)
            else:
                words = len((item.prediction.predicted or "").split())
                s.values = {"word_count": float(words),
                            # a task may set its own target (dataset=folder's tasks.jsonl)
                            "length_ratio": words / (item.task.meta.get("target_length")
                                                     or item.target_length)}
            out.append(s)
        return out
