"""The "What to ship" section, per dataset: each compared run and each routing policy on the
cost-quality plane of the first decision metric, which are dominated, and the
recommendation (``metrics.routing`` holds the statistics, ``report/writers/frontier_words.py``
the words). The method and what the parent run logs (``frontier.jsonl``, ``routers.jsonl``,
``plots/frontier.png``):
docs/verdict.md#what-to-ship-the-cost-quality-frontier-routing-policies-and-the-budget."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from arag.systems.routed import decline_reason
from metrics import declared_metrics, routing
from metrics.routing import Budget, Point, Route, Scored, Tasks
from metrics.sequential import margin_for
from report import policy
from report.model import Analysis, Authority, Claim, Inputs, Row, Table, register_analysis
from report.verdict import TaskSets, by_dataset, is_answered

SECTION = "What to ship"
RULE = (f"cross-fitted over folds of whole documents; {policy.CORRECTION}-adjusted Wilcoxon "
        "with a bootstrap CI clustered by document")


def _number(value: Any) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else math.nan


def task_cost(record: Row) -> float:
    """A task's uncached cost (what it would cost without the response cache); NaN: unknown."""
    cost = _number(record.get("cost_usd_uncached"))
    return cost if not math.isnan(cost) else _number(record.get("cost_usd"))


def declined(record: Row) -> bool:
    """The record shows the system declining (``arag.systems.routed.decline_reason``)."""
    refused = "stop_reason=refusal" in str(record.get("error") or "")
    kind = record.get("error_kind") or ("refusal" if refused else None)
    if record.get("error") and kind != "refusal":
        return False
    return decline_reason(bool(record.get("skipped")), record.get("predicted", "answered"),
                          record.get("stop_reason"), kind) is not None


def tasks_of(part: TaskSets, runs: Sequence[Row], key: str, features: Sequence[str]) -> Tasks:
    """The runs' per-task results on the tasks every one has a record for."""
    tables = [part.tables[r["run_id"]] for r in runs]
    ids = [t for t in part.all_ids if all(t in table for table in tables)]

    def grid(get: Any) -> np.ndarray:
        return np.asarray([[get(table[t]) for t in ids] for table in tables], dtype=float)

    quality = grid(lambda r: _number(r.get(key)) if is_answered(r) else math.nan)
    first = [next((tb[t] for tb in tables if tb[t].get("document_tokens") is not None),
                  tables[0][t]) for t in ids]
    found = part.clusters(ids)
    fit = np.asarray([math.nan if r.get("fits_context") is None else float(bool(
        r["fits_context"])) for r in first], dtype=float)
    return Tasks(names=[r["run"] for r in runs], quality=quality, cost=grid(task_cost),
                 latency=grid(lambda r: _number(r.get("latency_ms"))),
                 declined=grid(declined).astype(bool),
                 clusters=np.asarray(found if found is not None else range(len(ids))),
                 features={f: np.asarray([_number(r.get(f)) for r in first]) for f in features},
                 fits=None if np.isnan(fit).all() else fit,
                 long_context=[bool(r.get("long_context")) for r in runs],
                 retrieves=[bool(r.get("retrieves")) for r in runs],
                 higher_is_better=policy.higher_is_better(key))


def margin(key: str, given: Mapping[str, float]) -> float:
    metric = next((m for m in declared_metrics() if m.name == key), None)
    try:
        return margin_for(metric, given.get(key)) if metric else float(given.get(key) or 0.0)
    except ValueError:  # a metric with no declared range and no margin given
        return 0.0


def budget_of(options: Mapping[str, Any]) -> Budget:
    given = options.get("budget") or {}
    return Budget(given.get("cost_usd_per_task"), given.get("latency_ms_p90"))


@register_analysis("frontier", 30)
def frontier_analysis(inputs: Inputs) -> Analysis:
    """The frontier, the policies and the recommendation, per dataset."""
    if not inputs.keys:
        return Analysis()
    key = inputs.keys[0]
    out = Analysis()
    parts = by_dataset(inputs.sets)
    for name, part in parts.items():
        runs = [r for r in policy.contenders(part.runs)
                if r["run_id"] in part.tables and part.has(r, key)]
        if len(runs) < 2:
            out.claims.append(Claim("no_frontier", SECTION, tuple(r["run"] for r in runs), key,
                                    figures={"runs": len(runs)}))
            continue
        out.extend(_dataset(inputs, part, runs, key, name if len(parts) > 1 else None))
    return out


