"""The verdict's fixed-sample family as claims: each decision metric on every compared pair
of contenders (``report.verdict.decisions``: Holm-adjusted Wilcoxon with a bootstrap CI,
clustered by document), one claim per test. A declared difference is decisive; a pair the
rule does not decide carries what would decide it (the minimum detectable difference of
the rule over the pair's own tasks, and the tasks its observed difference would need)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from metrics.repeats import repeat_differences, stability_share
from metrics.stats import min_detectable_difference, tasks_needed
from report import policy
from report.model import Analysis, Authority, Claim, Inputs, register_analysis
from report.verdict import (
    Decision,
    Row,
    TaskSets,
    budget_pairs,
    by_dataset,
    dataset_of,
    find,
    is_answered,
)

SECTION = "Key finding"
RULE = "Holm-adjusted Wilcoxon with a bootstrap CI"


def pair_claim(sets: TaskSets, d: Decision, key: bool = False) -> Claim:
    """One test of the family as a claim, first minus second as the decision is turned
    (``report.verdict.find``); ``key``: one the key finding states (with the rule's
    minimum detectable difference)."""
    paired = d.paired
    first, second = d.first, d.second
    figures: dict[str, object] = {"family": d.family, "dataset": dataset_of(d.first),
                                  "higher_is_better": policy.higher_is_better(d.key),
                                  "void": [r["run"] for r in (first, second)
                                           if policy.void_agent(r)]}
    ids = sets.pair_ids(d.first, d.second, d.key)
    figures |= {"means": list(_means(sets, (first, second), d.key, ids).values()) if ids else [],
                "n_all": len(sets.all_ids),
                "skips": _skips(sets, (first, second), ids)}
    if paired is None:
        return Claim("untestable", SECTION, (first["run"], second["run"]), d.key,
                     n_tasks=len(ids), rule=RULE, authority=Authority.fixed_sample, key=key,
                     figures=figures)
    figures |= {"untied": paired.n_untied, "wins": paired.wins, "losses": paired.losses,
                "ties": paired.ties,
                "better": d.better["run"] if d.better is not None else None,
                **_stability(sets, first, second, d.key, ids, paired.mean_diff)}
    kind = ("difference" if d.better is not None else
            "no_difference" if paired.testable else "untestable")
    if key and paired.n_untied:
        figures |= _power(sets.cluster_differences(d.first, d.second, d.key, ids), d.family,
                          clustered=bool(paired.n_clusters))
    return Claim(kind, SECTION, (first["run"], second["run"]), d.key,
                 difference=paired.mean_diff, ci=(paired.ci_low, paired.ci_high), p=paired.p,
                 p_adjusted=d.p_adjusted, n_tasks=paired.n,
                 n_documents=paired.n_clusters, rule=RULE, authority=Authority.fixed_sample,
                 decisive=d.better is not None, key=key, figures=figures)


def _means(sets: TaskSets, runs: Sequence[Row], key: str, ids: list[str]) -> dict[str, float]:
    """Run id -> its mean on ``key`` over ``ids``."""
    return {r["run_id"]: float(np.mean(sets.values(r, key, ids))) for r in runs}


def _skips(sets: TaskSets, runs: tuple[Row, Row], ids: list[str]) -> list[dict[str, object]]:
    """What shrank a pair's tasks below every task: each run's skips (their commonest
    reason) and errors; empty when the pair has every task."""
    if len(ids) == len(sets.all_ids):
        return []
    out = []
    for run in runs:
        records = [sets.tables[run["run_id"]].get(t, {}) for t in sets.all_ids]
        reasons = [x.get("skip_reason") or "no reason given" for x in records if x.get("skipped")]
        errored = sum(bool(x.get("error")) for x in records)
        if reasons or errored:
            out.append({"run": run["run"], "skipped": len(reasons), "errored": errored,
                        "reason": max(set(reasons), key=reasons.count) if reasons else None})
    return out


def _stability(sets: TaskSets, a: Row, b: Row, key: str, ids: list[str], mean_diff: float
               ) -> dict[str, object]:
    """With repeats: in how many repeats taken alone ``a`` leads, and the share of tasks
    whose winner holds in most of their repeats (empty with one answer a task)."""
    wanted = set(ids)
    first, second = ([x for x in sets.answers.get(r["run_id"], [])
                      if x["id"] in wanted and is_answered(x)] for r in (a, b))
    shares = stability_share(first, second, key, policy.higher_is_better(key))
    if shares is None:
        return {}
    per_repeat = repeat_differences(first, second, key)
    return {"stable_share": shares[0], "stable_tasks": shares[1], "repeats": len(per_repeat),
            "repeats_leading": sum(policy.advantage(x, key) > 0 for x in per_repeat),
            "same_sign": bool(mean_diff == 0 or all(np.sign(x) == np.sign(mean_diff)
                                                     for x in per_repeat))}


def _power(differences: list[float], comparisons: int, clustered: bool) -> dict[str, object]:
    """What would decide the pair: the rule's minimum detectable difference over these
    tasks (documents, where tasks share them) and the units the observed difference needs.
    Both are of one quantity, named: the mean paired difference over the units tested."""
    mdd = min_detectable_difference(differences, comparisons)
    observed = abs(float(np.mean(differences))) if differences else 0.0
    out: dict[str, object] = {"mdd": mdd.value, "mdd_why": None if mdd.value else mdd.why,
                              "family": comparisons,
                              "unit": "documents" if clustered else "tasks",
                              "units": len(differences), "observed": observed,
                              "quantity": ("mean of the documents' mean differences"
                                           if clustered else "mean paired difference")}
    if observed and (mdd.value is None or observed < mdd.value):
        needed = tasks_needed(differences, comparisons)
        out |= {"needed": needed.value, "needed_why": None if needed.value else needed.why}
    return out


@register_analysis("family", 0)
def family(inputs: Inputs) -> Analysis:
    """Every test of the verdict's family, and each dataset's best contender on the first
    decision metric."""
    out = Analysis()
    shown = {(d.key, d.first["run_id"], d.second["run_id"]): d
             for part in by_dataset(inputs.sets).values() for k in inputs.keys
             for d in _key_pairs(part, k, inputs.decided)}
    turned = {(d.key, d.first["run_id"], d.second["run_id"]) for d in shown.values()}
    out.claims = [pair_claim(inputs.sets, d, key=True) for d in shown.values()]
    out.claims += [pair_claim(inputs.sets, d) for d in inputs.decided if not turned & {
        (d.key, d.first["run_id"], d.second["run_id"]),
        (d.key, d.second["run_id"], d.first["run_id"])}]
    for name, part in by_dataset(inputs.sets).items():
        out.claims += [_scope(part, k, name, i == 0) for i, k in enumerate(inputs.keys)]
        out.claims += [b for i, k in enumerate(inputs.keys)
                       if (b := _best(part, k, inputs.decided, i == 0, frozenset(
                           frozenset((x, y)) for kk, x, y in turned if kk == k))) is not None]
        untested = _untested(part, [d for d in inputs.decided
                                    if any(d.first is r for r in part.runs)])
        if untested:
            out.claims.append(Claim("no_test", SECTION, metric=", ".join(inputs.keys) or None,
                                    authority=Authority.fixed_sample, key=True,
                                    figures={**untested, "dataset": name}))
    if any(r.get("sequential") for r in inputs.finished):  # the intervals decide, not these
        out.claims = [replace(c, authority=Authority.descriptive, decisive=False,
                              figures={**c.figures, "descriptive": True}) for c in out.claims]
    return out


def _untested(sets: TaskSets, decided: list[Decision]) -> dict[str, object] | None:
    """Why the family tests nothing here (and the most tasks a pair shares), or None when
    some pair is tested."""
    shared = max((d.paired.n for d in decided if d.paired is not None), default=0)
    if not sets.runs:
        return {"reason": "no_runs"}
    if len(policy.contenders(sets.runs)) < 2:
        return {"reason": "one_contender", "contenders": len(policy.contenders(sets.runs))}
    if not any(d.paired is not None for d in decided):
        return {"reason": "no_pairs"}
    if not any(d.paired is not None and d.paired.testable for d in decided):
        return {"reason": "too_few", "shared": shared}
    return None


def _key_pairs(sets: TaskSets, key: str, decided: list[Decision]) -> list[Decision]:
    """The tests the key finding states on ``key``: each agentic run against each baseline;
    in a loop-budget sweep each budget against the largest; otherwise the two best."""
    scored = [r for r in sets.runs if sets.has(r, key)]
    ids = sets.scored_ids(scored, key)
    if not ids:
        return []
    means = _means(sets, scored, key, ids)
    ranked = policy.ranked(policy.contenders(scored), lambda r: means.get(r["run_id"]), key)
    agents, baselines = policy.agent_baselines(scored)
    pairs = [(a, b) for a in agents for b in baselines] or budget_pairs(ranked) or \
        ([(ranked[0], ranked[1])] if len(ranked) > 1 else [])
    return [d for a, b in pairs if (d := find(decided, key, a, b)) is not None]


def _scope(sets: TaskSets, key: str, dataset: str, first: bool) -> Claim:
    """The tasks a decision metric is compared on: how many, whether every compared run
    has the metric, the bounds' means beside them (``first``: on the first metric), and
    why no run has it (the records' commonest null reason)."""
    scored = [r for r in sets.runs if sets.has(r, key)]
    ids = sets.scored_ids(scored, key)
    reasons = [x.get("null_reasons", {}).get(key) for table in sets.tables.values()
               for x in table.values()]
    reasons = [r for r in reasons if r]
    bounds = [[r["run"], float(np.mean(sets.values(r, key, ids)))] for r in scored
              if policy.is_bound(r)] if first and ids else []
    agents = [r for r in scored if policy.contenders([r])]
    return Claim("scope", SECTION, tuple(r["run"] for r in scored), key, n_tasks=len(ids),
                 figures={"dataset": dataset, "every_run": len(scored) == len(sets.runs),
                          "scored": len(scored), "bounds": bounds,
                          "reason": max(set(reasons), key=reasons.count) if reasons else None,
                          "budgets": bool(budget_pairs(agents)) and not policy.agent_baselines(
                              scored)[1],
                          "higher_is_better": policy.higher_is_better(key),
                          "nothing_to_rank": not any(sets.has(r, m) for r in sets.runs
                                                     for m in policy.comparison_order())})


def _best(sets: TaskSets, key: str, decided: list[Decision], key_claim: bool = True,
          stated: frozenset[frozenset[str]] = frozenset()) -> Claim | None:
    """The contender with the best mean on ``key`` over the tasks every contender scored,
    and whether the family declares it ahead of the runner-up (with the rule's power when
    that pair is not among the ``stated`` ones)."""
    scored = policy.contenders([r for r in sets.runs if sets.has(r, key)])
    ids = sets.scored_ids(scored, key)
    if len(scored) < 2 or not ids:
        return None
    means = _means(sets, scored, key, ids)
    ranked = policy.ranked(scored, lambda r: means.get(r["run_id"]), key)
    best, runner_up = ranked[0], ranked[1]
    tied = [r["run"] for r in ranked if means[r["run_id"]] == means[best["run_id"]]]
    power: dict[str, object] = {}
    pair = find(decided, key, best, runner_up)
    if pair is not None and pair.paired is not None and pair.paired.n_untied and \
            frozenset((best["run_id"], runner_up["run_id"])) not in stated:
        ids_pair = sets.pair_ids(best, runner_up, key)
        power = _power(sets.cluster_differences(best, runner_up, key, ids_pair), pair.family,
                       clustered=bool(pair.paired.n_clusters))
    ahead = len(tied) == 1 and any(d.key == key and d.better is best and {d.first["run_id"],
                             d.second["run_id"]} == {best["run_id"], runner_up["run_id"]}
                             for d in decided)
    return Claim("best", SECTION, (best["run"], runner_up["run"]), key,
                 difference=means[best["run_id"]] - means[runner_up["run_id"]],
                 n_tasks=len(ids), rule=RULE, authority=Authority.fixed_sample, key=key_claim,
                 figures={"means": [means[best["run_id"]], means[runner_up["run_id"]]],
                          "tied": tied if len(tied) > 1 else [], "ahead": ahead,
                          "dataset": dataset_of(best), **power})
