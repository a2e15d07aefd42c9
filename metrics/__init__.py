"""Scorers and aggregates. Scorers never call a system; they score its predictions."""

from metrics import retrieval, text  # noqa: F401  (registers the built-in scorers)
from metrics.aggregate import aggregate
from metrics.base import SCORERS, Scorer, Scores, ScoringItem, register_scorer


def build_scorers(metrics_cfg) -> list[Scorer]:
    scorers = []
    for name in metrics_cfg.scorers:
        if name not in SCORERS:
            raise ValueError(f"metrics.scorers names {name!r}; known scorers: {sorted(SCORERS)}")
        scorers.append(SCORERS[name](metrics_cfg.get(name)))
    return scorers


__all__ = ["SCORERS", "Scorer", "Scores", "ScoringItem", "aggregate", "build_scorers",
           "register_scorer"]
