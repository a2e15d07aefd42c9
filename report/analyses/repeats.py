"""What answering every task K times (``runner.repeats``) shows: the decision metric's variance
split into tasks, generation and the judge per run and pair, what would narrow a pair's CI most,
the stability of its winner (``stability/...`` metrics), pass^k
(docs/running.md#repeats-a-system-is-a-distribution)."""

from __future__ import annotations

import itertools
from dataclasses import asdict

from metrics import declared_metrics
from metrics.repeats import (
    Components,
    difference_components,
    pass_all,
    projected_narrowing,
    stability_share,
    variance_components,
)
from report import policy
from report.console import metric_label
from report.model import Analysis, Claim, Inputs, Row, Table, register_analysis
from report.verdict import Record, TaskSets, is_answered

SECTION = "Repeats"


def repeated(rows: list[Row]) -> list[Row]:
    """The runs that answered each task more than once (``runner.repeats``)."""
    return [r for r in rows if int(r.get("repeats") or 1) > 1]


def cannot_vary(row: Row) -> bool:
    """Whether a run's repeats are identical by construction (the offline model, temperature 0)."""
    return row.get("model_provider") == "offline" or row.get("temperature_sent") in ("0", "0.0")


def _answered(sets: TaskSets, run: Row, ids: list[str]) -> list[Record]:
    wanted = set(ids)
    return [x for x in sets.answers.get(run["run_id"], []) if x["id"] in wanted and is_answered(x)]


def _narrows_most(parts: Components) -> str | None:
    """Which of tasks, repeats or judge samples holds the largest share of the CI."""
    if parts.between_tasks is None or parts.within_task is None:
        return None
    k, judge = max(1, parts.repeats), parts.judge or 0.0
    shares = {"more tasks": parts.between_tasks,
              "more repeats": max(0.0, parts.within_task - judge) / k,
              "more judge samples": judge / k}
    return max(shares, key=lambda s: shares[s]) if any(shares.values()) else "none (no spread)"


def _row(name: str, parts: Components) -> list[object]:
    return [name, parts.n_tasks, parts.repeats, parts.between_tasks, parts.within_task,
            parts.judge, _narrows_most(parts)]


@register_analysis("repeats", 60)
def repeats_analysis(inputs: Inputs) -> Analysis:
    sets, key = inputs.sets, inputs.keys[0]
    if not repeated(sets.runs):
        return Analysis()
    out = Analysis()
    body = [_row(r["run"], variance_components(_answered(sets, r, sets.common_for(key)), key))
            for r in sets.runs]
    pairs = []
    for a, b in itertools.combinations(sets.runs, 2):
        ids = sets.scored_ids([a, b], key)  # the one pairing: the metric's common tasks
        first, second = _answered(sets, a, ids), _answered(sets, b, ids)
        parts = difference_components(first, second, key)
        body.append(_row(f"{a['run']} − {b['run']}", parts))
        projection = projected_narrowing(parts)
        stable = stability_share(first, second, key, policy.higher_is_better(key))
        pairs.append(Claim("repeats_pair", SECTION, (a["run"], b["run"]), key, figures={
            "projection": asdict(projection) if projection else None, "judge": parts.judge,
            "within": parts.within_task, "stable": list(stable) if stable else None}))
        if stable is not None and a in repeated(sets.runs) and b in repeated(sets.runs):
            la, lb = (metric_label(x["run"]) for x in (a, b))
            out.metrics[f"stability/{la} vs {lb}"] = stable[0]
            out.run_metrics.setdefault(a["run_id"], {})[f"stability/{lb}"] = stable[0]
            out.run_metrics.setdefault(b["run_id"], {})[f"stability/{la}"] = stable[0]
    out.claims.append(Claim("repeats_split", SECTION, metric=key, figures={
        "k": sorted({int(r["repeats"]) for r in repeated(sets.runs)})}, table=Table(
        ["run / pair", "tasks", "K", "between tasks", "within task", "judge",
         "narrows the CI most"], body)))
    out.claims += pairs
    fields = [m.name for m in declared_metrics() if m.passes]
    passed = [[r["run"], f, value] for r in sets.runs for f in fields
              if (value := pass_all([x for x in sets.answers.get(r["run_id"], [])
                                     if is_answered(x)], f)) is not None]
    if passed:
        out.claims.append(Claim("pass_all", SECTION, table=Table(["run", "field", "pass^k"],
                                                                 passed)))
    return out
