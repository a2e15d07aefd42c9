"""Run-level aggregates from per-task eval records."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# per-task fields that describe the run rather than a quality score
COUNT_FIELDS = ("loops", "cost_usd", "latency_ms", "input_tokens", "output_tokens",
                "cache_read_input_tokens", "cache_creation_input_tokens")


def aggregate(records: list[dict[str, Any]]) -> dict[str, float]:
    """``<field>_mean`` for every numeric field, latency percentiles, totals and counts."""
    metrics: dict[str, float] = {
        "n_tasks": float(len(records)),
        "n_errors": float(sum(1 for r in records if r.get("error"))),
        "n_skipped": float(sum(1 for r in records if r.get("skipped"))),
    }
    answered = [r for r in records if not r.get("error") and not r.get("skipped")]
    metrics["n_answered"] = float(len(answered))
    numeric: dict[str, list[float]] = {}
    for r in answered:
        for key, value in r.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if value is not None and math.isfinite(value):
                numeric.setdefault(key, []).append(float(value))
    for key, values in sorted(numeric.items()):
        metrics[f"{key}_mean"] = float(np.mean(values))
    latencies = numeric.get("latency_ms", [])
    if latencies:
        for q in (50, 90, 99):
            metrics[f"latency_ms_p{q}"] = float(np.percentile(latencies, q))
    metrics["cost_usd_total"] = float(sum(r.get("cost_usd") or 0.0 for r in records))
    metrics["cost_usd_uncached_total"] = float(sum(r.get("cost_usd_uncached") or 0.0
                                                   for r in records))
    if "max_loops_reached" in (records[0] if records else {}):
        metrics["max_loops_reached_rate"] = float(
            np.mean([bool(r.get("max_loops_reached")) for r in answered])) if answered else 0.0
    return metrics
