"""The report as a model of claims: what every analysis returns and every writer reads.

An analysis (a module of ``report/analyses/``, or an installed package's through the
entry-point group ``arag_eval.analyses``) is ``(Inputs) -> Analysis``, registered with
``@register_analysis(name, order)``; it returns ``Claim``s (what the numbers support) and
``Note``s (caveats), never text. The writers (``report/writers``) put them into words; the
answer is composed from the claims by ``report.answer``."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arag.registry import Registry

if TYPE_CHECKING:
    from report.verdict import Decision, TaskSets
    from tracking.human_labels import HumanLabel

Row = dict[str, Any]


class Authority(IntEnum):
    """How far a claim may decide the answer; the answer takes the highest present
    (``report.answer`` states the rule)."""

    descriptive = 0  # figures shown, nothing decided by them
    fixed_sample = 1  # the Holm-adjusted Wilcoxon family
    interaction = 2  # the lead changes hands with a document feature
    recommendation = 3  # what to ship (the frontier, the routing policies)
    corrected = 4  # judge means corrected by people's labels (PPI++)
    sequential = 5  # anytime-valid intervals of a sequential sweep
    regression = 6  # against a pinned baseline: always stated


@dataclass(frozen=True)
class Table:
    """Rows a claim or note shows under its words (report.md/html and compare.html)."""

    header: Sequence[str]
    rows: Sequence[Sequence[Any]]


@dataclass(frozen=True)
class Claim:
    """One thing the numbers say, with everything needed to state and trace it.

    ``kind`` names what sort of claim it is (``difference``, ``no_difference``,
    ``crossover``, ``stopped``, ``corrected``, ``regression``, ``frontier``, ``route``,
    ``cause``, ``path``, ...); the writers render a known kind in its own words and any
    other kind (a plugin's) from its fields. ``decisive``: whether it decides something
    (a difference declared, a recommendation made); the answer is composed from the
    decisive claims of the highest authority, or says what would decide."""

    kind: str
    section: str  # the report section it belongs to ("Where each system wins", ...)
    runs: tuple[str, ...] = ()  # the run labels it concerns, first minus second
    metric: str | None = None
    difference: float | None = None
    ci: tuple[float, float] | None = None
    p: float | None = None
    p_adjusted: float | None = None
    n_tasks: int | None = None
    n_documents: int | None = None
    rule: str = ""  # the rule that produced it ("Holm-adjusted Wilcoxon", "anytime-valid", ...)
    authority: Authority = Authority.descriptive
    decisive: bool = False
    key: bool = False  # among the findings the console and the description show
    figures: Mapping[str, Any] = field(default_factory=dict)  # every other number it rests on
    table: Table | None = None

    def record(self) -> Row:
        """The claim's fields as a JSON-ready row (``findings.jsonl`` adds its words)."""
        return {"kind": self.kind, "section": self.section, "runs": list(self.runs),
                "metric": self.metric, "difference": _finite(self.difference),
                "ci": list(self.ci) if self.ci else None, "p": _finite(self.p),
                "p_adjusted": _finite(self.p_adjusted), "n_tasks": self.n_tasks,
                "n_documents": self.n_documents, "rule": self.rule,
                "authority": self.authority.name, "decisive": self.decisive, "key": self.key,
                "caveat": False, "figures": dict(self.figures)}


@dataclass(frozen=True)
class Note:
    """A limit on what the report may claim (a caveat), of one ``kind``, for ``runs``.

    Notes of the same kind are said once across runs by the console ("4 runs give no
    loops: null, not 0"); ``counts`` holds the numbers the words state."""

    kind: str
    section: str = "Caveats"
    runs: tuple[str, ...] = ()
    counts: Mapping[str, Any] = field(default_factory=dict)
    key: bool = True  # a caveat the console and the description say

    def record(self) -> Row:
        return {"kind": self.kind, "section": self.section, "runs": list(self.runs),
                "key": self.key, "caveat": True, "figures": dict(self.counts)}


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


Plot = Callable[[Path], "Path | None"]  # draws into a folder; the file made, or None


@dataclass
class Analysis:
    """What one analysis returns: claims and notes, the rows it logs as ``<name>.jsonl`` on
    the parent run, parent-run metrics, per-child metrics and plots."""

    claims: list[Claim] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    artifacts: dict[str, list[Row]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    plots: list[Plot] = field(default_factory=list)
    run_metrics: dict[str, dict[str, float]] = field(default_factory=dict)

    def extend(self, other: Analysis) -> None:
        # new lists, not in place: a list the caller handed in is never changed under it
        self.claims = [*self.claims, *other.claims]
        self.notes = [*self.notes, *other.notes]
        for run_id, metrics in other.run_metrics.items():
            self.run_metrics.setdefault(run_id, {}).update(metrics)
        for name, rows in other.artifacts.items():
            self.artifacts.setdefault(name, []).extend(rows)
        self.metrics.update(other.metrics)
        self.plots = [*self.plots, *other.plots]


@dataclass(frozen=True)
class Inputs:
    """What every analysis may read: the runs, their records, the verdict's task sets and
    family of tests, the sweep's ``report`` options (empty on a rebuild without them) and
    people's labels."""

    rows: list[Row]  # every run of the report (``report.report._row``)
    finished: list[Row]  # the compared ones
    records: dict[str, list[Row]]  # run id -> eval records
    sets: TaskSets
    keys: list[str]  # the decision metrics (report.decide_on)
    decided: list[Decision]  # the verdict's family of tests
    options: Mapping[str, Any] = field(default_factory=dict)
    labels: list[HumanLabel] = field(default_factory=list)
    pairwise: Any = None  # the sweep's pairwise judging (report.pairwise.PairwiseView), if any
    people: Any = None  # ``labels`` already held against the judge (human_agreement.compare)


def runs_with(inputs: Inputs, kept: Callable[[Row], bool],
              run: Callable[[Row], bool] = lambda _: True) -> list[tuple[Row, list[Row]]]:
    """Each compared run (that ``run`` keeps) with its records that ``kept`` keeps (the
    ones a scorer measured); a run with none is left out."""
    found = [(row, [r for r in inputs.records.get(row["run_id"], []) if kept(r)])
             for row in inputs.finished if run(row)]
    return [(row, records) for row, records in found if records]


@dataclass(frozen=True)
class Registered:
    name: str
    order: int
    run: Callable[[Inputs], Analysis]


ANALYSES: Registry[Registered] = Registry("report analysis", "report analyses",
                                          "report.analyses", group="arag_eval.analyses")


def register_analysis(name: str, order: int) -> Callable[[Callable[[Inputs], Analysis]],
                                                         Callable[[Inputs], Analysis]]:
    """Register ``(Inputs) -> Analysis`` under ``name``; the report runs the analyses by
    ``order`` (then name). A module of ``report/analyses/`` or an installed package's
    (entry-point group ``arag_eval.analyses``) registers itself on import."""

    def decorate(fn: Callable[[Inputs], Analysis]) -> Callable[[Inputs], Analysis]:
        ANALYSES.register(name, origin=f"{fn.__module__}.{fn.__qualname__}")(
            Registered(name, order, fn))
        return fn

    return decorate


def registered() -> list[Registered]:
    """Every registered analysis, in the report's order."""
    return sorted((entry for _, entry in ANALYSES.items()), key=lambda e: (e.order, e.name))


def run_all(inputs: Inputs) -> Analysis:
    merged = Analysis()
    for entry in registered():
        merged.extend(entry.run(inputs))
    return merged
