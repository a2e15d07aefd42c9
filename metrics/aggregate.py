"""Run-level aggregates from per-task eval records, as the scorers declare them.

For every numeric per-task field: ``<field>_mean`` over answered tasks that have a value
(nulls are not zeros), each task's repeats (``runner.repeats``) averaged first, so a task
weighs the same however many answers it has. A declared metric with ``ci`` also gets a
bootstrap 95% confidence interval over tasks (``_ci_low``/``_ci_high``, 1,000 resamples,
fixed seed; a task's repeats stay with it, so more repeats of the same answer never narrow
it) and, with two repeats or more or with judge samples, its variance split
(``metrics.repeats``: ``_var_between_tasks``, ``_var_within_task``, ``_var_judge``); one with
``share_at_least`` the share of tasks at or above it (``_share_ge<N>``, per task over its
repeats); one a scorer declares pass/fail (``Metric.passes``) with two repeats or more its
pass^k (``_pass_all``: every repeat correct). ``n_repeats``: the most answers any task has;
``n_task_ids``: distinct tasks (``n_tasks``, ``n_answered`` and ``n_errors`` count answers). Plus latency
percentiles (answered tasks; errored tasks' latency apart, ``latency_ms_errors_p50``/
``_max``), cost totals and ``cost_usd_per_task`` (the total over every task the system ran,
errored ones included: their calls were paid; ``cost_usd_uncached_per_task`` the same as if
no call had come from the response cache; the mean over answered tasks only is
``cost_usd_answered_mean``; a mean over only part of the answered tasks, those that carry
the field, is logged with its n as ``<field>_mean_n``, e.g. ``cost_usd_answered_mean_n``),
counts, and what each scorer adds (``Scorer.aggregate``: e.g.
judge parse failures, error-taxonomy rates, cost per coverage point).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from metrics.base import Metric, Scorer
from metrics.repeats import pass_all, variance_components
from metrics.stats import resampled_means

NOT_AVERAGED = ("started_at", "repeat")
BOOTSTRAP_SAMPLES = 1000


def bootstrap_ci(values: list[float], seed: int = 0, clusters: Sequence[Any] | None = None
                 ) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of the mean; None for fewer than two values (one
    value says nothing about spread). ``clusters``: each value's document cluster; values
    sharing one are resampled together (``metrics.stats.resampled_means``)."""
    if len(values) < 2:
        return None
    means = resampled_means(values, clusters, seed, samples=BOOTSTRAP_SAMPLES)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def task_means(records: Sequence[dict[str, Any]], key: str) -> dict[str, float]:
    """Each task's mean of ``key`` over its records (one per repeat; ``runner.repeats``),
    by task id, in first-seen order; a task none of whose records has a finite value is
    left out. Everything that pairs two systems task by task pairs these."""
    values: dict[str, list[float]] = {}
    for r in records:
        value = r.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            values.setdefault(str(r["id"]), [])
            continue
        values.setdefault(str(r["id"]), []).append(float(value))
    return {task: sum(v) / len(v) for task, v in values.items() if v}


