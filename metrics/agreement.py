"""Agreement between two raters of the same items (a judge and a person, or two people):
Cohen's kappa (Cohen 1960), quadratic-weighted for ordinal 1-5 scores (Cohen 1968), with a
bootstrap CI over items.
Spearman's rho is ``metrics.stats.correlation`` and balanced accuracy
``metrics.meta_eval.balanced_accuracy_ci``; this module adds only kappa."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from metrics.aggregate import BOOTSTRAP_SAMPLES


@dataclass(frozen=True)
class Kappa:
    value: float
    ci_low: float | None  # percentile bootstrap 95% CI over items (None: undefined)
    ci_high: float | None
    n: int


def _kappas(x: np.ndarray, y: np.ndarray, k: int, weights: str | None) -> np.ndarray:
    """Kappa of each row pair of category indices (0..k-1); NaN where undefined. By hand,
    vectorised, so a bootstrap takes milliseconds (scikit-learn's ``cohen_kappa_score``
    takes seconds for 1,000 resamples; the tests check the two agree)."""
    rows, n = x.shape
    flat = (x * k + y) + (np.arange(rows) * k * k)[:, None]
    observed = np.bincount(flat.ravel(), minlength=rows * k * k).reshape(rows, k, k) / n
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :]
    i, j = np.indices((k, k))
    w = (i - j) ** 2 / max(k - 1, 1) ** 2 if weights == "quadratic" else (i != j) * 1.0
    chance = (w * expected).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1 - (w * observed).sum(axis=(1, 2)) / chance


def kappa(a: Sequence[int], b: Sequence[int], weights: str | None = None,
          scale: Sequence[int] = (), seed: int = 0) -> Kappa | None:
    """Cohen's kappa of paired ratings (``weights="quadratic"``: the weighted kappa for
    ordinal scores, whose distances are counted on ``scale``, e.g. 1-5, so a scale point no
    one used still counts) with a 95% percentile-bootstrap CI over items; None when
    undefined (both raters gave one and the same value throughout). A resample where kappa
    is undefined is skipped; with fewer than half defined, no CI."""
    used = set(a) | set(b)
    if len(used) < 2 or not len(a):
        return None
    values = sorted(used | set(scale))
    index = {v: i for i, v in enumerate(values)}
    x, y = np.array([index[v] for v in a]), np.array([index[v] for v in b])
    value = float(_kappas(x[None], y[None], len(values), weights)[0])
    if not math.isfinite(value):
        return None
    pick = np.random.default_rng(seed).integers(0, len(x), (BOOTSTRAP_SAMPLES, len(x)))
    boots = _kappas(x[pick], y[pick], len(values), weights)
    boots = boots[np.isfinite(boots)]
    if len(boots) < BOOTSTRAP_SAMPLES // 2:
        return Kappa(value, None, None, len(x))
    low, high = np.percentile(boots, [2.5, 97.5])
    return Kappa(value, float(low), float(high), len(x))