def _dataset(inputs: Inputs, part: TaskSets, runs: list[Row], key: str,
             dataset: str | None) -> Analysis:
    options = inputs.options
    features = list(options.get("route_by") or ["document_tokens"])
    k = int(options.get("route_folds") or routing.FOLDS)
    tasks = tasks_of(part, runs, key, features)
    points = [routing.point(tasks, i) for i in range(len(runs))]
    best = routing.best_single(points, tasks.sign)
    ceiling = routing.score(tasks, routing.oracle(tasks), best, None)
    named = {**{str(r.get("system")): i for i, r in enumerate(runs)},
             **{r["run"]: i for i, r in enumerate(runs)}}
    asked = [named[n] for n in options.get("cascade") or [] if n in named]
    routes: list[Route | None] = [routing.fits(tasks, k), routing.threshold(tasks, features, k),
                                  routing.cascade(tasks, asked) if len(asked) >= 2 else
                                  routing.cascade_fit(tasks, k)]
    scored = [routing.score(tasks, r, best, ceiling.point.per_task) for r in routes if r is not None]
    everything = [*points, *(s.point for s in scored), ceiling.point]
    dominated = routing.dominance(tasks, everything, margin(key, options.get("equivalence_margin") or {}))
    front = routing.frontier(everything, dominated)
    steps = [routing.paired(tasks, b.per_task, a.per_task) for a, b in zip(front, front[1:], strict=False)]
    family = policy.adjusted([s.diff.p if s.diff else None for s in scored]
                             + [d.p if d else None for d in steps])
    adjusted, step_p = family[:len(scored)], family[len(scored):]
    sequential = any(r.get("sequential") for r in runs)
    budget = budget_of(options)
    chosen = None if sequential else (routing.within_budget(everything, budget, tasks.sign)
                                      if budget.given else routing.step_up(front, steps, step_p))
    authority = Authority.descriptive if sequential else Authority.recommendation
    n_docs = len(set(tasks.clusters.tolist()))
    claims = [_route_claim(s, p_adj, key, authority, n_docs)
              for s, p_adj in zip(scored, adjusted, strict=True)]
    claims.append(Claim("frontier", SECTION, tuple(p.name for p in front), key,
                        n_tasks=int(tasks.scored.sum()), n_documents=n_docs,
                        rule="dominated: cheaper, and the costlier's CI upper bound of the gain "
                        "below the equivalence margin", authority=authority,
                        figures={"dataset": dataset, "points": len(everything)},
                        table=_table(everything, dominated)))
    if unknown := [p.name for p in points if p.cost is None]:
        # said in this section, where it limits what is claimed (not a caveat of the report)
        claims.append(Claim("unknown_cost", SECTION, tuple(unknown), key,
                            figures={"runs": len(unknown)}))
    claims.append(Claim("frontier_descriptive", SECTION, tuple(r["run"] for r in runs), key)
                  if sequential else _recommendation(tasks, chosen, points, scored, front,
                                                     (step_p, adjusted), budget, key, runs,
                                                     dataset, n_docs))
    return Analysis(claims=claims, metrics={"frontier_points": float(len(front))},
                    artifacts={"frontier.jsonl": [_frontier_row(p, dominated, chosen, dataset)
                                                  for p in everything],
                               "routers.jsonl": [_router_row(s, dataset)
                                                 for s in [*scored, ceiling]]},
                    plots=[_plot(everything, front, chosen, key)])


def _fields(x: Any, **names: str) -> Row:
    """``x``'s attributes under the row's names (each None where ``x`` is None: unknown)."""
    return {name: None if x is None else getattr(x, attr) for name, attr in names.items()}


def _frontier_row(p: Point, dominated: Mapping[str, list[str]], chosen: Point | None,
                  dataset: str | None) -> Row:
    row: Row = {"name": p.name, "kind": p.kind,
                **_fields(p.quality, quality="mean", quality_ci_low="low", quality_ci_high="high"),
                **_fields(p.cost, cost_usd_per_task="mean", cost_ci_low="low", cost_ci_high="high"),
                "latency_ms_p50": p.latency_p50, "latency_ms_p90": p.latency_p90,
                "dominated_by": list(dominated.get(p.name, [])),
                "recommended": chosen is not None and p.name == chosen.name}
    return {**row, "dataset": dataset} if dataset else row


