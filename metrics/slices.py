"""Where each system wins: a paired comparison sliced by a document feature, and whether
the difference depends on the feature at all.

* ``numeric_bins``: quartiles (``bins``) of the feature over the compared tasks, or explicit
  ``edges``; each bin holds ``lo <= x < hi``, the last one ``lo <= x <= hi``.
* ``categorical_bins``: one bin per value; values held by fewer than ``MIN_SLICE`` tasks
  are merged into ``other`` (a slice of five could never reach p < 0.05).
* ``slice_difference``: the pair's ``metrics.stats.paired_difference`` on a slice's tasks
  (the bootstrap CI, the Wilcoxon p; "too few" below ``MIN_UNTIED`` untied pairs; tasks
  sharing a document resampled and tested together).
* ``interaction``: does the paired difference depend on the feature? Numeric: a
  permutation test of Spearman's rank correlation between the feature and the difference
  (rank-based, so no assumption on the shape of the dependence or on the feature's scale,
  and exact in its null: the feature says nothing about the difference); categorical:
  Kruskal-Wallis across the values (the rank analogue of a one-way ANOVA). Where tasks
  share a document, both are made on each document's mean difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics.stats import MIN_UNTIED, Paired, cluster_means, paired_difference

MIN_SLICE = 6  # tasks a categorical value needs to be its own slice (else: "other")
OTHER = "other"
PERMUTATIONS = 2000


@dataclass(frozen=True)
class Bin:
    """One slice of a feature: its label, its numeric range (None: categorical, or open on
    that side), and the task ids in it."""

    label: str
    ids: list[str]
    lo: float | None = None
    hi: float | None = None


def is_numeric(values: Mapping[str, Any]) -> bool:
    """A feature is numeric when every known value is a number (not a bool)."""
    return bool(values) and all(isinstance(v, int | float) and not isinstance(v, bool)
                                for v in values.values())


def quantile_edges(values: Sequence[float], bins: int) -> list[float]:
    """The inner edges of ``bins`` quantile bins (repeated quantiles merged)."""
    inner = np.quantile(np.asarray(values, dtype=float), np.linspace(0, 1, bins + 1)[1:-1])
    return sorted({float(e) for e in inner})


def numeric_bins(values: Mapping[str, float], bins: int = 4,
                 edges: Sequence[float] | None = None) -> list[Bin]:
    """Tasks by bin of ``values`` (task id -> value): quantile bins, or between explicit
    inner ``edges``; empty bins are dropped."""
    inner = list(edges) if edges else quantile_edges(list(values.values()), bins)
    low, high = min(values.values()), max(values.values())
    bounds = [low, *[e for e in inner if low < e <= high], high]
    out = []
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        last = i == len(bounds) - 2
        ids = [t for t, v in values.items() if lo <= v < hi or (last and v == hi)]
        if ids:
            out.append(Bin(f"[{_number(lo)}, {_number(hi)}{']' if last else ')'}", ids, lo, hi))
    return out


def _number(x: float) -> str:
    """A bin edge as people read it: 10,340 tokens, 0.25 of the way."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def categorical_bins(values: Mapping[str, Any]) -> list[Bin]:
    """Tasks by value; values held by fewer than ``MIN_SLICE`` tasks merged into ``other``."""
    groups: dict[str, list[str]] = {}
    for task, value in values.items():
        groups.setdefault(str(value), []).append(task)
    kept = {v: ids for v, ids in groups.items() if len(ids) >= MIN_SLICE}
    rest = [t for v, ids in groups.items() if v not in kept for t in ids]
    return [Bin(v, ids) for v, ids in sorted(kept.items())] + ([Bin(OTHER, rest)] if rest else [])


def feature_bins(values: Mapping[str, Any], bins: int = 4,
                 edges: Sequence[float] | None = None) -> list[Bin]:
    return numeric_bins(values, bins, edges) if is_numeric(values) else categorical_bins(values)


@dataclass(frozen=True)
class Slice:
    """A pair's comparison on one bin."""

    bin: Bin
    n: int
    mean_a: float
    mean_b: float
    paired: Paired | None  # None: fewer than two tasks

    @property
    def too_few(self) -> bool:
        return self.paired is None or self.paired.p is None


def slice_difference(bin_: Bin, a: Mapping[str, float], b: Mapping[str, float],
                     clusters: Mapping[str, Any] | None = None) -> Slice | None:
    """``a`` against ``b`` (task id -> score) on the bin's tasks both have; None when none."""
    ids = [t for t in bin_.ids if t in a and t in b]
    if not ids:
        return None
    first, second = [a[t] for t in ids], [b[t] for t in ids]
    groups = [clusters[t] for t in ids] if clusters is not None else None
    return Slice(bin_, len(ids), float(np.mean(first)), float(np.mean(second)),
                 paired_difference(first, second, clusters=groups))


