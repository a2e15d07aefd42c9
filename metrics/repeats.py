"""What repeated answers to the same tasks say (``runner.repeats``): where a score's
variance comes from, how the CI would narrow, and whether a verdict holds across repeats.

* ``variance_components``: a score's variance split three ways, each a variance of one
  answer's score: **between tasks** (the variance of the per-task means over repeats, less
  the part of it the within-task spread explains), **within a task** (the mean over tasks of
  the sample variance across its repeats: generation noise, judge noise included) and
  **the judge's own** (a judge-scored field with ``judge.samples`` > 1: the mean over answers
  of the judge's sample variance over its samples divided by their number, the variance of
  the averaged score that the judge alone adds). With one repeat the within-task spread is
  unknown (None), never 0.
* ``projected_narrowing``: the normal-approximation 95% CI half-width of a mean over n
  tasks from the variance split, ``1.96 * sqrt((between + within / K) / n)``, and what more
  tasks (n grows) or more repeats would make of it. Repeats shrink only the within-task
  part (``within / K`` becomes ``within / (K + r)``); the between-task part stays, so the
  half-width never falls below ``1.96 * sqrt(between / n)`` however many repeats. Where the
  observed variance of the task means is below ``within / K`` (few tasks), the between part
  is estimated as 0 and the split's half-width is wider than the observed spread alone
  gives: the projection rests on the split, never on a negative variance. It is not the
  key finding's bootstrap CI, and the report names it apart.
* ``stability_share``: of the tasks two systems both answered K >= 2 times, the share whose
  winner (a's repeat r against b's repeat r; a tie is an outcome too) is the same in at least
  ``STABLE_SHARE`` of the repeats.
* ``pass_all``: pass^k, the share of tasks all of whose repeats are correct, for a field a
  scorer declares as pass/fail (``Metric.passes``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

STABLE_SHARE = 0.8
Z95 = 1.959963984540054


def task_values(records: Sequence[dict[str, Any]], key: str) -> dict[str, list[float]]:
    """Each task's finite ``key`` values, one per repeat in repeat order, by task id."""
    out: dict[str, list[tuple[int, float]]] = {}
    for r in records:
        value = r.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            continue
        out.setdefault(str(r["id"]), []).append((int(r.get("repeat") or 0), float(value)))
    return {task: [v for _, v in sorted(pairs)] for task, pairs in out.items()}


@dataclass(frozen=True)
class Components:
    """Variances of one answer's score (see the module docstring); None: not measurable."""

    between_tasks: float | None
    within_task: float | None
    judge: float | None
    n_tasks: int
    repeats: int  # the most repeats any task has
    of_means: float | None = None  # the observed sample variance of the task means

    def metrics(self, key: str) -> dict[str, float]:
        """The run metrics ``<key>_var_between_tasks`` / ``_var_within_task`` / ``_var_judge``
        (those measurable)."""
        named = {"between_tasks": self.between_tasks, "within_task": self.within_task,
                 "judge": self.judge}
        return {f"{key}_var_{part}": value for part, value in named.items() if value is not None}


def variance_components(records: Sequence[dict[str, Any]], key: str) -> Components:
    """The split of ``key``'s variance over these (answered) records."""
    values = task_values(records, key)
    repeats = max((len(v) for v in values.values()), default=0)
    spreads = [_spread(v) for v in values.values() if len(v) > 1]
    within = float(np.mean(spreads)) if spreads else None
    means = [float(np.mean(v)) for v in values.values()]
    between = raw = None
    if len(means) > 1:
        # the variance of task means holds within / K of generation noise: take it out
        raw = float(np.var(means, ddof=1))
        between = max(0.0, raw - (within or 0.0) / max(1, repeats))
    return Components(between, within, judge_variance(records, key), len(means), repeats,
                      raw if len(means) > 1 else None)


def _spread(values: list[float]) -> float:
    """Sample variance; exactly 0 for identical values (not a float-rounding residue)."""
    return 0.0 if min(values) == max(values) else float(np.var(values, ddof=1))


def judge_variance(records: Sequence[dict[str, Any]], key: str) -> float | None:
    """The judge's own variance of an answer's averaged ``key`` score: per answer, the
    sample variance over its ``<key>_samples`` over their number; their mean. None when no
    answer has two samples (one sample says nothing of the judge's spread)."""
    parts = []
    for r in records:
        samples = [s for s in r.get(f"{key}_samples") or [] if isinstance(s, int | float)]
        if len(samples) > 1:
            parts.append(_spread(samples) / len(samples))
    return float(np.mean(parts)) if parts else None


