"""What to ship: the cost-quality frontier of a sweep's systems, and routing policies scored
out of sample from the logged per-task results.

Everything here is a pure function of arrays over the same tasks (``Tasks``): each system's
quality on the decision metric (NaN: not scored), its uncached cost and latency per task
(NaN: unknown, never 0), whether it declined the task, the tasks' document features and
document clusters. Every interval resamples whole documents (``metrics.stats``).

* ``point``: a system's mean quality and mean cost, each with a clustered bootstrap 95% CI,
  and its P50/P90 latency, over the tasks every system scored.
* ``dominance``: a point is dominated only when another costs less and the upper CI bound
  of (costlier minus cheaper) quality, turned so that positive is better, lies below the
  metric's equivalence margin: the costlier one is shown not to be better by anything
  worth having. A point of unknown cost is never dominated and dominates nothing.
* The policies. Each sends every task to one system (``Route``):
  - ``oracle``: the best answer per task, ties to the cheaper system; it sees the answers,
    so it is an unattainable upper bound, scored in sample;
  - ``fits``: the long-context system where the document fits the window (``fits_context``),
    else the retrieving system chosen on the training folds;
  - ``threshold``: one system below a feature threshold, another above; feature, pair and
    threshold (the training tasks' feature deciles) chosen on K-1 folds of whole documents
    and scored on the held-out fold (cross-fitting), so the score is out of sample;
  - ``cascade``: a first system on every task, a second where the first declined (a skip,
    an empty answer, a refusal: ``arag.systems.routed.decline_reason``, the signal the live
    cascade uses); its cost is the first's on every task plus the second's on the declined.
* ``score``: a policy's quality, its paired difference from the best single system (CI
  clustered by document, Wilcoxon p), its cost, P90 latency, shares and regret against the
  oracle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arag.systems.routed import ROUTE_FEATURES
from metrics.stats import ALPHA, Paired, paired_difference, resampled_means

FOLDS = 5  # cross-fitting folds of whole documents
DECILES = np.linspace(0.1, 0.9, 9)
TIE = 1e-12


@dataclass(frozen=True)
class Tasks:
    """Per-task results of ``names`` (rows) on the same tasks (columns)."""

    names: list[str]
    quality: np.ndarray  # (S, N) in the metric's units; NaN: not scored
    cost: np.ndarray  # (S, N) uncached USD; NaN: unknown
    latency: np.ndarray  # (S, N) ms; NaN: unknown
    declined: np.ndarray  # (S, N) bool: the system declined the task (its own signal)
    clusters: np.ndarray  # (N,) document cluster of each task
    features: Mapping[str, np.ndarray] = field(default_factory=dict)  # (N,) NaN: unknown
    fits: np.ndarray | None = None  # (N,) 1.0 fits, 0.0 not, NaN unknown
    long_context: Sequence[bool] = ()
    retrieves: Sequence[bool] = ()
    higher_is_better: bool = True

    @property
    def n(self) -> int:
        return int(self.quality.shape[1])

    @property
    def sign(self) -> float:
        return 1.0 if self.higher_is_better else -1.0

    @property
    def scored(self) -> np.ndarray:
        """Tasks every system scored: where points are placed and policies fitted."""
        return ~np.isnan(self.quality).any(axis=0)

    def mean_cost(self, i: int) -> float | None:
        values = self.cost[i, self.scored]
        return None if values.size == 0 or np.isnan(values).any() else float(values.mean())


@dataclass(frozen=True)
class Estimate:
    mean: float
    low: float
    high: float


def estimate(values: np.ndarray, clusters: np.ndarray, seed: int = 0) -> Estimate | None:
    """The mean with its clustered bootstrap 95% CI; None when empty or any value unknown."""
    if values.size == 0 or np.isnan(values).any():
        return None
    if values.size == 1 or np.ptp(values) == 0:
        return Estimate(float(values.mean()), float(values.mean()), float(values.mean()))
    low, high = np.percentile(resampled_means(values.tolist(), list(clusters), seed),
                              [2.5, 97.5])
    return Estimate(float(values.mean()), float(low), float(high))


def percentile(values: np.ndarray, q: float) -> float | None:
    return None if values.size == 0 or np.isnan(values).any() else float(np.percentile(values, q))


@dataclass(frozen=True)
class Point:
    """A run or a policy on the cost-quality plane, with the per-task figures it rests on."""

    name: str
    kind: str  # run | policy
    quality: Estimate | None
    cost: Estimate | None  # None: unknown (placed on quality alone)
    latency_p50: float | None
    latency_p90: float | None
    per_task: np.ndarray  # (N,) quality per task, NaN where it has none
    bound: bool = False  # the oracle: unattainable, never on the frontier


def point(tasks: Tasks, i: int) -> Point:
    """System ``i`` over the tasks every system scored."""
    on = tasks.scored
    return Point(tasks.names[i], "run", estimate(tasks.quality[i, on], tasks.clusters[on]),
                 estimate(tasks.cost[i, on], tasks.clusters[on]),
                 percentile(tasks.latency[i, on], 50), percentile(tasks.latency[i, on], 90),
                 np.where(on, tasks.quality[i], np.nan))


def paired(tasks: Tasks, first: np.ndarray, second: np.ndarray) -> Paired | None:
    """``first`` minus ``second`` (per-task quality), turned so that positive is better, on
    the tasks both have, resampled and tested by document."""
    both = ~np.isnan(first) & ~np.isnan(second)
    return paired_difference(tasks.sign * first[both], tasks.sign * second[both],
                             clusters=list(tasks.clusters[both]))


def dominance(tasks: Tasks, points: Sequence[Point], margin: float) -> dict[str, list[str]]:
    """Name -> the names of the points that dominate it (see the module's docstring)."""
    out: dict[str, list[str]] = {p.name: [] for p in points}
    for costly in points:
        for cheap in points:
            if costly is cheap or costly.bound or cheap.bound or costly.cost is None \
                    or cheap.cost is None or not cheap.cost.mean < costly.cost.mean - TIE:
                continue
            diff = paired(tasks, costly.per_task, cheap.per_task)
            if diff is not None and diff.ci_high < margin:
                out[costly.name].append(cheap.name)
    return out


def frontier(points: Sequence[Point], dominated: Mapping[str, list[str]]) -> list[Point]:
    """The points of known cost nobody dominates (the oracle left out), cheapest first."""
    return sorted((p for p in points if p.cost is not None and not p.bound
                   and not dominated.get(p.name)), key=lambda p: (p.cost.mean if p.cost else 0))


# --- policies ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Route:
    """Where a policy sends each task: ``choice`` (system index; -1: nowhere, e.g. an
    unknown feature; a cascade's: the system that answered), a cascade's escalated tasks
    and its first system on each, and its rule as fitted on
    all tasks (``rule``)."""

    policy: str
    choice: np.ndarray  # (N,) int
    rule: dict[str, Any]
    escalated: np.ndarray | None = None  # (N,) bool: a cascade's declined tasks
    first: np.ndarray | None = None  # (N,) int: a cascade's first system on each task
    in_sample: bool = False


def folds_of(clusters: np.ndarray, k: int = FOLDS, seed: int = 0) -> np.ndarray:
    """Each task's fold: whole document clusters dealt in a seeded order, so no document
    is in two folds."""
    unique = np.unique(clusters)
    order = np.random.default_rng(seed).permutation(len(unique))
    fold_of = {c: int(r) % k for c, r in zip(unique[order], range(len(unique)), strict=True)}
    return np.asarray([fold_of[c] for c in clusters], dtype=int)


def _choose(tasks: Tasks, choice: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per-task quality of a routing (NaN where it sends a task nowhere or to no score)."""
    safe = np.where(choice >= 0, choice, 0)
    values = tasks.quality[safe, np.arange(tasks.n)]
    return np.where((choice >= 0) & mask, values, np.nan)


def oracle(tasks: Tasks) -> Route:
    """Per task the best score any system has, ties to the cheaper system (per task, else
    by mean cost)."""
    oriented = np.where(np.isnan(tasks.quality), -np.inf, tasks.sign * tasks.quality)
    costs = np.asarray([tasks.mean_cost(i) or np.inf for i in range(len(tasks.names))])
    tie_cost = np.where(np.isnan(tasks.cost), costs[:, None], tasks.cost)
    best = oriented.max(axis=0)
    candidates = np.where(oriented >= best - TIE, tie_cost, np.inf)
    choice = np.where(np.isfinite(best), candidates.argmin(axis=0), -1)
    return Route("oracle", choice, {"order": "best answer per task, ties to the cheaper"},
                 in_sample=True)


def _threshold_fit(tasks: Tasks, train: np.ndarray, features: Sequence[str]
                   ) -> dict[str, Any] | None:
    """Feature, threshold (a decile of the training tasks), below and above systems with
    the best mean training quality; ties to the cheaper routing, then the simpler."""
    q = tasks.sign * tasks.quality
    costs = np.nan_to_num(tasks.cost, nan=0.0)
    best: tuple[float, float, dict[str, Any]] | None = None
    for name in features:
        x = np.asarray(tasks.features.get(name, np.full(tasks.n, np.nan)), dtype=float)
        on = train & ~np.isnan(x)
        if on.sum() < 2:
            continue
        n = on.sum()
        for threshold in dict.fromkeys(float(t) for t in np.quantile(x[on], DECILES)):
            below = on & (x < threshold)
            above = on & ~(x < threshold)
            qb, qa = q[:, below].sum(axis=1), q[:, above].sum(axis=1)
            cb, ca = costs[:, below].sum(axis=1), costs[:, above].sum(axis=1)
            score = (qb[:, None] + qa[None, :]) / n
            cost = (cb[:, None] + ca[None, :]) / n
            for a in range(len(tasks.names)):
                for b in range(len(tasks.names)):
                    key = (float(score[a, b]), -float(cost[a, b]))
                    if best is None or key[0] > best[0] + TIE or (
                            abs(key[0] - best[0]) <= TIE and key[1] > best[1] + TIE):
                        best = (*key, {"feature": name, "threshold": threshold,
                                       "below": a, "above": b})
    return None if best is None else best[2]


def _apply_threshold(tasks: Tasks, rule: dict[str, Any]) -> np.ndarray:
    x = np.asarray(tasks.features[rule["feature"]], dtype=float)
    return np.where(np.isnan(x), -1, np.where(x < rule["threshold"], rule["below"],
                                                rule["above"])).astype(int)


def threshold(tasks: Tasks, features: Sequence[str] = ("document_tokens",),
              k: int = FOLDS, seed: int = 0) -> Route | None:
    """The threshold policy, cross-fitted over ``k`` folds of whole documents; None when no
    feature is known on the tasks (only features known before any system answers route)."""
    features = [f for f in features if f in ROUTE_FEATURES]
    fitted = _threshold_fit(tasks, tasks.scored, features)
    if fitted is None:
        return None
    folds = folds_of(tasks.clusters, k, seed)
    choice = np.full(tasks.n, -1, dtype=int)
    for fold in range(k):
        rule = _threshold_fit(tasks, tasks.scored & (folds != fold), features)
        if rule is not None:
            held = folds == fold
            choice[held] = _apply_threshold(tasks, rule)[held]
    return Route("threshold", choice, {**fitted, "below": tasks.names[fitted["below"]],
                                       "above": tasks.names[fitted["above"]]})


def fits(tasks: Tasks, k: int = FOLDS, seed: int = 0) -> Route | None:
    """The long-context system where the document fits, else the retrieving system best on
    the training folds; None without a long-context and a retrieving system, or with no
    task's fit known."""
    stuffers = [i for i, flag in enumerate(tasks.long_context) if flag]
    retrievers = [i for i, flag in enumerate(tasks.retrieves) if flag]
    if not stuffers or not retrievers or tasks.fits is None or np.isnan(tasks.fits).all():
        return None
    stuffer = stuffers[0]
    q = tasks.sign * np.nan_to_num(tasks.quality, nan=-np.inf)

    def pick(train: np.ndarray) -> int:
        return max(retrievers, key=lambda i: float(q[i, train].mean()) if train.any() else 0.0)

    def route(retriever: int) -> np.ndarray:
        fit = tasks.fits if tasks.fits is not None else np.full(tasks.n, np.nan)
        return np.where(np.isnan(fit), -1, np.where(fit > 0, stuffer, retriever)).astype(int)

    folds = folds_of(tasks.clusters, k, seed)
    choice = np.full(tasks.n, -1, dtype=int)
    for fold in range(k):
        held = folds == fold
        choice[held] = route(pick(tasks.scored & ~held))[held]
    chosen = pick(tasks.scored)
    return Route("fits", choice, {"feature": "fits_context", "below": tasks.names[stuffer],
                                  "above": tasks.names[chosen], "threshold": None})


def cascade(tasks: Tasks, order: Sequence[int]) -> Route:
    """``order[0]`` on every task, ``order[1]`` where the first declined."""
    first, second = int(order[0]), int(order[1])
    escalated = tasks.declined[first].astype(bool)
    return Route("cascade", np.where(escalated, second, first).astype(int),
                 {"order": [tasks.names[first], tasks.names[second]]}, escalated,
                 np.full(tasks.n, first, dtype=int))


def cascade_fit(tasks: Tasks, k: int = FOLDS, seed: int = 0) -> Route | None:
    """The cascade whose order (cheaper first) does best on the training folds, scored on
    the held-out fold; None without a first system of known cost that ever declines (a
    cascade that never escalates is its first system)."""
    known = [i for i in range(len(tasks.names)) if tasks.mean_cost(i) is not None]
    orders = [(a, b) for a in known for b in known if a != b and tasks.declined[a].any()
              and (tasks.mean_cost(a) or 0) <= (tasks.mean_cost(b) or 0)]
    if not orders:
        return None
    routes = {o: cascade(tasks, o) for o in orders}
    values = {o: _choose(tasks, r.choice, np.ones(tasks.n, bool)) for o, r in routes.items()}

    def pick(train: np.ndarray) -> tuple[int, int]:
        def mean(o: tuple[int, int]) -> float:
            v = tasks.sign * values[o][train]
            return float(np.nanmean(v)) if (~np.isnan(v)).any() else -np.inf
        return max(orders, key=lambda o: (mean(o), -(tasks.mean_cost(o[0]) or 0)))

    folds = folds_of(tasks.clusters, k, seed)
    choice = np.full(tasks.n, -1, dtype=int)
    escalated = np.zeros(tasks.n, dtype=bool)
    first = np.zeros(tasks.n, dtype=int)
    everywhere = np.ones(tasks.n, dtype=bool)
    for fold in range(k):
        held = folds == fold
        order = pick(everywhere & ~held)
        choice[held] = routes[order].choice[held]
        escalated[held] = tasks.declined[order[0]][held]
        first[held] = order[0]
    return Route("cascade", choice, routes[pick(everywhere)].rule, escalated, first)


# --- scores -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Scored:
    """A policy's figures, each over the tasks it and the best single system both have."""

    route: Route
    point: Point
    best_single: str
    diff: Paired | None  # policy minus best single, positive = better
    shares: dict[str, float]
    regret: float | None  # the oracle's mean minus the policy's, on the same tasks
    n_tasks: int
    escalated: int | None  # a cascade's declined tasks


def route_cost(tasks: Tasks, route: Route) -> np.ndarray:
    """Per-task cost of a routing: the chosen system's; a cascade's first on every task
    plus its second on the escalated ones."""
    return _route_sum(tasks, route, tasks.cost)


def route_latency(tasks: Tasks, route: Route) -> np.ndarray:
    """Per-task latency of a routing, a cascade's two calls one after the other."""
    return _route_sum(tasks, route, tasks.latency)


def _route_sum(tasks: Tasks, route: Route, values: np.ndarray) -> np.ndarray:
    idx = np.arange(tasks.n)
    safe = np.where(route.choice >= 0, route.choice, 0)
    chosen = np.where(route.choice >= 0, values[safe, idx], np.nan)
    if route.escalated is None or route.first is None:
        return chosen
    return values[route.first, idx] + np.where(route.escalated, chosen, 0.0)


def score(tasks: Tasks, route: Route, best: int, oracle_quality: np.ndarray | None
          ) -> Scored:
    """``route`` against system ``best``: over the tasks the system it sends each to scored
    and ``best`` has (a cascade's include those its first declined and its second
    answered; ``fits``' those stuffing skipped and the retriever answered)."""
    values = _choose(tasks, route.choice, np.ones(tasks.n, bool))
    on = ~np.isnan(values) & ~np.isnan(tasks.quality[best])
    values = np.where(on, values, np.nan)
    cost, latency = route_cost(tasks, route)[on], route_latency(tasks, route)[on]
    chosen = route.choice[on]
    shares = {name: float(np.mean(chosen == i)) if chosen.size else 0.0
              for i, name in enumerate(tasks.names)}
    regret = None
    if oracle_quality is not None and on.any():
        both = on & ~np.isnan(oracle_quality)
        regret = float(tasks.sign * (np.mean(oracle_quality[both]) - np.mean(values[both])))
    p = Point(f"policy:{route.policy}", "policy", estimate(values[on], tasks.clusters[on]),
              estimate(cost, tasks.clusters[on]), percentile(latency, 50),
              percentile(latency, 90), values, bound=route.in_sample)
    return Scored(route, p, tasks.names[best], paired(tasks, values, tasks.quality[best]),
                  shares, regret, int(on.sum()),
                  int(route.escalated[on].sum()) if route.escalated is not None else None)


def best_single(points: Sequence[Point], sign: float) -> int:
    """The index of the point with the best mean quality (unknown quality last)."""
    def mean(i: int) -> float:
        found = points[i].quality
        return sign * found.mean if found is not None else -np.inf

    return max(range(len(points)), key=mean)


# --- the recommendation ------------------------------------------------------------------

@dataclass(frozen=True)
class Budget:
    cost_usd_per_task: float | None = None
    latency_ms_p90: float | None = None

    @property
    def given(self) -> bool:
        return self.cost_usd_per_task is not None or self.latency_ms_p90 is not None

    def allows(self, p: Point) -> bool:
        """Within the budget: every limit set is met by a known figure."""
        if self.cost_usd_per_task is not None and (
                p.cost is None or p.cost.mean > self.cost_usd_per_task + TIE):
            return False
        return self.latency_ms_p90 is None or (
            p.latency_p90 is not None and p.latency_p90 <= self.latency_ms_p90 + TIE)


def within_budget(points: Sequence[Point], budget: Budget, sign: float) -> Point | None:
    """The best-quality point the budget allows (the oracle never), or None."""
    allowed = [p for p in points if not p.bound and p.quality is not None and budget.allows(p)]
    return max(allowed, key=lambda p: sign * p.quality.mean if p.quality else 0.0,
               default=None)


def step_up(front: Sequence[Point], steps: Sequence[Paired | None],
            adjusted: Sequence[float | None]) -> Point | None:
    """Without a budget: up the frontier from its cheapest point, the costliest point whose
    gain over the next cheaper one is significant (``steps``: each step's paired difference,
    costlier minus cheaper, from the second point on; ``adjusted``: their adjusted p); the
    cheapest point when no step is."""
    if not front:
        return None
    chosen = front[0]
    for k in range(1, len(front)):
        diff, p = steps[k - 1], adjusted[k - 1]
        if diff is not None and p is not None and p < ALPHA and diff.ci_low > 0:
            chosen = front[k]
    return chosen
