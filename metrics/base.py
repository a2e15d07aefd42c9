"""Scorers: registered classes, each declaring the per-task metrics it writes, how runs
aggregate them, and its options.

* ``metrics``: one ``Metric`` per numeric field: whether it gets a bootstrap CI, a share
  of tasks at or above a threshold, a histogram, a column in the report, and whether the
  sweep report may compare systems on it. Aggregation, plots and the report read these.
* ``Options``: a dataclass, the config node ``metrics.<name>`` (type-checked at compose time).
* ``aggregate``: run-level numbers beyond means and CIs (e.g. error-taxonomy rates).
* ``artifacts``: files to log with the run (e.g. the G-Eval criteria used).

A field that cannot be computed is None with a reason in ``null_reasons``; no scorer
ever substitutes a default number. A new scorer is one module in this package
(``@register_scorer("name")`` on its class) and its name in ``metrics.scorers``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from arag.datasets.sections import Section
from arag.llm.base import ChatModel
from arag.records import Chunk, Prediction, Task
from arag.registry import Registry

NO_JUDGE = "no judge configured (judge=none)"


@dataclass(frozen=True)
class Metric:
    """A numeric per-task field a scorer writes, and how a run aggregates and shows it."""

    name: str
    label: str = ""
    ci: bool = True  # bootstrap 95% CI of the mean
    share_at_least: float | None = None  # also the share of tasks scoring at least this
    histogram: bool = True
    bins: tuple[float, ...] | None = None  # histogram bins (None: 10 equal bins)
    report: bool = False  # a column of the report's quality table
    # the sweep report compares systems on the present metric with the lowest number
    compare_priority: int | None = None
    higher_is_better: bool = True  # the direction the report ranks runs in (report.policy)
    # 1 = correct, 0 = not: with runner.repeats >= 2 the run logs pass^k (every repeat
    # correct, ``<name>_pass_all``)
    passes: bool = False
    # the range every value lies in; an anytime-valid interval (metrics.sequential) needs
    # it. None: not declared bounded, so a sequential sweep cannot decide on it
    bounds: tuple[float, float] | None = None

    @property
    def title(self) -> str:
        return self.label or self.name

    @property
    def share_key(self) -> str:
        """The run metric holding the share at or above ``share_at_least``."""
        return f"{self.name}_share_ge{self.share_at_least:g}"


@dataclass
class ScoringItem:
    prediction: Prediction
    task: Task
    gold_chunk_ids: set[str] | None  # None: the dataset has no retrieval gold
    # what the system put in front of the model (System.judged_context); None: the record
    # does not say (scores that need it are null with NO_CONTEXT)
    context_text: str | None
    target_length: int
    retrieves: bool  # the system declares it picks chunks (System.retrieves)
    # doc_id -> page of each line, for the task's paginated gold documents (PDF filings)
    line_pages: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # the system's ranking of chunks, best first (System.ranking); None: it does not rank
    ranking: list[str] | None = None
    # how many chunks the context amounts to (System.context_chunks)
    context_chunks: int | None = None
    agentic: bool = False  # the system declares a model-driven loop (System.agentic)
    # ``prediction.predicted`` is the answer without citation markers (what every scorer
    # reads); the answer as written, markers included, is here
    cited_answer: str | None = None
    cites: bool = False  # the run asked for [c:<chunk id>] citations (System.cites)
    chunks: Mapping[str, Chunk] = field(default_factory=dict)  # the run's chunks by id
    # doc_id -> its sections (arag.datasets.sections), for the task's documents
    sections: Mapping[str, tuple[Section, ...]] = field(default_factory=dict)
    # what the scorers listed before this one wrote for the task (a scorer reuses a judge's
    # reply instead of asking again: attribution reads factual_consistency's claims)
    earlier: dict[str, Any] = field(default_factory=dict)


@dataclass
class Scores:
    values: dict[str, Any] = field(default_factory=dict)
    null_reasons: dict[str, str] = field(default_factory=dict)

    def null(self, fields: list[str], reason: str) -> None:
        for f in fields:
            self.values[f] = None
            self.null_reasons[f] = reason


@dataclass
class ScorerEnv:
    """What scorers get from the run beyond their own options."""

    judge: ChatModel | None = None
    judge_reason: str = NO_JUDGE  # why there is no judge, when there is none
    judge_id: str = "none"  # provider/model id: keys the G-Eval criteria
    judge_batch: bool = False  # Message Batches for judge calls
    judge_samples: int = 1  # independent replies per G-Eval item and dimension
    panel: dict[str, ChatModel] = field(default_factory=dict)  # further judges, by option name
    cache_dir: Path = Path("data/cache")
    concurrency: int = 4
    device: str = "auto"  # where models run (retrieval.embedder.device; auto: GPU if any)
    scorers: tuple[str, ...] = ()  # the run's metrics.scorers, in order (build_scorers)


class Scorer(ABC):
    name: ClassVar[str]
    Options: ClassVar[type | None] = None
    metrics: list[Metric]
    # scorers whose values this one reuses (ScoringItem.earlier) when they run before it
    reads: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_config(cls, options: Any, env: ScorerEnv) -> Scorer:
        """The scorer for its ``metrics.<name>`` options and the run's environment."""
        return cls()

    @property
    def fields(self) -> list[str]:
        return [m.name for m in self.metrics]

    @abstractmethod
    def score(self, items: list[ScoringItem]) -> list[Scores]:
        """One Scores per item, in order (batched: BERTScore runs one model pass)."""

    def aggregate(self, answered: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> dict[str, float]:
        """Run-level numbers beyond means and CIs, from the answered and all records."""
        return {}

    def artifacts(self) -> dict[str, Any]:
        """JSON-serialisable files to log with the run, name -> data."""
        return {}

    def judge_requests(self, items: list[ScoringItem], judge_id: str, primary: bool
                       ) -> dict[str, dict[str, Any]]:
        """Every call scoring ``items`` would make to one judge (``primary``: the run's
        judge, else a panel judge ``judge_id``), as ``complete()`` kwargs by id, with none
        made: the dry run prices them. Where a call depends on an earlier reply, count it
        (an upper bound). None by default: a scorer that asks no judge."""
        return {}

    def provenance(self) -> dict[str, str]:
        """Run params naming what the scores were computed with that the config does not
        spell out (e.g. the resolved path of a model)."""
        return {}


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


def _named(name: str, cls: type[Scorer]) -> None:
    cls.name = name


# an installed package's scorers come through the ``arag_eval.scorers`` entry-point group
SCORERS: Registry[type[Scorer]] = Registry("scorer", "metrics.scorers", "metrics",
                                           group="arag_eval.scorers", on_register=_named)


def register_scorer(name: str) -> Callable[[type[Scorer]], type[Scorer]]:
    return SCORERS.register(name)


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


NO_CONTEXT = ("the prediction records no context (no context_chunk_ids or context texts): "
              "there is nothing to judge it against")
NO_RETRIEVAL = ("the prediction records no retrieval (no retrieved_chunk_ids or locatable "
                "context texts)")


def retrieval_unknown(item: ScoringItem) -> str | None:
    """Why a task's retrieval cannot be scored from its record, or None if it can."""
    p = item.prediction
    return NO_RETRIEVAL if "retrieved_chunk_ids" in p.not_recorded else None


def missing_reference(item: ScoringItem) -> str | None:
    """Why a task has no reference to score against (e.g. silver references not written),
    or None if it has one."""
    if item.task.reference.strip():
        return None
    return item.task.meta.get("reference_missing") or "the task has no reference"


PARSE_FAILURES = "_parse_failures"  # a judge-scored field's count of unreadable replies


def parse_failure_counts(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Field -> its count of unreadable replies, from a run's ``<field>_parse_failures``
    metrics (``count_flags``); the judge's per-sample counts are not fields of their own."""
    return {k.removesuffix(PARSE_FAILURES): v for k, v in metrics.items()
            if k.endswith(PARSE_FAILURES) and not k.endswith("_sample" + PARSE_FAILURES)}


def count_flags(records: list[dict[str, Any]], flags: list[str]) -> dict[str, float]:
    """``<field>_parse_failures``: how many records set each ``<field>_parse_failed`` flag."""
    return {f.replace("_parse_failed", "_parse_failures"): float(sum(1 for r in records
                                                                    if r.get(f)))
            for f in flags if any(f in r for r in records)}