def _rule(s: Scored) -> dict[str, Any]:
    return {**s.route.rule, "in_sample": True, "unattainable": True} if s.route.in_sample \
        else dict(s.route.rule)


def _router_row(s: Scored, dataset: str | None) -> Row:
    row: Row = {"policy": s.route.policy, "rule": _rule(s),
                **_fields(s.point.quality, quality_oos="mean"), "best_single": s.best_single,
                **_fields(s.diff, diff_vs_best_single="mean_diff", diff_ci_low="ci_low",
                          diff_ci_high="ci_high"),
                **_fields(s.point.cost, cost_usd_per_task="mean"),
                "shares": s.shares, "regret": s.regret}
    return {**row, "dataset": dataset} if dataset else row


def _route_claim(s: Scored, p_adjusted: float | None, key: str, authority: Authority,
                 n_docs: int) -> Claim:
    d = s.diff
    return Claim("route", SECTION, (s.point.name, s.best_single), key,
                 d.mean_diff if d else None, (d.ci_low, d.ci_high) if d else None,
                 d.p if d else None, p_adjusted, s.n_tasks, n_docs, RULE, authority,
                 figures={"policy": s.route.policy, "rule": _rule(s), "shares": s.shares,
                          **_fields(s.point.cost, cost_usd_per_task="mean"),
                          "latency_ms_p90": s.point.latency_p90, "regret": s.regret,
                          "escalated": s.escalated,
                          "better": bool(d and p_adjusted is not None and p_adjusted < 0.05
                                         and d.ci_low > 0)})


def _recommendation(tasks: Tasks, chosen: Point | None, points: list[Point],
                    scored: list[Scored], front: list[Point],
                    family: tuple[Sequence[float | None], Sequence[float | None]],
                    budget: Budget, key: str, runs: list[Row], dataset: str | None,
                    n_docs: int) -> Claim:
    """What to ship (the frontier's climb, a policy or the budget's pick), with its gain
    over what it is chosen against and the command that runs it."""
    authority = Authority.recommendation
    limits = asdict(budget)
    if chosen is None:
        return Claim("nothing_fits", SECTION, (), key, authority=authority, key=True,
                     n_documents=n_docs, figures={"budget": limits, "dataset": dataset})
    overall = max((p for p in [*points, *(s.point for s in scored)] if p.quality),
                  key=lambda p: tasks.sign * (p.quality.mean if p.quality else 0.0))
    policy_of = {s.point.name: s for s in scored}
    step_p, route_p = family
    if budget.given:
        versus, why, p_adj = overall, "budget", None
    elif chosen.name in policy_of:
        versus = points[tasks.names.index(policy_of[chosen.name].best_single)]
        why, p_adj = "policy", route_p[scored.index(policy_of[chosen.name])]
    else:
        k = front.index(chosen)
        versus, why = (front[k - 1], "step") if k else (chosen, "cheapest")
        p_adj = step_p[k - 1] if k else None
    diff = routing.paired(tasks, chosen.per_task, versus.per_task) if versus is not chosen else None
    # the cheapest point is a choice only where costs differ: with every cost the same (the
    # offline model's $0) there is nothing to ship on
    if why == "cheapest" and len({round(p.cost.mean, 12) for p in points if p.cost}) <= 1:
        why = "same_cost"
    decisive = why != "same_cost"
    systems = {r["run"]: str(r.get("system") or r["run"]) for r in runs}
    members = policy_of[chosen.name].route if chosen.name in policy_of else None
    return Claim("recommendation", SECTION, (chosen.name, versus.name), key,
                 tasks.sign * diff.mean_diff if diff else None,
                 _turned(diff, tasks.sign) if diff else None, diff.p if diff else None, p_adj,
                 diff.n if diff else int(tasks.scored.sum()), n_docs,
                 "best within the budget" if budget.given else
                 "the frontier climbed while each step's gain is significant",
                 authority, decisive=decisive, key=True,
                 figures={"why": why, "budget": limits, "dataset": dataset,
                          **_fields(chosen.cost, cost_usd_per_task="mean"),
                          "latency_ms_p90": chosen.latency_p90,
                          **_fields(chosen.quality, quality="mean"),
                          "best_overall": overall.name,
                          "rule": _rule(policy_of[chosen.name]) if members else None,
                          "member_costs": {p.name: p.cost.mean if p.cost else None
                                           for p in points},
                          "command": command(chosen, members, systems, dataset or
                                             str(runs[0].get("dataset") or ""))})


