"""Scorers and aggregates. Scorers never call a system; they score its predictions."""

from metrics import geval, numeric, qa, ranking, retrieval, text  # noqa: F401  (registers scorers)
from metrics.aggregate import aggregate
from metrics.base import SCORERS, Scorer, Scores, ScoringItem, register_scorer


def build_scorers(cfg, judge=None, judge_reason: str = "", cache_dir=None) -> list[Scorer]:
    """The scorers ``metrics.scorers`` names, built from the full run config.

    ``judge`` is the judge model (None: judge metrics are null with ``judge_reason``);
    ``cache_dir`` is the resolved cache folder (G-Eval criteria live there).
    """
    scorers = []
    for name in cfg.metrics.scorers:
        if name not in SCORERS:
            raise ValueError(f"metrics.scorers names {name!r}; known scorers: {sorted(SCORERS)}")
        scorers.append(SCORERS[name](cfg, judge=judge, judge_reason=judge_reason,
                                     cache_dir=cache_dir))
    return scorers


__all__ = ["SCORERS", "Scorer", "Scores", "ScoringItem", "aggregate", "build_scorers",
           "register_scorer"]
