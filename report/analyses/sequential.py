"""A sequential sweep's looks: each comparison of the family on the decision metrics, with
its anytime-valid interval over the first ``n`` tasks of the seeded order
(``metrics.sequential``). The runner looks after each round; the report rebuilds the last
look from the records, so its verdict comes from the same intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from metrics import declared_metrics
from metrics.sequential import Look, State, Stop, compare, paired, run_order, stop_reason
from report.model import Analysis, Authority, Claim, Inputs, Note, Row, Table, register_analysis
from report.policy import higher_is_better


def looks_at(records: Mapping[str, Sequence[Row]], decide_on: Sequence[str], seed: int,
             n: int, margins: Mapping[str, float] | None = None) -> list[Look]:
    """Every pair of systems (``records``: label -> eval records) on every decision metric,
    over the first ``n`` tasks of the order any of them scored."""
    metrics = {m.name: m for m in declared_metrics()}
    ids = (r["id"] for rows in records.values() for r in rows)
    order = run_order(ids, seed)[:n]
    pairs = list(combinations(records.items(), 2))
    return compare([paired(metrics[key], first, second, order, (margins or {}).get(key))
                    for key in decide_on for first, second in pairs])


SECTION = "Sequential stop"


def settings_of(params: Mapping[str, str]) -> dict[str, Any] | None:
    """A run's sequential settings from its params (None: not a sequential sweep's run)."""
    if params.get("runner.sequential") != "True":
        return None
    max_tasks = params.get("runner.max_tasks")
    return {"order_seed": int(params.get("runner.order_seed") or 0),
            "max_tasks": int(max_tasks) if max_tasks not in (None, "None", "null") else None}


@register_analysis("sequential", 10)
def sequential_verdict(inputs: Inputs) -> Analysis:
    """A sequential sweep decides by its anytime-valid intervals over the tasks it ran, and
    says when and why it stopped; the fixed-sample tests elsewhere become descriptive."""
    runs = [r for r in inputs.finished if r.get("sequential")]
    if len(runs) < 2 or not inputs.keys:
        return Analysis()
    settings = runs[0]["sequential"]
    done = int(max(r.get("n_tasks_asked") or 0 for r in runs))
    total = int(max(r.get("n_tasks_of_data") or 0 for r in runs)) or done
    records = {r["run"]: inputs.records.get(r["run_id"], []) for r in runs}
    looks = looks_at(records, inputs.keys, settings["order_seed"], done,
                     dict(inputs.options.get("equivalence_margin") or {}))
    capped = any(r.get("status") == "KILLED" for r in inputs.rows)
    stop = stop_reason(looks, done, total, settings["max_tasks"], cost_capped=capped)
    # every paid call of the runs, the judge's too, over every round (tracking.spend)
    costs = [r.get("run_spend_usd", r.get("cost_usd_total")) for r in runs]
    spend = sum(c for c in costs if c is not None) if None not in costs else None
    early = stop in (Stop.decided, Stop.equivalent, Stop.settled)
    figures = {"tasks": done, "tasks_total": total, "spend_usd": spend,
               "estimated_full_usd": spend * total / done if spend and done else None,
               "stop": stop.value if stop else None, "early": early,
               "comparisons": [lk.row() for lk in looks]}
    table = Table(["metric", "first", "second", "n", "mean difference", "interval", "state"],
                  [[lk.metric, lk.first, lk.second, lk.n, lk.mean_diff,
                    f"[{lk.low:.3f}, {lk.high:.3f}]", lk.state.value] for lk in looks])
    claims = [Claim("stopped", SECTION, n_tasks=done, rule=RULE, key=True, figures=figures,
                    table=table)]
    claims += [_look_claim(look, len(looks)) for look in looks]
    return Analysis(claims=claims, notes=[Note("descriptive_tests", runs=tuple(records),
                                               counts={"early": early, "stop": figures["stop"]})],
                    metrics={"sequential_tasks": float(done),
                             "sequential_decided": float(any(lk.state == State.decided
                                                             for lk in looks))})


RULE = "anytime-valid 95% interval"


def _look_claim(look: Look, comparisons: int) -> Claim:
    decided = look.state in (State.decided, State.equivalent)
    better = None
    if look.state == State.decided:
        better = look.higher if higher_is_better(look.metric) else (
            look.second if look.higher == look.first else look.first)
    return Claim("sequential", SECTION, (look.first, look.second), look.metric,
                 difference=look.mean_diff, ci=(look.low, look.high), n_tasks=look.n,
                 rule=RULE, authority=Authority.sequential, decisive=decided, key=True,
                 figures={"state": look.state.value, "better": better, "margin": look.margin,
                          "comparisons": comparisons})