def _turned(diff: Any, sign: float) -> tuple[float, float]:
    """A CI turned back into the metric's units (``paired`` turns it so positive is better)."""
    low, high = sign * diff.ci_low, sign * diff.ci_high
    return (min(low, high), max(low, high))


def command(chosen: Point, route: Route | None, systems: Mapping[str, str], dataset: str
            ) -> str:
    """The ready-to-run command of the recommendation (``system=routed`` for a policy)."""
    data = f" dataset={dataset}" if dataset else ""
    if route is None:  # a run: its system and the keys its name says were swept
        swept = "".join(f" {w}" for w in chosen.name.split()[1:]
                        if "=" in w and not w.startswith("dataset"))
        return f"python run.py system={systems.get(chosen.name, chosen.name)}{swept}{data}"
    rule = route.rule
    if route.policy == "threshold" and rule["below"] != rule["above"]:
        return (f"python run.py system=routed 'system.rule={{feature: {rule['feature']}, "
                f"threshold: {rule['threshold']:g}, below: {systems[rule['below']]}, "
                f"above: {systems[rule['above']]}}}'{data}")
    if route.policy == "threshold":
        return f"python run.py system={systems[rule['below']]}{data}"
    order = [rule["below"], rule["above"]] if route.policy == "fits" else rule["order"]
    # fits: stuffing skips exactly where the document does not fit, so a cascade runs it
    return f"python run.py system=routed 'system.cascade=[{','.join(systems[n] for n in order)}]'{data}"


def _table(points: list[Point], dominated: Mapping[str, list[str]]) -> Table:
    return Table(["point", "quality", "95% CI", "cost / task ($, these tasks)", "P90 ms",
                  "dominated by"],
                 [[p.name + (" (bound, in sample)" if p.bound else ""),
                   p.quality.mean if p.quality else None,
                   f"[{p.quality.low:.3f}, {p.quality.high:.3f}]" if p.quality else "unknown",
                   f"{p.cost.mean:.5f}" if p.cost else "unknown",
                   round(p.latency_p90) if p.latency_p90 is not None else None,
                   ", ".join(dominated.get(p.name, [])) or "none"] for p in points])


def _plot(points: list[Point], front: list[Point], chosen: Point | None, key: str) -> Any:
    def draw(folder: Path) -> Path | None:
        from report.plots import plt, save

        placed = [p for p in points if p.cost and p.quality]
        if not placed:
            return None
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for p in placed:
            assert p.cost and p.quality
            ax.errorbar([p.cost.mean], [p.quality.mean],
                        xerr=[[p.cost.mean - p.cost.low], [p.cost.high - p.cost.mean]],
                        yerr=[[p.quality.mean - p.quality.low], [p.quality.high - p.quality.mean]],
                        fmt="*" if p.bound else ("s" if p.kind == "policy" else "o"), capsize=3,
                        color="#999999" if p.bound else None, markersize=10 if chosen is p else 6)
            ax.annotate(p.name + (" (bound)" if p.bound else ""), (p.cost.mean, p.quality.mean),
                        textcoords="offset points", xytext=(4, 4), fontsize=7)
        shown = [p for p in front if p.cost and p.quality]
        ax.plot([p.cost.mean for p in shown if p.cost], [p.quality.mean for p in shown if p.quality],
                "-", color="#4C72B0", linewidth=1)
        for ceiling in (p.quality for p in placed if p.bound and p.quality):
            ax.axhline(ceiling.mean, color="#999999", linestyle=":", linewidth=1)
        ax.set_xlabel("uncached cost per task (USD)", fontsize=9)
        ax.set_ylabel(key, fontsize=9)
        ax.set_title(f"{key} against cost: the frontier", fontsize=10)
        return save(fig, folder / "frontier.png")

    return draw
