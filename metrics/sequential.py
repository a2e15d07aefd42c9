"""Anytime-valid comparisons: a sweep may look after every batch of tasks and stop as soon
as its comparisons are settled, with the family's error rate still at most ``ALPHA``.

* ``betting_cs``: the hedged-capital betting confidence sequence for the mean of a
  bounded quantity (Waudby-Smith & Ramdas 2023, "Estimating means of bounded random
  variables by betting", JRSS-B, Thm 3 and the predictable plug-in bets of their eq. 26).
  For every candidate mean ``m`` two gamblers bet that the mean is above and below ``m``;
  their capitals are nonnegative martingales when ``m`` is the true mean, so by Ville's
  inequality neither ever reaches ``1 / alpha`` with probability above ``alpha``. The
  sequence is the set of ``m`` not yet rejected, at every time at once: looking after each
  batch, or after each task, costs nothing in validity. A paired difference of a metric
  bounded in ``[low, high]`` lies in ``[-(high - low), high - low]`` and is mapped onto
  ``[0, 1]``.
* ``compare``: one look. Each comparison (a metric, two systems) gets its sequence at
  ``ALPHA`` split equally across the family (Bonferroni: the sequences are dependent and
  Holm's step-down has no anytime-valid form that is simpler), and a state: decided (the
  sequence excludes 0), equivalent (it lies within +-margin) or open.
* ``stop_reason``: the stopping rule the sweep applies after each look.
* ``paired``: a comparison from two runs' records: each task's mean over its repeats (a
  task counts once, whatever ``runner.repeats``), first minus second, in the order the
  tasks were run (the sequence depends on the order; the tasks both runs scored).

Why not a library: ``confseq`` 0.0.11 ships only a source archive whose build needs the
Boost C++ headers and CMake, its betting module imports ``matplotlib``/``multiprocess`` and
its ``misc`` module uses ``np.float_`` (gone in NumPy 2), so it does not import here;
``expectation`` 0.6.1 needs Python 3.12. The construction below follows
``confseq.betting.hedged_cs`` (same bets, truncation at ``1/2``, grid of 1000 means, the
same one-step widening), and ``tests/test_sequential.py`` checks its coverage.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from metrics.aggregate import task_means
from metrics.base import Metric
from metrics.stats import ALPHA

GRID = 1000  # candidate means on [0, 1]: the sequence's resolution is 1/GRID of the range
TRUNCATION = 0.5  # bets are capped at half the capital the candidate mean allows
# the share of a metric's range within which two systems count as equivalent when
# ``report.equivalence_margin`` names no margin for it (0.02 of [0, 1]; 0.08 of G-Eval's 1-5)
DEFAULT_MARGIN_SHARE = 0.02


def run_order(task_ids: Iterable[str], seed: int) -> list[str]:
    """The order a sequential sweep runs its tasks in: by a seeded hash of each id, so any
    subset of the tasks keeps the order it has in the whole set (a look rebuilt from the
    records of the tasks that ran pairs them as the sweep did)."""
    return sorted(set(task_ids), key=lambda t: hashlib.sha256(f"{seed}:{t}".encode()).hexdigest())


def _plug_in_bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """Predictable bets: each uses only the observations before it (regularised running
    mean and variance, prior 1/2 and 1/4 worth one observation), shrinking like
    ``1 / sqrt(t log t)`` so the sequence keeps narrowing."""
    t = np.arange(1, len(x) + 1)
    mean = (0.5 + np.cumsum(x)) / (t + 1)
    variance = (0.25 + np.cumsum((x - mean) ** 2)) / (t + 1)
    previous_variance = np.append(0.25, variance[:-1])
    return np.sqrt(2 * math.log(1 / alpha) / (t * np.log1p(t) * previous_variance))


def _log_capital(x: np.ndarray, means: np.ndarray, bets: np.ndarray, sign: int) -> np.ndarray:
    """log capital of the gambler betting the mean is above (``sign=1``) or below
    (``sign=-1``) each candidate mean, at every time: rows are means, columns times."""
    room = means if sign > 0 else 1 - means  # how far x may fall against the bet
    with np.errstate(divide="ignore"):
        cap = TRUNCATION / room
    stakes = np.minimum(bets[None, :], cap[:, None])
    return np.cumsum(np.log1p(sign * stakes * (x[None, :] - means[:, None])), axis=1)


def betting_cs(values: Sequence[float] | np.ndarray, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Hedged-capital confidence sequence for the mean of ``values`` (each in [0, 1]):
    ``(lows, highs)`` after each observation, holding at every time at once with
    probability at least ``1 - alpha``. Running intersection: the interval only narrows."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return np.zeros(0), np.zeros(0)
    if np.any((x < 0) | (x > 1)) or not np.all(np.isfinite(x)):
        raise ValueError("betting_cs needs values in [0, 1]")
    means = np.linspace(0.0, 1.0, GRID + 1)
    half = alpha / 2  # each gambler gets half of alpha, and half of the starting capital
    bets = _plug_in_bets(x, half)
    hedged = np.maximum(_log_capital(x, means, bets, 1), _log_capital(x, means, bets, -1))
    kept = hedged + math.log(0.5) < math.log(1 / alpha)
    any_kept = kept.any(axis=0)
    first = np.where(any_kept, kept.argmax(axis=0), 0)
    last = np.where(any_kept, GRID - kept[::-1].argmax(axis=0), GRID)
    # a mean between two grid points is kept if either neighbour is: widen by one step
    lows = np.maximum(means[first] - 1 / GRID, 0.0)
    highs = np.minimum(means[last] + 1 / GRID, 1.0)
    return np.maximum.accumulate(lows), np.minimum.accumulate(highs)


def difference_cs(differences: Sequence[float] | np.ndarray, width: float, alpha: float = ALPHA
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Confidence sequence for the mean paired difference of a metric whose range is
    ``width`` wide (differences lie in ``[-width, width]``), in the metric's units."""
    if not width > 0:
        raise ValueError("a metric's range must be wider than 0")
    d = np.asarray(differences, dtype=float) / width
    if np.any(np.abs(d) > 1 + 1e-9):
        raise ValueError(f"a difference exceeds the metric's range ({width:g} wide): a score "
                         "lies outside the bounds its metric declares")
    d = np.clip(d, -1.0, 1.0)  # rounding only
    lows, highs = betting_cs((d + 1) / 2, alpha)
    return (2 * lows - 1) * width, (2 * highs - 1) * width


