"""How the report ranks systems: which scores it compares on, in what order, which way is
better, which runs may win (bounds never do), which pairs are tested, judged and sliced, and
the one multiple-comparison correction. Every part of the report asks this module, so
changing a direction or the ranking rule is one edit here (the rules, for a reader:
docs/verdict.md#the-rules-behind-the-figures)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from arag.config import PairwisePairs
from metrics import Metric, declared_metrics
from metrics.pairwise import Pair
from metrics.stats import holm

Row = dict[str, Any]


def comparison_order() -> list[str]:
    """The scores a sweep may compare on, in the order the scorers declare: the first that
    any run has is used (G-Eval coverage when judged, ROUGE-2 with references, retrieval
    precision last, so a sweep with neither references nor a judge still gets a finding)."""
    ranked = [m for m in declared_metrics() if m.compare_priority is not None]
    return [m.name for m in sorted(ranked, key=lambda m: m.compare_priority or 0)]


# judge-panel agreement (Krippendorff's alpha) below which the caveats say the judged
# metrics rest on one judge's taste (Krippendorff's own floor for tentative conclusions)
AGREEMENT_FLOOR = 0.667
CORRECTION = "Holm"  # the multiple-comparison correction the verdict states and applies


def adjusted(p_values: Sequence[float | None]) -> list[float | None]:
    """The family's p-values adjusted by ``CORRECTION`` (untestable ones stay None)."""
    return holm(p_values)


def decidable() -> list[str]:
    """What ``report.decide_on`` may name: every per-task score a scorer declares."""
    return sorted({m.name for m in declared_metrics()})


def decision_metrics(requested: Sequence[str], default: str) -> list[str]:
    """The metrics the verdict decides on: ``report.decide_on`` as given (repeats dropped),
    or, left empty, ``default`` (the first of ``comparison_order`` any run has)."""
    return list(dict.fromkeys(requested)) or [default]


def report_metrics() -> list[Metric]:
    """The quality table's columns: what scorers declare for the report, comparison
    metrics first."""
    order = {name: i for i, name in enumerate(comparison_order())}
    return sorted((m for m in declared_metrics() if m.report),
                  key=lambda m: (order.get(m.name, len(order)), m.name))


def higher_is_better(key: str) -> bool:
    """The direction of a score (a metric nobody declared: higher is better)."""
    declared = {m.name: m for m in declared_metrics()}
    return declared[key].higher_is_better if key in declared else True


def is_bound(run: Row) -> bool:
    """A reference point (oracle, closed book): shown as a bound, never ranked."""
    return bool(run.get("bound"))


def contenders(runs: list[Row]) -> list[Row]:
    """The runs that may be ranked and named the winner."""
    return [r for r in runs if not is_bound(r)]


def ranked(runs: list[Row], score: Callable[[Row], float | None], key: str) -> list[Row]:
    """``runs`` best first on ``key`` (``score(run)``: its value; runs without one last, in
    their given order)."""
    sign = -1.0 if higher_is_better(key) else 1.0
    scored = [r for r in runs if score(r) is not None]
    rest = [r for r in runs if score(r) is None]
    return sorted(scored, key=lambda r: sign * float(score(r) or 0.0)) + rest


def advantage(diff: float, key: str) -> float:
    """A paired difference (first minus second) turned so that positive favours the first."""
    return diff if higher_is_better(key) else -diff


def agent_baselines(runs: list[Row]) -> tuple[list[Row], list[Row]]:
    """The verdict's question, asked of the contenders: each agentic run against each
    baseline (the non-agentic contenders). An agentic run whose model called no tool
    (``void_agent``) is neither: it answers closed-book, and is not put to that question."""
    runs = contenders(runs)
    return ([r for r in runs if r.get("agentic") and not void_agent(r)],
            [r for r in runs if not r.get("agentic")])


def pairs_of(runs: list[Row], which: PairwisePairs) -> list[Pair]:
    """The pairs the pairwise judge compares: each agentic run against each baseline, or
    every pair of contenders (bounds such as the oracle are reference points, never
    compared)."""
    if which == PairwisePairs.all:
        labels = [r["run"] for r in contenders(runs)]
        return [Pair(a, b) for i, a in enumerate(labels) for b in labels[i + 1:]]
    agents, baselines = agent_baselines(runs)
    return [Pair(a["run"], b["run"]) for a in agents for b in baselines]


def no_pair(runs: list[Row]) -> str:
    """Why ``pairs_of`` found no pair among ``runs``."""
    if len(runs) < 2:
        return "fewer than two compared runs"
    return ("no agentic run against a baseline to compare; judge.pairwise_pairs=all "
            "compares every pair")


def void_agent(run: Row) -> bool:
    """An agentic run whose model called no tool on any answered task (``agentic_void``)."""
    return agentic_void(tasks_without_tool_call(run), int(run.get("n_answered") or 0))


def judged(runs: list[Row]) -> bool:
    """Whether a judge ran in any of these runs (one definition for every part: the judge
    section, the taxonomy, the caveats and the cost table ask it)."""
    return any((r.get("judge_calls") or 0) > 0 for r in runs)


def tasks_without_tool_call(run: Row) -> int:
    """Answered tasks of an agentic run, offered tools, on which the model called none
    (the run metric ``tasks_without_tool_call``; 0 for any other run)."""
    return int(run.get("tasks_without_tool_call") or 0) if run.get("agentic") else 0


def agentic_void(without_tool_call: int, answered: int) -> bool:
    """Whether an agentic run says nothing about agentic retrieval: its model called no
    tool on any answered task (a model or chat template without tool calling), so against
    naive RAG and stuffing it compares closed-book answering. Some tasks may need no tool;
    not every one."""
    return answered > 0 and without_tool_call >= answered


def sliced(decided: Sequence[Any]) -> list[Any]:
    """The verdict's tests (``report.verdict.Decision``) that ``report.slice_by`` slices:
    every one with a paired comparison (two or more shared tasks)."""
    return [d for d in decided if d.paired is not None]


def keyed_slices(decided: Sequence[Any], keys: Sequence[str]) -> list[Any]:
    """The sliced tests whose interaction is said in the key finding: the first decision
    metric's (the others are in the section and its artifacts)."""
    return [d for d in sliced(decided) if keys and d.key == keys[0]]
