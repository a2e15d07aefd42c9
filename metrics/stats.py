"""The statistics a verdict rests on: paired differences, power, and judge agreement.

* ``paired_difference``: two systems' scores on the same tasks. Mean difference with a
  paired bootstrap 95% CI, and a two-sided Wilcoxon signed-rank test on the pairs that
  are not tied (ties carry no sign; scipy's default drops them, and ``n_untied`` says how
  many are left). Below ``MIN_UNTIED`` untied pairs no p-value is given: with 5 pairs the
  smallest two-sided exact p is 2/32 = 0.0625, so the test could never reject at 0.05.
  A difference is significant only when the test rejects at 0.05 *and* the CI excludes 0.
* ``min_detectable_difference`` / ``tasks_needed`` / ``rule_power``: power of the rule the
  verdict applies (Holm-adjusted Wilcoxon p below 0.05 and a bootstrap CI excluding 0, at
  least ``MIN_UNTIED`` untied pairs), simulated from a comparison's observed differences,
  since no formula fits that rule: the smallest true mean difference it declares with 80%
  power, and how many tasks would declare a given one.
* Tasks that share a document (FinanceBench's questions on one filing, comparison tasks)
  are not independent: given ``clusters`` (``document_clusters``: tasks joined by any
  document they share), the bootstrap resamples whole clusters and the Wilcoxon test is
  made on each cluster's mean difference, so n is the number of documents. Where every
  task has its own document, both are exactly the per-task ones.
* ``holm``: Holm's step-down adjustment of a family of p-values (every metric and pair a
  verdict or a baseline comparison tests), so testing more comparisons does not make a
  chance difference look significant; untestable comparisons (None) are left out of the
  family and stay None.
* ``correlation``: Spearman's rank correlation of two per-task quantities (e.g. an agent's
  loops and its retrieval recall) with a percentile bootstrap CI over the tasks.
* ``sign_test``: whether one per-task count is above another (two-sided binomial on the
  tasks where they differ): the attribution report names a main failure cause only when it
  leads by it at ``ALPHA``.
* ``p_text``: a p-value as stated; a permutation p at its floor 1/(B+1) is a bound
  ("p ≤ 0.0005"). ``difference_quantity``: which mean a pair's power figures are of (the
  mean of document means where tasks share documents).
* ``agreement``: Krippendorff's alpha between judges (``krippendorff`` package; ordinal by
  default: the 1-5 scale is ordered but its steps need not be equal) with a percentile
  bootstrap CI over the items.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_UNTIED = 6
ALPHA = 0.05
POWER = 0.8
BOOTSTRAP_SAMPLES = 2000


@dataclass(frozen=True)
class Paired:
    """First minus second, over tasks both scored."""

    n: int  # pairs
    n_untied: int  # pairs whose difference is not 0: what the Wilcoxon test uses
    mean_diff: float
    sd_diff: float  # sample SD of the differences (ddof=1)
    ci_low: float
    ci_high: float
    p: float | None  # None: fewer than MIN_UNTIED untied pairs, too few to test
    wins: int
    losses: int
    ties: int
    # documents the tasks read, when some share one: the CI resampled them and the test was
    # made on their mean differences (n_untied then counts documents); None: one per task
    n_clusters: int | None = None

    @property
    def testable(self) -> bool:
        return self.p is not None

    @property
    def ci_includes_zero(self) -> bool:
        return self.ci_low <= 0.0 <= self.ci_high

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < ALPHA and not self.ci_includes_zero

    def p_text(self) -> str:
        if self.p is None:
            return f"too few to test ({self.n_untied} untied pairs < {MIN_UNTIED})"
        return f"{self.p:.3g}"

    def verdict(self) -> str:
        if self.significant:
            return "significant"
        if not self.testable:
            return "too few to test"
        return "no significant difference"


def paired_difference(first: Sequence[float], second: Sequence[float], seed: int = 0,
                      clusters: Sequence[Any] | None = None) -> Paired | None:
    """The paired comparison of two equally long score lists (same task at each index);
    None for fewer than two pairs. ``clusters``: each task's document cluster
    (``document_clusters``); tasks sharing one are resampled and tested together."""
    from scipy.stats import wilcoxon

    diff = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    if len(diff) < 2:
        return None
    groups = _groups(clusters, len(diff))
    tested = diff if groups is None else cluster_means(diff, groups)
    low, high = np.percentile(resampled_means(diff, groups, seed), [2.5, 97.5])
    untied = int(np.count_nonzero(tested))
    p = float(wilcoxon(tested).pvalue) if untied >= MIN_UNTIED else None
    task_ties = len(diff) - int(np.count_nonzero(diff))
    return Paired(n=len(diff), n_untied=untied, mean_diff=float(diff.mean()),
                  sd_diff=float(diff.std(ddof=1)), ci_low=float(low), ci_high=float(high), p=p,
                  wins=int((diff > 0).sum()), losses=int((diff < 0).sum()), ties=task_ties,
                  n_clusters=None if groups is None else int(groups.max()) + 1)


def document_clusters(doc_ids: Sequence[Sequence[str]]) -> list[int]:
    """Each task's cluster: tasks that read a common document, directly or through other
    tasks, share one (a comparison task joins its two filings' questions)."""
    parent: dict[str, str] = {}

    def root(d: str) -> str:
        while parent.setdefault(d, d) != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    for docs in doc_ids:
        for d in docs[1:]:
            parent[root(d)] = root(docs[0])
    numbers: dict[str, int] = {}
    return [numbers.setdefault(root(docs[0]) if docs else f"\0{i}", len(numbers))
            for i, docs in enumerate(doc_ids)]


def clusters_of(doc_ids: Sequence[Sequence[str] | None]) -> list[int] | None:
    """``document_clusters`` of tasks as records give their ``doc_ids``; None where one
    does not say (records written before they carried them): tasks then count alone."""
    if any(not docs for docs in doc_ids):
        return None
    return document_clusters([list(docs or []) for docs in doc_ids])


def _groups(clusters: Sequence[Any] | None, n: int) -> np.ndarray | None:
    """Cluster numbers 0..m-1 of ``n`` tasks; None when no two tasks share one (nothing
    changes then)."""
    if clusters is None:
        return None
    if len(clusters) != n:
        raise ValueError(f"{len(clusters)} clusters given for {n} tasks")
    _, groups = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    return groups if groups.max() + 1 < n else None


def cluster_means(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The mean of ``values`` within each cluster, in cluster-number order."""
    return np.bincount(groups, weights=values) / np.bincount(groups)


def resampled_means(values: Sequence[float], clusters: Sequence[Any] | np.ndarray | None = None,
                    seed: int = 0, samples: int = BOOTSTRAP_SAMPLES) -> np.ndarray:
    """``samples`` bootstrap means of ``values``: tasks resampled, or whole clusters when
    tasks share one (each resample's mean over the tasks of the clusters drawn)."""
    data = np.asarray(values, dtype=float)
    groups = clusters if isinstance(clusters, np.ndarray) or clusters is None \
        else _groups(clusters, len(data))
    if groups is None:
        # the same draws as ``bootstrap_indices``: the per-task CI is what it always was
        idx = np.random.default_rng(seed).integers(0, len(data), size=(samples, len(data)))
        return data[idx].mean(axis=1)
    m = int(groups.max()) + 1
    sums, sizes = np.bincount(groups, weights=data, minlength=m), np.bincount(groups, minlength=m)
    drawn = _counts(np.random.default_rng(seed).integers(0, m, size=(samples, m)), m)
    return (drawn @ sums) / (drawn @ sizes)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values in the order given (each at most 1, never below its raw p)."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[i] = running
    return adjusted


# --- power of the verdict's own rule, simulated -------------------------------------------

SIMULATIONS = 1000  # simulated comparisons per power figure: SE of 0.8 is about 0.013
TASKS_CAP = 100_000  # tasks needed beyond this are said as "more than"
EXACT_MAX = 50  # scipy's wilcoxon may be exact (or a permutation test) up to this many pairs
PERMUTATION_MAX = 13  # with ties or zeros up to this many pairs, scipy enumerates sign flips


@dataclass(frozen=True)
class PowerFigure:
    """A minimum detectable difference or a number of tasks; None with the reason when it
    cannot be computed (or, for tasks, lies beyond ``TASKS_CAP``)."""

    value: float | None
    why: str = ""
    defined: bool = True  # False: no power at all (every difference 0, or no spread)


def bootstrap_indices(n: int, seed: int = 0) -> np.ndarray:
    """The task indices of the paired bootstrap (``BOOTSTRAP_SAMPLES`` x ``n``): the same for
    every comparison of ``n`` tasks, so a simulation of the rule resamples as it does."""
    return np.random.default_rng(seed).integers(0, n, size=(BOOTSTRAP_SAMPLES, n))


def _oriented(differences: Sequence[float]) -> tuple[np.ndarray, np.ndarray, str]:
    """The differences turned so their mean is >= 0, the untied ones centred on 0 (ties stay
    exact ties), and a mask of the untied; a reason instead when no power is defined."""
    diff = np.asarray(differences, dtype=float)
    diff = diff if diff.mean() >= 0 else -diff
    untied = diff != 0
    if len(diff) < 2:
        return diff, untied, "fewer than 2 paired tasks"
    if not untied.any():
        return diff, untied, "every paired difference is 0 (the runs tie on every task)"
    if np.ptp(diff[untied]) == 0:
        return diff, untied, "the untied paired differences have no spread"
    centred = np.where(untied, diff - diff[untied].mean(), 0.0)
    return centred, untied, ""


@functools.lru_cache(maxsize=64)
def _signed_rank_cdf(n: int) -> tuple[np.ndarray, np.ndarray]:
    """P(T <= w) and P(T >= w) of the signed-rank statistic of ``n`` untied pairs."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    pmf = counts / counts.sum()
    return np.cumsum(pmf), np.cumsum(pmf[::-1])[::-1]


_Ranks = tuple[np.ndarray, np.ndarray, np.ndarray]  # average rank, size, group of each task


class _Simulation:
    """``SIMULATIONS`` comparisons of ``n`` tasks drawn with replacement from the observed
    ones, drawn once (common random numbers): the power at any shift reuses them."""

    def __init__(self, base: np.ndarray, untied: np.ndarray, n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.base, self.untied, self.n = base, untied, n
        # a shift of delta moves each untied difference by delta / (share untied), so the
        # mean over all tasks moves by delta while ties stay ties
        self.spread = len(base) / untied.sum()
        if n <= EXACT_MAX:
            self.idx = rng.integers(0, len(base), size=(SIMULATIONS, n))
            self.counts = _counts(self.idx, len(base))
            boot = _counts(bootstrap_indices(n), n).T / n  # n x BOOTSTRAP_SAMPLES
            self.boot_base = base[self.idx] @ boot
            self.boot_shift = untied[self.idx].astype(float) @ boot
            # without ties every bootstrap mean moves with the shift: one percentile serves
            self.low_at_0 = np.percentile(self.boot_base, 2.5, axis=1) if untied.all() else None
        else:
            self.counts = rng.multinomial(n, np.full(len(base), 1 / len(base)),
                                          size=SIMULATIONS).astype(float)
            # sums of base^j and of base^j over the untied: each shift's moments from them
            self.sums = self.counts @ np.stack([base, base**2, base**3, 1.0 * untied,
                                                base * untied, base**2 * untied], axis=1)

    def power(self, delta: float, threshold: float) -> float:
        """Share of the simulated comparisons on which the rule declares a difference in
        the observed direction when the true mean difference is ``delta`` (>= 0)."""
        values = self.base + delta * self.spread * self.untied
        w, k, ranks = _signed_rank(self.counts, values)
        p = self._p_values(w, k, ranks, values)
        return float(np.mean((k >= MIN_UNTIED) & (p < threshold) & (self._ci_low(delta) > 0)))

    def _ci_low(self, delta: float) -> np.ndarray:
        shift = delta * self.spread
        if self.n <= EXACT_MAX:  # the verdict's own percentile bootstrap
            if self.low_at_0 is not None:
                return self.low_at_0 + shift
            return np.percentile(self.boot_base + shift * self.boot_shift, 2.5, axis=1)
        # above EXACT_MAX: the bootstrap's limit, the normal quantile of the mean with
        # Cornish-Fisher's skewness term (the 2,000-resample percentile scatters more)
        b1, b2, b3, u0, u1, u2 = (self.sums / self.n).T
        m1 = b1 + shift * u0
        m2 = b2 + 2 * shift * u1 + shift**2 * u0
        m3 = b3 + 3 * shift * u2 + 3 * shift**2 * u1 + shift**3 * u0
        var = np.maximum(m2 - m1**2, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            skew = np.nan_to_num((m3 - 3 * m1 * m2 + 2 * m1**3) / var**1.5)
        z = -1.959963984540054  # the normal's 2.5% quantile
        return m1 + np.sqrt(var / self.n) * (z + (z * z - 1) * skew / (6 * np.sqrt(self.n)))

    def _p_values(self, w: np.ndarray, k: np.ndarray, ranks: _Ranks, values: np.ndarray
                  ) -> np.ndarray:
        """scipy.stats.wilcoxon's default two-sided p of each simulated comparison, by its
        own choice of method: exact without ties or zeros up to 50 pairs, a sign-flip
        permutation test with them up to 13, the normal approximation otherwise."""
        if self.n <= PERMUTATION_MAX:  # exact too where scipy would use its exact table
            return _permutation_p(self.idx, ranks, w)
        size = ranks[1]
        p = _normal_p(w, k, (size * size * size - size).sum(axis=1))
        if self.n > EXACT_MAX:
            return p
        zero = self.counts[:, values == 0].sum(axis=1) > 0
        clean = ~zero & (size <= 1).all(axis=1)
        lower, upper = _signed_rank_cdf(self.n)
        wi = np.clip(np.rint(w).astype(int), 0, len(lower) - 1)
        exact = np.minimum(1.0, 2 * np.minimum(lower[wi], upper[wi]))
        return np.where(clean, exact, p)


def _counts(idx: np.ndarray, size: int) -> np.ndarray:
    """How often each of ``size`` items is drawn in each row of ``idx``."""
    rows = idx.shape[0]
    flat = (idx + size * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * size).reshape(rows, size).astype(float)


def _signed_rank(counts: np.ndarray, values: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, _Ranks]:
    """Each simulated comparison's positive rank sum and untied count (zeros dropped, as
    scipy's default does), and per group of equal |difference| its average rank, size and
    the group of each observed task (-1: a tie)."""
    nonzero = np.flatnonzero(values != 0)
    magnitude = np.abs(values[nonzero])
    order = np.argsort(magnitude, kind="stable")
    groups, starts, inverse = np.unique(magnitude[order], return_index=True,
                                        return_inverse=True)
    drawn = counts[:, nonzero[order]]
    positive = drawn * (values[nonzero[order]] > 0)
    size = drawn
    if len(groups) < len(order):  # equal magnitudes share one average rank
        size = np.add.reduceat(drawn, starts, axis=1)
        positive = np.add.reduceat(positive, starts, axis=1)
    rank = np.cumsum(size, axis=1) - (size - 1) / 2
    group_of = np.full(len(values), -1)
    group_of[nonzero[order]] = inverse
    return (positive * rank).sum(axis=1), size.sum(axis=1), (rank, size, group_of)


def _normal_p(w: np.ndarray, k: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """The two-sided p of the signed-rank statistic's normal approximation with scipy's tie
    correction and no continuity correction."""
    from scipy.stats import norm

    with np.errstate(invalid="ignore", divide="ignore"):
        z = (w - k * (k + 1) / 4) / np.sqrt((k * (k + 1) * (2 * k + 1) - tie / 2) / 24)
    return np.nan_to_num(2 * norm.sf(np.abs(z)), nan=1.0)


def _permutation_p(idx: np.ndarray, ranks: _Ranks, w: np.ndarray) -> np.ndarray:
    """The sign-flip permutation p scipy gives up to 13 pairs, from the exact distribution
    of the positive rank sum over all 2^n flips (average ranks are multiples of 1/2, so the
    distribution is built over twice the ranks, one pair at a time)."""
    rank, _, group_of = ranks
    groups = group_of[idx]
    doubled = np.where(groups >= 0, np.rint(2 * np.take_along_axis(
        rank, np.maximum(groups, 0), axis=1)), 0).astype(int)
    n = idx.shape[1]
    dist = np.zeros((len(idx), n * (n + 1) + 1))
    dist[:, 0] = 1.0
    columns = np.arange(dist.shape[1])
    row_start = (np.arange(len(idx)) * dist.shape[1])[:, None]
    for step in doubled.T:  # flipping a pair's sign adds its rank or not, each half the time
        source = columns[None, :] - step[:, None]
        shifted = dist.ravel()[row_start + np.maximum(source, 0)] * (source >= 0)
        dist = (dist + shifted) / 2
    at = np.rint(2 * w).astype(int)[:, None]
    lower = np.take_along_axis(np.cumsum(dist, axis=1), at, axis=1)[:, 0]
    upper = 1 - np.take_along_axis(np.cumsum(dist, axis=1), np.maximum(at - 1, 0),
                                   axis=1)[:, 0] * (at[:, 0] > 0)
    return np.minimum(1.0, 2 * np.minimum(lower, upper))


def rule_power(differences: Sequence[float], delta: float, comparisons: int = 1,
               n: int | None = None, alpha: float = ALPHA, seed: int = 0) -> float | None:
    """The verdict's rule's power at a true mean difference ``delta`` (in the direction of
    the observed one) over ``n`` tasks (default: as many as observed); None when no power
    is defined (see ``min_detectable_difference``)."""
    base, untied, why = _oriented(differences)
    if why:
        return None
    sim = _Simulation(base, untied, len(base) if n is None else n, seed)
    return sim.power(abs(delta), alpha / max(comparisons, 1))


def min_detectable_difference(differences: Sequence[float], comparisons: int = 1,
                              alpha: float = ALPHA, power: float = POWER, seed: int = 0
                              ) -> PowerFigure:
    """The smallest true mean difference the verdict's rule declares with ``power``, over
    as many tasks as ``differences`` (one comparison's paired differences, first minus
    second) and a Holm family of ``comparisons`` tests.

    The rule (``Paired.significant`` with the family's adjusted p): at least ``MIN_UNTIED``
    untied pairs, Wilcoxon p (scipy's default: zeros dropped) below the threshold, and the
    paired bootstrap 95% CI excluding 0 on the side of the difference. Holm's threshold for
    a single comparison is taken at its worst case, alpha / ``comparisons`` (the smallest
    p of the family is held to it; the others to no less), so the figure errs towards a
    larger difference. It is simulated, no formula fitting this rule: ``SIMULATIONS``
    comparisons of n tasks drawn with replacement from the observed differences, the untied
    ones centred on 0 and shifted so the mean over all tasks is delta; a tie (difference 0,
    e.g. equal ROUGE or equal 1-5 judge scores) stays a tie, as the test drops it. The
    same draws serve every delta, so power is monotone in delta and the bisection stable.
    The Wilcoxon p is scipy's own choice of method, vectorised; the CI is the verdict's
    own 2,000-resample percentile bootstrap up to 50 tasks and its normal limit with a
    skewness term above. About 0.3 s per comparison at n=500 on a shared 2-core machine
    (``tasks_needed``, when asked, several times that).
    """
    base, untied, why = _oriented(differences)
    if why:
        return PowerFigure(None, why, defined=False)
    if len(base) < MIN_UNTIED:
        return PowerFigure(None, f"over {len(base)} tasks the rule never tests (its test needs "
                                 f"{MIN_UNTIED} that differ)")
    threshold = alpha / max(comparisons, 1)
    sim = _Simulation(base, untied, len(base), seed)
    scale = float(np.abs(base).max())
    ceiling = sim.power(scale * 1e6, threshold)
    if ceiling < power:
        return PowerFigure(None, _unreachable(len(base), comparisons, alpha, ceiling, power))
    low, high = 0.0, scale / np.sqrt(len(base))
    while high < scale * 1e6 and sim.power(high, threshold) < power:
        low, high = high, high * 4
    while high - low > 5e-3 * high:
        mid = (low + high) / 2
        low, high = (low, mid) if sim.power(mid, threshold) >= power else (mid, high)
    return PowerFigure(float(high))


def _unreachable(n: int, comparisons: int, alpha: float, ceiling: float, power: float
                 ) -> str:
    family = f" and {comparisons} comparisons (p below {alpha}/{comparisons})" \
        if comparisons > 1 else ""
    return (f"over {n} tasks{family} the rule declares even a huge difference in only "
            f"{ceiling:.0%} of simulated comparisons, below {power:.0%}: too few tasks "
            f"differ for its test to reach p < {alpha / max(comparisons, 1):.3g}")


def tasks_needed(differences: Sequence[float], comparisons: int = 1, alpha: float = ALPHA,
                 power: float = POWER, seed: int = 0) -> PowerFigure:
    """How many tasks the verdict's rule needs to declare the observed mean difference with
    ``power`` (simulated as in ``min_detectable_difference``, n tasks drawn from the
    observed ones): a doubling search from the observed n, then bisection to within 1%;
    None with the reason without a difference, or beyond ``TASKS_CAP``."""
    base, untied, why = _oriented(differences)
    observed = abs(float(np.mean(differences))) if len(differences) else 0.0
    if why or observed == 0:
        return PowerFigure(None, why or "the observed difference is 0", defined=False)
    threshold = alpha / max(comparisons, 1)

    def enough(n: int) -> bool:
        return _Simulation(base, untied, n, seed).power(observed, threshold) >= power

    start = max(MIN_UNTIED, len(base))  # the search starts at the observed n
    low, high = (MIN_UNTIED - 1, start) if enough(start) else (start, min(2 * start, TASKS_CAP))
    while not enough(high):
        if high >= TASKS_CAP:
            return PowerFigure(None, f"more than {TASKS_CAP:,} tasks")
        low, high = high, min(high * 2, TASKS_CAP)
    while high - low > max(1, high // 100):  # "about N tasks": to 1%
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return PowerFigure(float(high))


@dataclass(frozen=True)
class Agreement:
    alpha: float
    ci_low: float | None
    ci_high: float | None
    n_items: int  # items at least two judges scored


def krippendorff_alpha(ratings: np.ndarray, level: str = "ordinal") -> float | None:
    """Alpha of a judges x items matrix (NaN: not scored); None when undefined (fewer than
    two items scored twice, or a single value throughout)."""
    import krippendorff

    paired = ratings[:, np.sum(~np.isnan(ratings), axis=0) >= 2]
    if paired.shape[1] < 2 or len(np.unique(paired[~np.isnan(paired)])) < 2:
        return None
    return float(krippendorff.alpha(reliability_data=paired,
                                    level_of_measurement=level))  # type: ignore[arg-type]


def agreement(ratings: np.ndarray, level: str = "ordinal", resamples: int = 1000,
              seed: int = 0) -> Agreement | None:
    """Krippendorff's alpha with a 95% percentile-bootstrap CI (items resampled)."""
    ratings = ratings[:, np.sum(~np.isnan(ratings), axis=0) >= 2]
    alpha = krippendorff_alpha(ratings, level)
    if alpha is None:
        return None
    rng = np.random.default_rng(seed)
    n = ratings.shape[1]
    boots = [krippendorff_alpha(ratings[:, rng.integers(0, n, size=n)], level)
             for _ in range(resamples)]
    kept = [b for b in boots if b is not None and math.isfinite(b)]
    if len(kept) < resamples // 2:  # mostly undefined resamples say nothing about spread
        return Agreement(alpha, None, None, n)
    low, high = np.percentile(kept, [2.5, 97.5])
    return Agreement(alpha, float(low), float(high), n)


@dataclass(frozen=True)
class Correlation:
    rho: float  # Spearman's rank correlation
    ci_low: float | None  # percentile bootstrap 95% CI over the pairs (None: undefined)
    ci_high: float | None
    n: int

    @property
    def ci_includes_zero(self) -> bool:
        return self.ci_low is None or self.ci_high is None or self.ci_low <= 0.0 <= self.ci_high


def correlation(x: Sequence[float], y: Sequence[float], seed: int = 0) -> Correlation | None:
    """Spearman's rho of paired values with a bootstrap CI; None below three pairs or when
    either side never varies (rho is undefined)."""
    from scipy.stats import rankdata

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    rho = float(_row_pearson(rankdata(a)[None], rankdata(b)[None])[0])
    idx = np.random.default_rng(seed).integers(0, len(a), size=(BOOTSTRAP_SAMPLES, len(a)))
    boots = _row_pearson(rankdata(a[idx], axis=1), rankdata(b[idx], axis=1))
    boots = boots[np.isfinite(boots)]  # a resample without spread has no rho
    if not len(boots):
        return Correlation(rho, None, None, len(a))
    low, high = np.percentile(boots, [2.5, 97.5])
    return Correlation(rho, float(low), float(high), len(a))


def _row_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r of each row pair (NaN where a row does not vary): of ranks, Spearman's."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))


def p_text(p: float, floor: float | None = None) -> str:
    """A p-value as a report states it: a permutation p at its floor (1/(B+1) for B
    permutations, ``floor``) is a bound, "p ≤ 0.0005", never "p = 0.0005"."""
    if floor is not None and p <= floor * (1 + 1e-9):
        return f"p ≤ {floor:.2g}"
    return f"p = {p:.3g}"


def difference_quantity(n_clusters: int | None) -> str:
    """Which mean a pair's power figures (``min_detectable_difference``, ``tasks_needed``)
    are computed on, so a sentence can name it: where tasks share documents
    (``Paired.n_clusters``) the differences handed to them are each document's mean, so the
    figures are of the mean of document means, not of the mean over tasks beside them."""
    return "mean of document means" if n_clusters else "mean over tasks"


@dataclass(frozen=True)
class SignTest:
    """Whether one count is above another task by task: the two-sided sign test on the tasks
    where they differ (binomial, p = 0.5; tied tasks carry no sign)."""

    first: int  # the first count over all tasks
    second: int
    more: int  # tasks where the first count is the larger
    fewer: int  # tasks where it is the smaller
    ties: int
    p: float | None  # None: no task where the counts differ

    @property
    def leader(self) -> int | None:
        """0: the first leads, 1: the second, None: neither at ``ALPHA`` (nor with no test)."""
        if self.p is None or self.p >= ALPHA or self.more == self.fewer:
            return None
        return 0 if self.more > self.fewer else 1


def sign_test(first: Sequence[int], second: Sequence[int]) -> SignTest:
    """The sign test of two per-task counts (same task at each index)."""
    from scipy.stats import binomtest

    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    more, fewer = int((a > b).sum()), int((a < b).sum())
    p = float(binomtest(more, more + fewer, 0.5).pvalue) if more + fewer else None
    return SignTest(int(a.sum()), int(b.sum()), more, fewer, len(a) - more - fewer, p)