def margin_for(metric: Metric, given: float | None = None) -> float:
    """The equivalence margin of ``metric``: ``given`` (``report.equivalence_margin``), or
    ``DEFAULT_MARGIN_SHARE`` of its declared range."""
    if given is not None:
        return given
    low, high = bounds_of(metric)
    return DEFAULT_MARGIN_SHARE * (high - low)


def bounds_of(metric: Metric) -> tuple[float, float]:
    if metric.bounds is None:
        raise ValueError(f"{metric.name} declares no bounds: an anytime-valid interval needs "
                         "the range its values lie in")
    return metric.bounds


class State(str, Enum):
    decided = "decided"  # the sequence excludes 0: the sign of the difference is known
    equivalent = "equivalent"  # the sequence lies within +-margin: no difference worth having
    open = "open"


@dataclass(frozen=True)
class Comparison:
    """What a comparison needs to be looked at: first minus second, task by task."""

    metric: str
    first: str
    second: str
    differences: tuple[float, ...]
    width: float  # of the metric's declared range
    margin: float  # equivalence margin, in the metric's units


def paired(metric: Metric, first: tuple[str, Sequence[dict]], second: tuple[str, Sequence[dict]],
           order: Sequence[str], margin: float | None = None) -> Comparison:
    """``first`` minus ``second`` (each ``(label, eval records)``) on ``metric``, task by
    task in ``order``, over the tasks both scored."""
    low, high = bounds_of(metric)
    a, b = task_means(first[1], metric.name), task_means(second[1], metric.name)
    differences = tuple(a[t] - b[t] for t in order if t in a and t in b)
    return Comparison(metric.name, first[0], second[0], differences, high - low,
                      margin_for(metric, margin))