def ci_half_width(of_means: float, n_tasks: int) -> float:
    """Half-width of the normal 95% CI of a mean over ``n_tasks`` tasks whose means have
    variance ``of_means``."""
    return Z95 * math.sqrt(max(0.0, of_means) / n_tasks)


@dataclass(frozen=True)
class Projection:
    """The normal-approximation CI's half-width from the variance split: now, with more
    repeats, with more tasks."""

    now: float
    more_repeats: float
    more_tasks: float
    added_repeats: int
    added_tasks: int

    def sentence(self, what: str) -> str:
        return (f"The normal-approximation 95% CI of the {what} difference (from the variance "
                f"split: (between tasks + within task / K) over the tasks; not the key "
                f"finding's bootstrap CI) has half-width {_width(self.now)}: "
                f"{self.added_repeats} more repeats would narrow it to "
                f"{_width(self.more_repeats)}, {self.added_tasks} more tasks to "
                f"{_width(self.more_tasks)}.")


def _width(value: float) -> str:
    """A half-width as printed: never 0.000 for a width that is not 0."""
    return f"{value:.3f}" if round(value, 3) > 0 else "< 0.001"


def projected_narrowing(parts: Components, added_repeats: int = 5, added_tasks: int = 100
                        ) -> Projection | None:
    """What ``added_repeats`` more repeats or ``added_tasks`` more tasks would do to the
    normal-approximation CI of these components; None when the within-task spread is
    unknown (one repeat) or nothing varies (a width of 0 is no CI to narrow)."""
    if parts.between_tasks is None or parts.within_task is None:
        return None
    between, within = parts.between_tasks, parts.within_task
    n, k = parts.n_tasks, max(1, parts.repeats)
    if between + within == 0:
        return None
    return Projection(ci_half_width(between + within / k, n),
                      ci_half_width(between + within / (k + added_repeats), n),
                      ci_half_width(between + within / k, n + added_tasks),
                      added_repeats, added_tasks)


def difference_components(first: Sequence[dict[str, Any]], second: Sequence[dict[str, Any]],
                          key: str) -> Components:
    """The variance split of the per-answer difference first minus second, repeat r paired
    with repeat r on every task both have (what a paired comparison's CI rests on)."""
    a, b = task_values(first, key), task_values(second, key)
    diffs = [{"id": t, "repeat": r, key: x - y}
             for t in a if t in b for r, (x, y) in enumerate(zip(a[t], b[t], strict=False))]
    parts = variance_components(diffs, key)
    ja, jb = judge_variance(first, key), judge_variance(second, key)
    judge = None if ja is None and jb is None else (ja or 0.0) + (jb or 0.0)
    return Components(parts.between_tasks, parts.within_task, judge, parts.n_tasks,
                      parts.repeats, parts.of_means)


def stability_share(first: Sequence[dict[str, Any]], second: Sequence[dict[str, Any]],
                    key: str, higher_is_better: bool = True) -> tuple[float, int] | None:
    """(share of tasks whose winner holds in at least ``STABLE_SHARE`` of the repeats, tasks
    counted); None when no task has two repeats from both."""
    a, b = task_values(first, key), task_values(second, key)
    sign = 1.0 if higher_is_better else -1.0
    stable = counted = 0
    for task in (t for t in a if t in b):
        outcomes = [int(np.sign(sign * (x - y))) for x, y in zip(a[task], b[task], strict=False)]
        if len(outcomes) < 2:
            continue
        counted += 1
        stable += Counter(outcomes).most_common(1)[0][1] >= STABLE_SHARE * len(outcomes)
    return (stable / counted, counted) if counted else None


def pass_all(records: Sequence[dict[str, Any]], key: str) -> float | None:
    """pass^k: the share of tasks with two or more repeats all scored 1 (correct); None
    when no task has two."""
    repeated = [v for v in task_values(records, key).values() if len(v) > 1]
    return float(np.mean([all(x == 1 for x in v) for v in repeated])) if repeated else None


def repeat_differences(first: Sequence[dict[str, Any]], second: Sequence[dict[str, Any]],
                       key: str) -> list[float]:
    """For each repeat index both have, the mean over tasks of first minus second: the
    verdict each repeat alone would give."""
    a, b = task_values(first, key), task_values(second, key)
    by_repeat: dict[int, list[float]] = {}
    for task in (t for t in a if t in b):
        for r, (x, y) in enumerate(zip(a[task], b[task], strict=False)):
            by_repeat.setdefault(r, []).append(x - y)
    return [float(np.mean(by_repeat[r])) for r in sorted(by_repeat)]
