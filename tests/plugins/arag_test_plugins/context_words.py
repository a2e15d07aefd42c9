"""A scorer added the way a user adds one, from their own package: this class, named by the
entry point ``context_words`` in group ``arag_eval.scorers``, and its name in
metrics.scorers.

``context_words``: how many words of context the system's answer is judged against.
"""

from __future__ import annotations

from metrics import Metric, Scores, ScoringItem
from metrics.base import NO_CONTEXT, PerTaskScorer


class ContextWords(PerTaskScorer):  # unanswered tasks get nulls with the reason
    metrics = [Metric("context_words", "context words", ci=False)]

    def score_one(self, item: ScoringItem) -> Scores:
        if item.context_text is None:  # the record does not say what the context was
            scores = Scores()
            scores.null(self.fields, NO_CONTEXT)
            return scores
        return Scores({"context_words": float(len(item.context_text.split()))})
