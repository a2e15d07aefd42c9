"""Prediction-powered inference (PPI++) of a mean: a judge's scores on every task, corrected
by people's labels on a few of them (Angelopoulos, Duchi & Zrnic, "PPI++: Efficient
Prediction-Powered Inference", arXiv 2311.01453; the estimator of ``ppi_py.ppi_mean_ci``).

With labels ``Y`` and the judge's scores ``Yhat`` on the n labelled tasks, and the judge's
scores ``Yhat_u`` on the N unlabelled ones, the estimate is

    theta = lam * mean(Yhat_u) + mean(Y - lam * Yhat)

with the power-tuning weight ``lam = cov(Y, Yhat) / ((1 + n/N) var(Yhat, Yhat_u))`` clipped to
[0, 1] (``lam = 1`` is plain PPI, ``lam = 0`` the people's mean alone), and the normal CI
``theta +- z * sqrt(var(lam * Yhat_u) / N + var(Y - lam * Yhat) / n)``. Its CI so includes the
judge's own error. The same numbers as ``ppi-python`` 0.2.3, written here because that
package requires numba and gdown to import, for 20 lines of numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

MIN_LABELS = 2  # a variance needs two


@dataclass(frozen=True)
class PPIEstimate:
    mean: float
    ci_low: float
    ci_high: float
    lam: float  # the power-tuning weight given to the judge's scores
    labelled: int  # n
    unlabelled: int  # N

    @property
    def width(self) -> float:
        return self.ci_high - self.ci_low


def power_tuning(labels: np.ndarray, judged: np.ndarray, unlabelled: np.ndarray) -> float:
    """The weight on the judge that minimises the estimate's variance (PPI++ eq. for a mean;
    ``ppi_py.ppi._calc_lam_glm`` with an identity Hessian), clipped to [0, 1]."""
    n, big_n = len(labels), len(unlabelled)
    covariance = float(np.mean((labels - labels.mean()) * (judged - judged.mean())))
    variance = float(np.var(np.concatenate([judged, unlabelled]), ddof=1))
    if variance == 0:
        return 0.0  # a judge that gives one score throughout says nothing
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0, 1))


def ppi_mean(labels: Sequence[float], judged: Sequence[float], unlabelled: Sequence[float],
             alpha: float = 0.05, lam: float | None = None) -> PPIEstimate | None:
    """The PPI++ mean and its ``1 - alpha`` CI; None with fewer than ``MIN_LABELS`` labels or
    no unlabelled task (nothing to correct or nothing to learn the correction from)."""
    y, yhat, yhat_u = (np.asarray(v, dtype=float) for v in (labels, judged, unlabelled))
    if len(y) != len(yhat):
        raise ValueError(f"{len(y)} labels against {len(yhat)} judged scores of the same tasks")
    if len(y) < MIN_LABELS or len(yhat_u) == 0:
        return None
    if lam is None:
        lam = power_tuning(y, yhat, yhat_u)
    mean = float(lam * yhat_u.mean() + (y - lam * yhat).mean())
    se = float(np.sqrt(np.var(lam * yhat_u) / len(yhat_u) + np.var(y - lam * yhat) / len(y)))
    z = float(norm.ppf(1 - alpha / 2))
    return PPIEstimate(mean, mean - z * se, mean + z * se, lam, len(y), len(yhat_u))


def width_without_labels(judged: Sequence[float], n: int, alpha: float = 0.05) -> float | None:
    """The CI width to expect from ``n`` labels before any is given: people's labels alone
    (PPI++ at ``lam = 0``), their spread assumed the judge's; power tuning only narrows it
    (asymptotically), by as much as the judge agrees with people. None: the judge gave one
    score throughout (or fewer than two)."""
    spread = float(np.std(np.asarray(judged, dtype=float), ddof=1)) if len(judged) > 1 else 0.0
    if spread == 0 or n < 1:
        return None  # one score throughout: nothing says how people's scores spread
    return 2 * float(norm.ppf(1 - alpha / 2)) * spread / float(np.sqrt(n))
