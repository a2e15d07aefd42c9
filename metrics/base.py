"""Scorers: small registered factories, each computing named per-task fields.

A field that cannot be computed is None with a reason in ``null_reasons``; no scorer
ever substitutes a default number.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arag.records import Prediction, Task


@dataclass
class ScoringItem:
    prediction: Prediction
    task: Task
    gold_chunk_ids: set[str] | None  # None: the dataset has no retrieval gold
    context_text: str  # what the system put in front of the model
    target_length: int
    system_retrieves: bool  # False for systems that read whole documents (stuffing)
    # doc_id -> page of each line, for the task's paginated gold documents (PDF filings)
    line_pages: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass
class Scores:
    values: dict[str, float | None] = field(default_factory=dict)
    null_reasons: dict[str, str] = field(default_factory=dict)

    def null(self, fields: list[str], reason: str) -> None:
        for f in fields:
            self.values[f] = None
            self.null_reasons[f] = reason


class Scorer(ABC):
    name: str
    fields: list[str]

    @abstractmethod
    def score(self, items: list[ScoringItem]) -> list[Scores]:
        """One Scores per item, in order (batched: BERTScore runs one model pass)."""


class PerTaskScorer(Scorer):
    """A scorer that looks at one answered task at a time; unanswered ones get nulls, and
    so do its ``reference_fields`` for a task without a reference."""

    reference_fields: tuple[str, ...] = ()

    @abstractmethod
    def score_one(self, item: ScoringItem) -> Scores:
        """Scores of one task that has an answer."""

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = []
        for item in items:
            s = Scores()
            why = answered(item)
            no_reference = missing_reference(item)
            if why:
                s.null(self.fields, why)
            elif no_reference and set(self.fields) <= set(self.reference_fields):
                s.null(self.fields, no_reference)
            else:
                s = self.score_one(item)
                if no_reference:
                    s.null(list(self.reference_fields), no_reference)
            out.append(s)
        return out


ScorerFactory = Callable[[Any], Scorer]
SCORERS: dict[str, ScorerFactory] = {}


def register_scorer(name: str) -> Callable[[ScorerFactory], ScorerFactory]:
    def decorate(factory: ScorerFactory) -> ScorerFactory:
        SCORERS[name] = factory
        return factory

    return decorate


def answered(item: ScoringItem) -> str | None:
    """Why an item has no answer to score (skipped, error, empty), or None if it has one."""
    p = item.prediction
    if p.skipped:
        return f"skipped: {p.skip_reason}"
    if p.error:
        return f"error: {p.error}"
    if not (p.predicted or "").strip():
        return "empty prediction"
    return None


def missing_reference(item: ScoringItem) -> str | None:
    """Why a task has no reference to score against (e.g. silver references not written),
    or None if it has one."""
    if item.task.reference.strip():
        return None
    return item.task.meta.get("reference_missing") or "the task has no reference"
