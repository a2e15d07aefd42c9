"""Run-level aggregates from per-task eval records.

For every numeric per-task field: ``<field>_mean`` over tasks that have a value (nulls are
not zeros). Quality scores also get a bootstrap 95% confidence interval
(``_ci_low``/``_ci_high``, 1,000 resamples, fixed seed); G-Eval scores the share of tasks
scoring 4 or more (``_share_ge4``). Plus latency percentiles, cost totals, counts, judge
parse failures, error-taxonomy rates and cost per coverage point.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

QUALITY_PREFIXES = ("rouge", "bertscore", "geval_", "retrieval_", "numeric_", "recall_at",
                    "mrr_at", "ndcg_at", "hit_", "qa_")
NOT_AVERAGED = ("started_at",)
ERROR_CODES = ("H", "N", "O", "P", "IR", "IC", "V")
BOOTSTRAP_SAMPLES = 1000


def bootstrap_ci(values: list[float], seed: int = 0) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of the mean; None for fewer than two values (one
    value says nothing about spread)."""
    data = np.asarray(values, dtype=float)
    if len(data) < 2:
        return None
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(BOOTSTRAP_SAMPLES, len(data)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _numeric_fields(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    numeric: dict[str, list[float]] = {}
    for r in records:
        for key, value in r.items():
            if key in NOT_AVERAGED or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if math.isfinite(value):
                numeric.setdefault(key, []).append(float(value))
    return numeric


def aggregate(records: list[dict[str, Any]]) -> dict[str, float]:
    metrics: dict[str, float] = {
        "n_tasks": float(len(records)),
        "n_errors": float(sum(1 for r in records if r.get("error"))),
        "n_skipped": float(sum(1 for r in records if r.get("skipped"))),
    }
    answered = [r for r in records if not r.get("error") and not r.get("skipped")]
    metrics["n_answered"] = float(len(answered))
    numeric = _numeric_fields(answered)
    for key, values in sorted(numeric.items()):
        metrics[f"{key}_mean"] = float(np.mean(values))
        ci = bootstrap_ci(values) if key.startswith(QUALITY_PREFIXES) else None
        if ci is not None:
            metrics[f"{key}_ci_low"], metrics[f"{key}_ci_high"] = ci
        if key.startswith("geval_"):
            metrics[f"{key}_share_ge4"] = float(np.mean([v >= 4 for v in values]))
    latencies = numeric.get("latency_ms", [])
    if latencies:
        for q in (50, 90, 99):
            metrics[f"latency_ms_p{q}"] = float(np.percentile(latencies, q))
    metrics["cost_usd_total"] = float(sum(r.get("cost_usd") or 0.0 for r in records))
    metrics["cost_usd_uncached_total"] = float(sum(r.get("cost_usd_uncached") or 0.0
                                                   for r in records))
    if answered and any("max_loops_reached" in r for r in answered):
        metrics["max_loops_reached_rate"] = float(
            np.mean([bool(r.get("max_loops_reached")) for r in answered]))
    for key in sorted({k for r in records for k in r if k.endswith("_parse_failed")}):
        metrics[key.replace("_parse_failed", "_parse_failures")] = float(
            sum(1 for r in records if r.get(key)))
    assessed = [r["error_codes"] for r in answered if isinstance(r.get("error_codes"), list)]
    if assessed:
        for code in ERROR_CODES:
            metrics[f"error_rate_{code}"] = float(np.mean([code in c for c in assessed]))
    coverage = metrics.get("geval_coverage_mean")
    if coverage:
        metrics["cost_per_coverage_point"] = metrics.get("cost_usd_mean", 0.0) / coverage
    return metrics