@dataclass(frozen=True)
class Look:
    """One comparison at one look: its anytime-valid interval for the mean difference."""

    metric: str
    first: str
    second: str
    n: int
    mean_diff: float | None
    low: float
    high: float
    alpha: float  # the comparison's share of the family's error rate
    margin: float
    state: State

    @property
    def higher(self) -> str | None:
        """The system with the higher mean, once decided (which is better is the report's
        policy: a metric may declare lower is better)."""
        if self.state != State.decided:
            return None
        return self.first if self.low > 0 else self.second

    def row(self) -> dict[str, object]:
        return {"metric": self.metric, "first": self.first, "second": self.second,
                "n": self.n, "mean_diff": self.mean_diff, "cs_low": self.low,
                "cs_high": self.high, "alpha": self.alpha, "margin": self.margin,
                "state": self.state.value}


def state_of(low: float, high: float, margin: float) -> State:
    if low > 0 or high < 0:
        return State.decided
    if -margin <= low and high <= margin:
        return State.equivalent
    return State.open


def compare(comparisons: Sequence[Comparison], alpha: float = ALPHA) -> list[Look]:
    """Every comparison of the family at this look, each at ``alpha / len(family)``."""
    share = alpha / max(len(comparisons), 1)
    looks = []
    for c in comparisons:
        if c.differences:
            lows, highs = difference_cs(c.differences, c.width, share)
            low, high = float(lows[-1]), float(highs[-1])
            mean: float | None = float(np.mean(c.differences))
        else:
            low, high, mean = -c.width, c.width, None
        looks.append(Look(c.metric, c.first, c.second, len(c.differences), mean, low, high,
                          share, c.margin, state_of(low, high, c.margin)))
    return looks


class Stop(str, Enum):
    decided = "decided"  # every comparison decided
    equivalent = "equivalent"  # every comparison within its margin
    settled = "settled"  # every comparison decided or within its margin
    max_tasks = "max_tasks"
    tasks_out = "tasks_out"
    cost_cap = "cost_cap"


def stop_reason(looks: Sequence[Look], tasks_done: int, tasks_total: int,
                max_tasks: int | None = None, cost_capped: bool = False) -> Stop | None:
    """Why the sweep stops after this look, or None to run the next batch. The settled
    reasons come first: a sweep that decided on its last batch says it decided."""
    states = {look.state for look in looks}
    if looks and states == {State.decided}:
        return Stop.decided
    if looks and states == {State.equivalent}:
        return Stop.equivalent
    if looks and State.open not in states:
        return Stop.settled
    if cost_capped:
        return Stop.cost_cap
    if tasks_done >= tasks_total:
        return Stop.tasks_out
    if max_tasks is not None and tasks_done >= max_tasks:
        return Stop.max_tasks
    return None


def first_settled(differences: Sequence[float] | np.ndarray, width: float, margin: float, batch: int,
                  alpha: float = ALPHA) -> tuple[int, State]:
    """One comparison looked at after every ``batch`` tasks, as a sequential sweep looks:
    the tasks it had when it was first decided or equivalent (and that state), or all of
    them and ``State.open``. The sequence is computed once: its value after ``t`` tasks
    depends only on those tasks, so this equals a look after each batch."""
    lows, highs = difference_cs(differences, width, alpha)
    n = len(lows)
    for done in [*range(batch, n, batch), n]:
        state = state_of(float(lows[done - 1]), float(highs[done - 1]), margin)
        if state != State.open:
            return done, state
    return n, State.open
