"""Scorers and aggregates. Scorers never call a system; they score its predictions."""

from dataclasses import replace
from typing import Any

from metrics.aggregate import aggregate, bootstrap_ci
from metrics.base import SCORERS, Metric, Scorer, ScorerEnv, Scores, ScoringItem, register_scorer


def build_scorers(metrics_cfg: Any, env: ScorerEnv) -> list[Scorer]:
    """The scorers ``metrics.scorers`` names, each from its ``metrics.<name>`` options."""
    env = replace(env, scorers=tuple(metrics_cfg.scorers))
    return [SCORERS.get(name).from_config(getattr(metrics_cfg, name, None), env)
            for name in metrics_cfg.scorers]


def default_scorers() -> list[Scorer]:
    """Every registered scorer with its default options and no judge."""
    env = ScorerEnv()
    return [cls.from_config(cls.Options() if cls.Options else None, env)
            for _, cls in SCORERS.items()]


def declared_metrics() -> list[Metric]:
    """What every registered scorer declares (default options)."""
    return [m for s in default_scorers() for m in s.metrics]


__all__ = ["SCORERS", "Metric", "Scorer", "ScorerEnv", "Scores", "ScoringItem", "aggregate",
           "bootstrap_ci", "build_scorers", "declared_metrics", "default_scorers",
           "register_scorer"]
