"""The statistics a verdict rests on: paired differences, power, and judge agreement.

* ``paired_difference``: two systems' scores on the same tasks. Mean difference with a
  paired bootstrap 95% CI, and a two-sided Wilcoxon signed-rank test on the pairs that
  are not tied (ties carry no sign; scipy's default drops them, and ``n_untied`` says how
  many are left). Below ``MIN_UNTIED`` untied pairs no p-value is given: with 5 pairs the
  smallest two-sided exact p is 2/32 = 0.0625, so the test could never reject at 0.05.
  A difference is significant only when the test rejects at 0.05 *and* the CI excludes 0.
* ``min_detectable_difference`` / ``tasks_needed``: power of the two-sided paired t-test
  (the normal-theory approximation of the comparison above) from the noncentral t
  distribution, as statsmodels' ``TTestPower`` computes it: the smallest mean difference
  detectable with 80% power at 5% significance given the pairs' SD and n, and how many
  tasks would detect a given difference.
* ``holm``: Holm's step-down adjustment of a family of p-values (every metric and pair a
  verdict or a baseline comparison tests), so testing more comparisons does not make a
  chance difference look significant; untestable comparisons (None) are left out of the
  family and stay None.
* ``correlation``: Spearman's rank correlation of two per-task quantities (e.g. an agent's
  loops and its retrieval recall) with a percentile bootstrap CI over the tasks.
* ``agreement``: Krippendorff's alpha between judges (``krippendorff`` package; ordinal by
  default: the 1-5 scale is ordered but its steps need not be equal) with a percentile
  bootstrap CI over the items.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

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


def paired_difference(first: Sequence[float], second: Sequence[float], seed: int = 0
                      ) -> Paired | None:
    """The paired comparison of two equally long score lists (same task at each index);
    None for fewer than two pairs."""
    from scipy.stats import wilcoxon

    diff = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    if len(diff) < 2:
        return None
    rng = np.random.default_rng(seed)
    boots = diff[rng.integers(0, len(diff), size=(BOOTSTRAP_SAMPLES, len(diff)))].mean(axis=1)
    low, high = np.percentile(boots, [2.5, 97.5])
    untied = int(np.count_nonzero(diff))
    p = float(wilcoxon(diff).pvalue) if untied >= MIN_UNTIED else None
    return Paired(n=len(diff), n_untied=untied, mean_diff=float(diff.mean()),
                  sd_diff=float(diff.std(ddof=1)), ci_low=float(low), ci_high=float(high), p=p,
                  wins=int((diff > 0).sum()), losses=int((diff < 0).sum()),
                  ties=len(diff) - untied)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values in the order given (each at most 1, never below its raw p)."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[i] = running
    return adjusted


def paired_t_power(effect_size: float, n: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided one-sample (paired) t-test for a standardized effect."""
    from scipy.stats import nct, norm, t

    df = n - 1
    crit = t.isf(alpha / 2, df)
    nc = effect_size * math.sqrt(n)
    power = float(nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc))
    if math.isfinite(power):
        return power
    # far in the tail scipy's noncentral t gives NaN; there t is normal to many digits
    return float(norm.sf(crit - nc) + norm.cdf(-crit - nc))


def min_detectable_difference(sd: float, n: int, alpha: float = ALPHA, power: float = POWER
                              ) -> float | None:
    """The smallest true mean difference the paired test detects with ``power`` at
    ``alpha`` over ``n`` tasks whose differences have SD ``sd``; None when it cannot be
    computed (fewer than 2 tasks, or no spread)."""
    from scipy.optimize import brentq

    if n < 2 or not sd > 0:
        return None
    effect = brentq(lambda d: paired_t_power(d, n, alpha) - power, 1e-9, 1e3)
    return float(effect * sd)


def tasks_needed(difference: float, sd: float, alpha: float = ALPHA, power: float = POWER
                 ) -> float | None:
    """How many tasks the paired test needs to detect ``difference`` with ``power`` at
    ``alpha`` (fractional, as statsmodels solves it; round up to plan); None without a
    difference or spread to work from."""
    from scipy.optimize import brentq

    if not sd > 0 or difference == 0:
        return None
    effect = abs(difference) / sd
    if paired_t_power(effect, 1e7, alpha) < power:
        return None
    return float(brentq(lambda n: paired_t_power(effect, n, alpha) - power, 2.0, 1e7))


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