def _numeric_fields(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    numeric: dict[str, list[float]] = {}
    for r in records:
        for key, value in r.items():
            if key in NOT_AVERAGED or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if math.isfinite(value):
                numeric.setdefault(key, []).append(float(value))
    return numeric


def _declared_aggregates(answered: list[dict[str, Any]], metric: Metric) -> dict[str, float]:
    """A declared metric's CI over task means, share at or above its threshold, variance
    split and pass^k."""
    out: dict[str, float] = {}
    per_task = list(task_means(answered, metric.name).values())
    ci = bootstrap_ci(per_task) if metric.ci else None
    if ci is not None:
        out[f"{metric.name}_ci_low"], out[f"{metric.name}_ci_high"] = ci
    parts = variance_components(answered, metric.name) if metric.ci else None
    if parts is not None and (parts.within_task is not None or parts.judge is not None):
        out.update(parts.metrics(metric.name))  # a split needs repeats or judge samples
    if metric.share_at_least is not None:
        at_least = [{"id": r["id"], "hit": float(r[metric.name] >= metric.share_at_least)}
                    for r in answered if _finite(r.get(metric.name))]
        out[metric.share_key] = float(np.mean(list(task_means(at_least, "hit").values())))
    passed = pass_all(answered, metric.name) if metric.passes else None
    if passed is not None:
        out[f"{metric.name}_pass_all"] = passed
    return out


def _task_ids(records: list[dict[str, Any]]) -> list[str]:
    """Each record's task: its ``id``; a record without one (scored outside a run) is a task
    of its own."""
    return [str(r["id"]) if "id" in r else f"#{i}" for i, r in enumerate(records)]


def _finite(value: Any) -> bool:
    return (not isinstance(value, bool) and isinstance(value, int | float)
            and math.isfinite(value))


def _cost_totals(records: list[dict[str, Any]]) -> dict[str, float]:
    """Totals only when every record carries its cost: a total over the tasks that happen
    to say theirs would be a made-up number (predictions made elsewhere may not)."""
    out: dict[str, float] = {}
    if all(isinstance(r.get("cost_usd"), int | float) for r in records):
        out["cost_usd_total"] = float(sum(r["cost_usd"] for r in records))
        ran = sum(1 for r in records if not r.get("skipped"))
        if ran:
            out["cost_usd_per_task"] = out["cost_usd_total"] / ran
    if all(isinstance(r.get("cost_usd_uncached"), int | float) for r in records):
        out["cost_usd_uncached_total"] = float(sum(r["cost_usd_uncached"] for r in records))
        ran = sum(1 for r in records if not r.get("skipped"))
        if ran:
            out["cost_usd_uncached_per_task"] = out["cost_usd_uncached_total"] / ran
    return out


def aggregate(records: list[dict[str, Any]], scorers: Sequence[Scorer] | None = None
              ) -> dict[str, float]:
    """The run's metrics; ``scorers``: those that wrote the records (None: every registered
    scorer with its default options)."""
    if scorers is None:
        from metrics import default_scorers

        scorers = default_scorers()
    declared = {m.name: m for s in scorers for m in s.metrics}
    metrics: dict[str, float] = {
        "n_tasks": float(len(records)),
        "n_errors": float(sum(1 for r in records if r.get("error"))),
        "n_skipped": float(sum(1 for r in records if r.get("skipped"))),
    }
    answered = [r for r in records if not r.get("error") and not r.get("skipped")]
    metrics["n_answered"] = float(len(answered))
    tasks = Counter(_task_ids(records))
    metrics["n_task_ids"] = float(len(tasks))
    metrics["n_repeats"] = float(max(tasks.values(), default=0))
    numeric = _numeric_fields(answered)
    by_task = [{**r, "id": t} for r, t in zip(answered, _task_ids(answered), strict=True)]
    n_answered_tasks = len({r["id"] for r in by_task})
    for key in sorted(numeric):
        means = task_means(by_task, key)
        metrics[f"{key}_mean"] = float(np.mean(list(means.values())))
        if len(means) < n_answered_tasks:  # a mean over part of the answered tasks says so
            metrics[f"{key}_mean_n"] = float(len(means))
        if key in declared:
            metrics.update(_declared_aggregates(by_task, declared[key]))
    latencies = numeric.get("latency_ms", [])
    if latencies:
        for q in (50, 90, 99):
            metrics[f"latency_ms_p{q}"] = float(np.percentile(latencies, q))
    errored = [float(r["latency_ms"]) for r in records
               if r.get("error") and isinstance(r.get("latency_ms"), int | float)]
    if errored:
        metrics["latency_ms_errors_p50"] = float(np.percentile(errored, 50))
        metrics["latency_ms_errors_max"] = float(max(errored))
    metrics.update(_cost_totals(records))
    # the generic mean is over answered tasks only: named apart from the cost per task
    for name in ("cost_usd", "cost_usd_uncached"):
        if f"{name}_mean" in metrics:
            metrics[f"{name}_answered_mean"] = metrics.pop(f"{name}_mean")
            if f"{name}_mean_n" in metrics:
                metrics[f"{name}_answered_mean_n"] = metrics.pop(f"{name}_mean_n")
    reached = [r["max_loops_reached"] for r in answered  # None: the record does not say
               if r.get("max_loops_reached") is not None]
    if reached:
        metrics["max_loops_reached_rate"] = float(np.mean([bool(v) for v in reached]))
    for scorer in scorers:
        metrics.update(scorer.aggregate(answered, records))
    return metrics
