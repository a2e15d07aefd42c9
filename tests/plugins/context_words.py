"""A scorer added the way a user adds one: this file and its name in metrics.scorers.

``context_words``: how many words of context the system's answer is judged against.
"""

from __future__ import annotations

from metrics import Metric, Scores, ScoringItem, register_scorer
from metrics.base import PerTaskScorer


@register_scorer("context_words")
class ContextWords(PerTaskScorer):  # unanswered tasks get nulls with the reason
    metrics = [Metric("context_words", "context words", ci=False)]

    def score_one(self, item: ScoringItem) -> Scores:
        return Scores({"context_words": float(len(item.context_text.split()))})
