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
from report.findings import Finding, Table
from report.model import Analysis, register_analysis
from report.policy import higher_is_better

Row = dict[str, Any]


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
STOP_WORDS = {
    Stop.decided: "decided", Stop.equivalent: "settled: no difference worth having",
    Stop.settled: "settled", Stop.max_tasks: "stopped at runner.max_tasks: undecided",
    Stop.tasks_out: "ran out of tasks: undecided", Stop.cost_cap: "stopped at the cost cap: undecided",
}


def settings_of(params: Mapping[str, str]) -> dict[str, Any] | None:
    """A run's sequential settings from its params (None: not a sequential sweep's run)."""
    if params.get("runner.sequential") != "True":
        return None
    max_tasks = params.get("runner.max_tasks")
    return {"order_seed": int(params.get("runner.order_seed") or 0),
            "max_tasks": int(max_tasks) if max_tasks not in (None, "None", "null") else None}


@register_analysis("sequential", 10)
def sequential_verdict(inputs: Any) -> Analysis:
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
    # every paid call of the runs, the judge's too, over every round (report.spend)
    costs = [r.get("run_spend_usd", r.get("cost_usd_total")) for r in runs]
    spend = sum(c for c in costs if c is not None) if None not in costs else None
    money = "" if not spend else f" (${spend:.2f} of an estimated ${spend * total / done:.2f})"
    said = STOP_WORDS[stop] if stop else "stopped before its rule did: undecided"
    head, _, tail = said.partition(":")
    text = (f"{head[0].upper()}{head[1:]} after {done} of {total} tasks{money}{':' + tail if tail else ''}, "
            "by anytime-valid 95% intervals for each mean paired difference (the family's error "
            f"rate split across {len(looks)} comparison(s)). "
            + " ".join(_sentence(look) for look in looks))
    figures = {"tasks": done, "tasks_total": total, "spend_usd": spend,
               "stop": stop.value if stop else None, "comparisons": [lk.row() for lk in looks]}
    table = Table(["metric", "first", "second", "n", "mean difference", "interval", "state"],
                  [[lk.metric, lk.first, lk.second, lk.n, lk.mean_diff,
                    f"[{lk.low:.3f}, {lk.high:.3f}]", lk.state.value] for lk in looks])
    early = stop in (Stop.decided, Stop.equivalent, Stop.settled)
    why = ("The sweep stopped when its anytime-valid intervals allowed" if early else
           "The sweep looked at its anytime-valid intervals after every round and stopped "
           f"for another reason ({STOP_WORDS[stop].partition(':')[0] if stop else 'undecided'})")
    caveat = (f"{why}: the p-values and bootstrap CIs elsewhere in this report are computed on "
              "tasks a data-dependent rule chose to run and are descriptive, not tests. The "
              "decision is the intervals' above.")
    return Analysis(
        findings=[Finding("sequential", SECTION, text, figures, key=True, table=table),
                  Finding("sequential", SECTION, caveat, {}, caveat=True)],
        metrics={"sequential_tasks": float(done),
                 "sequential_decided": float(any(lk.state == State.decided for lk in looks))})


def _sentence(look: Look) -> str:
    interval = f"[{look.low:+.3f}, {look.high:+.3f}]"
    if look.state == State.decided:
        better = look.higher if higher_is_better(look.metric) else (
            look.second if look.higher == look.first else look.first)
        return (f"**{better}** is better on `{look.metric}`: {look.first} minus {look.second} "
                f"lies in {interval} over {look.n} tasks.")
    if look.state == State.equivalent:
        return (f"{look.first} and {look.second} are equivalent on `{look.metric}`: the "
                f"difference lies in {interval}, within +-{look.margin:g}.")
    return (f"{look.first} vs {look.second} on `{look.metric}` is undecided: the difference "
            f"lies in {interval} over {look.n} tasks.")