@dataclass(frozen=True)
class Interaction:
    """Whether a paired difference depends on a feature."""

    test: str  # "spearman permutation" | "kruskal-wallis"
    n: int  # tasks (or documents, where tasks share them) the test was made on
    statistic: float  # Spearman's rho, or the H statistic
    p: float
    floor: float | None = None  # the smallest p the test can give (a permutation's 1/(B+1))


def _by_cluster(features: np.ndarray, diffs: np.ndarray, clusters: Sequence[Any] | None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per document cluster where tasks share one: its mean difference and its tasks'
    (first) feature value; per task otherwise."""
    if clusters is None or len(set(clusters)) == len(diffs):
        return features, diffs
    _, groups = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    first: dict[int, int] = {}
    for i, g in enumerate(groups):
        first.setdefault(int(g), i)
    return features[[first[g] for g in range(len(first))]], cluster_means(diffs, groups)


def spearman_permutation(feature: Sequence[float], diffs: Sequence[float],
                         clusters: Sequence[Any] | None = None,
                         permutations: int = PERMUTATIONS, seed: int = 0) -> Interaction | None:
    """Spearman's rho of the feature and the paired difference, and the two-sided
    permutation p ((1 + permuted |rho| >= observed) / (1 + permutations)); None below
    ``MIN_UNTIED`` tasks or when either side never varies."""
    from scipy.stats import rankdata

    x, y = _by_cluster(np.asarray(feature, dtype=float), np.asarray(diffs, dtype=float),
                       clusters)
    if len(x) < MIN_UNTIED or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    rx, ry = rankdata(x), rankdata(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    scale = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    rho = float((rx * ry).sum() / scale)
    rng = np.random.default_rng(seed)
    shuffled = np.argsort(rng.random((permutations, len(ry))), axis=1)
    null = (ry[shuffled] @ rx) / scale
    p = (1 + int(np.sum(np.abs(null) >= abs(rho) - 1e-12))) / (1 + permutations)
    return Interaction("spearman permutation", len(x), rho, float(p), 1 / (1 + permutations))


def kruskal_wallis(groups: Sequence[str], diffs: Sequence[float],
                   clusters: Sequence[Any] | None = None) -> Interaction | None:
    """Kruskal-Wallis H across the feature's values; None with fewer than two values or
    ``MIN_UNTIED`` tasks, or when every difference is the same."""
    from scipy.stats import kruskal

    labels = np.asarray([str(g) for g in groups])
    _, codes = np.unique(labels, return_inverse=True)
    x, y = _by_cluster(codes.astype(float), np.asarray(diffs, dtype=float), clusters)
    samples = [y[x == v] for v in np.unique(x)]
    if len(samples) < 2 or len(y) < MIN_UNTIED or np.ptp(y) == 0:
        return None
    result = kruskal(*samples)
    return Interaction("kruskal-wallis", len(y), float(result.statistic), float(result.pvalue))


def interaction(values: Mapping[str, Any], diffs: Mapping[str, float],
                clusters: Mapping[str, Any] | None = None) -> Interaction | None:
    """The interaction test of a feature (task id -> value) and a pair's differences (task
    id -> a minus b), on the tasks that have both, chosen by the feature's kind."""
    ids = [t for t in diffs if t in values]
    groups = [clusters[t] for t in ids] if clusters is not None else None
    if is_numeric({t: values[t] for t in ids}):
        return spearman_permutation([values[t] for t in ids], [diffs[t] for t in ids], groups)
    merged = {t: b.label for b in categorical_bins({t: values[t] for t in ids}) for t in b.ids}
    return kruskal_wallis([merged[t] for t in ids], [diffs[t] for t in ids], groups)


def crossover(slices: Sequence[Slice], advantage_sign: float = 1.0) -> float | None:
    """Where the lead changes hands along a numeric feature: the lower edge of the first
    bin whose mean difference (turned by ``advantage_sign``) has the other sign from the
    first bin's; None when it never does."""
    signs = [np.sign(advantage_sign * (s.mean_a - s.mean_b)) for s in slices]
    for s, sign in zip(slices[1:], signs[1:], strict=False):
        if sign != 0 and signs[0] != 0 and sign != signs[0]:
            return s.bin.lo
    return None
