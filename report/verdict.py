"""What the sweep report may conclude, and on which tasks.

Every comparison is made on the **common task set**: the tasks every compared run answered
(a run is compared when it answered at least one task). A run that skipped or failed a
task is never ranked against one that answered it. Means over each run's own answered
tasks are shown too, with their own n, but nothing is concluded from them.

A difference is declared only when it is significant (``metrics.stats.Paired``): at least
6 untied pairs, Wilcoxon p < 0.05 and a bootstrap CI that excludes 0; otherwise the report
says "no significant difference" or "too few to test". The key comparison also states its
minimum detectable difference (80% power, 5% significance) and, when the observed
difference is smaller, how many tasks would detect it.

With ``runner.repeats`` a task has several answers per run: every comparison is made on the
task's mean over its answered repeats (``per_task``), so pairs, CIs and tests are over tasks
(a task's repeats stay with it) and K identical repeats give the verdict of one. The answers
themselves stay in ``TaskSets.answers`` for the variance split and the stability of the
verdict (``report.repeats``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metrics import bootstrap_ci
from metrics.aggregate import task_means
from metrics.repeats import STABLE_SHARE, repeat_differences, stability_share
from metrics.stats import (
    ALPHA,
    MIN_UNTIED,
    POWER,
    Paired,
    min_detectable_difference,
    paired_difference,
    tasks_needed,
)
from report import policy

Row = dict[str, Any]
Record = dict[str, Any]


def is_answered(record: Record) -> bool:
    return not record.get("error") and not record.get("skipped")


@dataclass
class TaskSets:
    """The runs a sweep compares and the tasks they all answered."""

    runs: list[Row]  # finished runs that answered at least one task
    left_out: list[Row]  # finished runs that answered none
    tables: dict[str, dict[str, Record]]  # run id -> task id -> record
    common: list[str]  # task ids every compared run answered, in first-seen order
    all_ids: list[str] = field(default_factory=list)  # every task id any run has
    # run id -> every answer record (each repeat its own), for what repeats show
    answers: dict[str, list[Record]] = field(default_factory=dict)

    def values(self, run: Row, key: str, ids: list[str] | None = None) -> list[float]:
        table = self.tables[run["run_id"]]
        return [table[t][key] for t in (self.common if ids is None else ids)
                if table.get(t, {}).get(key) is not None]

    def has(self, run: Row, key: str) -> bool:
        """Whether the run has any ``key`` score (stuffing has no retrieval metric at all)."""
        return any(x.get(key) is not None for x in self.tables[run["run_id"]].values())

    def common_for(self, key: str) -> list[str]:
        """The common task set of one metric: the tasks every compared run that has the
        metric answered. For a metric every run has, this is ``common``; a run with no
        score for it at all (stuffing on retrieval precision) does not shrink it."""
        scored = [r for r in self.runs if self.has(r, key)]
        return [t for t in self.all_ids if scored and all(
            is_answered(self.tables[r["run_id"]].get(t, {"skipped": True})) for r in scored)]

    def scored_ids(self, runs: list[Row], key: str) -> list[str]:
        """Tasks of the metric's common set that every one of ``runs`` has a ``key`` score for."""
        return [t for t in self.common_for(key)
                if all(self.tables[r["run_id"]].get(t, {}).get(key) is not None for r in runs)]

    def pair(self, a: Row, b: Row, key: str, ids: list[str] | None = None) -> Paired | None:
        ids = self.scored_ids([a, b], key) if ids is None else ids
        ta, tb = self.tables[a["run_id"]], self.tables[b["run_id"]]
        return paired_difference([ta[t][key] for t in ids], [tb[t][key] for t in ids])


def per_task(records: list[Record]) -> dict[str, Record]:
    """One record per task id, in first-seen order: a task answered once is its record; one
    with repeats is its first answered repeat with every numeric field replaced by the mean
    over its answered repeats (``metrics.aggregate.task_means``), answered when any is."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r["id"], []).append(r)
    return {task: group[0] if len(group) == 1 else _merged(group)
            for task, group in groups.items()}


def _merged(group: list[Record]) -> Record:
    answered = [r for r in group if is_answered(r)]
    merged = dict((answered or group)[0])
    numeric = {k for r in answered for k, v in r.items()
               if isinstance(v, int | float) and not isinstance(v, bool)} - {"repeat"}
    for key in numeric:
        means = task_means(answered, key)
        merged[key] = means.get(merged["id"])
    merged["n_repeats"] = len(group)
    return merged


def task_sets(finished: list[Row], records_by_run: dict[str, list[Record]]) -> TaskSets:
    tables = {r["run_id"]: per_task(records_by_run.get(r["run_id"], [])) for r in finished}
    runs = [r for r in finished if any(is_answered(x) for x in tables[r["run_id"]].values())]
    left_out = [r for r in finished if r not in runs]
    all_ids = list(dict.fromkeys(t for r in finished for t in tables[r["run_id"]]))
    common = [t for t in all_ids if runs and all(
        is_answered(tables[r["run_id"]].get(t, {"skipped": True})) for r in runs)]
    return TaskSets(runs, left_out, tables, common, all_ids,
                    {r["run_id"]: records_by_run.get(r["run_id"], []) for r in finished})


def task_set_section(sets: TaskSets) -> str:
    """How many tasks each run answered, and the common set every comparison uses."""
    lines = [f"There are **{len(sets.common)} tasks every compared run answered** (of "
             f"{len(sets.all_ids)} in the sweep). Every comparison below (key finding, paired "
             "tests, wins and losses, examples, the quality table, the plots, the console and "
             "the parent run's metrics) is made, for each metric, on the tasks every run that "
             "has the metric answered: a metric some runs have no score for at all (stuffing "
             "retrieves nothing) is compared among the runs that have it, so their skips do "
             "not shrink it. Where that set is not every task, its n is shown.\n"]
    rows = []
    for r in sets.runs + sets.left_out:
        recs = list(sets.tables[r["run_id"]].values())
        rows.append([r["run"], len(recs), sum(is_answered(x) for x in recs),
                     sum(bool(x.get("skipped")) for x in recs),
                     sum(bool(x.get("error")) for x in recs),
                     "yes" if r in sets.runs else "no: answered no task"])
    lines.append(table(["run", "tasks", "answered", "skipped", "errored", "compared"], rows))
    return "\n".join(lines)


SMALL_N = 10  # fewer pairs than this: a percentile-bootstrap CI is not to be trusted


def _nothing_to_rank(sets: TaskSets) -> str:
    """When no run has any comparison score: why no system is ranked, and what would give
    one (documents without references, gold passages or a judge)."""
    if any(sets.has(r, m) for r in sets.runs for m in policy.comparison_order()):
        return ""
    return (" No run has any quality score to rank on, so no system is ranked: a judge "
            "(`judge=claude-haiku-4-5`, or an OpenAI-compatible judge) scores faithfulness "
            "without references; reference summaries give ROUGE, BERTScore and G-Eval coverage; "
            "gold passages give retrieval precision and recall (`tasks.jsonl`, "
            "docs/your-documents.md). What needs none of them (citations, numeric precision, "
            "context, cost, latency) is compared in the report.")


def key_finding(sets: TaskSets, key: str, reason: str = "") -> str:
    """The verdict: each agentic run against each baseline (or, without that split, the two
    best contenders) on ``key``, each pair with n, difference, CI and significance; then the
    best contender, the bounds beside them, and what a task costs."""
    scored = [r for r in sets.runs if sets.has(r, key)]
    if not sets.runs:
        return "No run answered any task: nothing to compare." + _spent_sentence(sets.left_out)
    if not scored:
        return f"No run has `{key}` scores{reason}." + _nothing_to_rank(sets)
    ids = sets.scored_ids(scored, key)
    if not ids:
        return ("No task was answered by every compared run, so no run is ranked; each run's "
                "own means are in the Quality section.")
    means = {r["run_id"]: float(np.mean(sets.values(r, key, ids))) for r in scored}
    ranked = policy.ranked_by_mean(policy.contenders(scored), means, key)
    if len(scored) == len(sets.runs):
        head = f"On the **{len(ids)} tasks** every compared run answered and has `{key}` for"
    else:
        names = ", ".join(r["run"] for r in scored)
        head = f"On the **{len(ids)} tasks** every run with `{key}` ({names}) answered"
    parts = [f"{head} ({direction(key)}):"]
    agents, baselines = policy.agent_baselines(scored)
    pairs = [(a, b) for a in agents for b in baselines] or \
        ([(ranked[0], ranked[1])] if len(ranked) > 1 else [])
    parts += [f"- {pair_sentence(sets, a, b, key, means)}" for a, b in pairs]
    parts.append(f"- {_best_sentence(sets, ranked, key, means)}")
    bounds = [r for r in scored if policy.is_bound(r)]
    if bounds:
        parts.append("- Bounds (reference points, never ranked): " + "; ".join(
            f"{r['run']} {means[r['run_id']]:.3f}" for r in bounds) + ".")
    parts.append(f"- {cost_sentence(ranked + bounds)}")
    return "\n".join(parts) + _spent_sentence(sets.left_out)


def direction(key: str) -> str:
    return "higher is better" if policy.higher_is_better(key) else "lower is better"


def pair_sentence(sets: TaskSets, a: Row, b: Row, key: str, means: dict[str, float]) -> str:
    """One comparison: the two means on the tasks both have a score for, their paired
    difference with its CI, the test and what it says."""
    ids = sets.scored_ids([a, b], key)
    res = sets.pair(a, b, key, ids)
    ma, mb = (float(np.mean(sets.values(r, key, ids))) if ids else means[r["run_id"]]
              for r in (a, b))
    text = f"**{_name(a)}** vs **{_name(b)}** (n={len(ids)}): {ma:.3f} vs {mb:.3f}"
    if res is None:
        return f"{text}; too few tasks for a paired comparison."
    text += (f", difference {res.mean_diff:+.3f}, 95% CI [{res.ci_low:.3f}, {res.ci_high:.3f}]"
             + small_n_note(res.n))
    if res.testable:
        text += f", Wilcoxon p={res.p_text()} over {res.n_untied} untied pairs"
    if res.significant:
        better = a if policy.advantage(res.mean_diff, key) > 0 else b
        return (f"{text}: **significant**, {better['run']} is better."
                + stability_note(sets, a, b, key, ids, res.mean_diff))
    if not res.testable:
        return (f"{text}: **too few to test** (only {res.n_untied} pairs differ, at least "
                f"{MIN_UNTIED} are needed).")
    why = "the CI includes 0" if res.ci_includes_zero else f"p ≥ {ALPHA}"
    return (f"{text}: **no significant difference** ({why})."
            + stability_note(sets, a, b, key, ids, res.mean_diff))


def stability_note(sets: TaskSets, a: Row, b: Row, key: str, ids: list[str],
                   mean_diff: float) -> str:
    """With repeats: whether the pair's winner holds in every repeat taken alone, and the
    share of tasks whose winner holds in at least 80% of their repeats; empty with one."""
    wanted = set(ids)
    first, second = ([x for x in sets.answers.get(r["run_id"], [])
                      if x["id"] in wanted and is_answered(x)] for r in (a, b))
    shares = stability_share(first, second, key, policy.higher_is_better(key))
    if shares is None:
        return ""
    share, counted = shares
    tasks = (f" On {share:.0%} of the {counted} tasks the winner is the same in at least "
             f"{STABLE_SHARE:.0%} of the repeats.")
    per_repeat = repeat_differences(first, second, key)
    leads = sum(policy.advantage(d, key) > 0 for d in per_repeat)
    if mean_diff == 0 or all(np.sign(d) == np.sign(mean_diff) for d in per_repeat):
        return f" Each of the {len(per_repeat)} repeats alone gives the same sign.{tasks}"
    return (f" **The winner is not stable across repeats**: {a['run']} leads in {leads} of "
            f"{len(per_repeat)} repeats taken alone.{tasks}")


def _name(run: Row) -> str:
    """A run's name in a comparison; an agent that called no tool is named as what it was."""
    return f"{run['run']} (called no tool: closed-book)" if policy.void_agent(run) else run["run"]


def small_n_note(n: int, unit: str = "pairs") -> str:
    """Said beside a CI over fewer than ``SMALL_N`` pairs (or tasks)."""
    return (f" (small n: a bootstrap CI over {n} {unit} is unreliable)" if n < SMALL_N else "")


def _best_sentence(sets: TaskSets, ranked: list[Row], key: str, means: dict[str, float]) -> str:
    if not ranked:
        return "Only bounds are scored: no contender to name."
    best = ranked[0]
    if len(ranked) == 1:
        return f"Best: **{best['run']}** ({means[best['run_id']]:.3f}), the only contender scored."
    runner_up = ranked[1]
    res = sets.pair(best, runner_up, key)
    if res is not None and res.significant and policy.advantage(res.mean_diff, key) > 0:
        return (f"Best: **{best['run']}** ({means[best['run_id']]:.3f}), significantly ahead "
                f"of {runner_up['run']}. {power_sentence(res)}")
    tail = f" {power_sentence(res)}" if res is not None else ""
    return (f"Best mean: {best['run']} ({means[best['run_id']]:.3f}), but not significantly "
            f"ahead of {runner_up['run']}: no winner is declared.{tail}")


def power_sentence(res: Paired) -> str:
    """The minimum detectable difference at the observed spread and n, and the tasks the
    observed difference would need when it is smaller."""
    mdd = min_detectable_difference(res.sd_diff, res.n)
    if mdd is None:
        return ("The paired differences have no spread, so no minimum detectable difference "
                "can be computed.")
    text = (f"With {res.n} tasks and an SD of paired differences of {res.sd_diff:.3f}, the "
            f"**minimum detectable difference** is {mdd:.3f} ({POWER:.0%} power, {ALPHA:.0%} "
            "significance, paired t-test).")
    observed = abs(res.mean_diff)
    if observed == 0:
        text += " The observed difference is 0: no number of tasks would detect it."
    elif observed < mdd:
        needed = tasks_needed(observed, res.sd_diff)
        text += (f" The observed difference ({observed:.3f}) is smaller: detecting it would "
                 + (f"take about {int(np.ceil(needed)):,} tasks." if needed is not None
                    else "take more than 10,000,000 tasks."))
    return text


def task_cost(run: Row) -> float | None:
    """What a task costs the run: spend over every task it ran (errored ones included), as
    if no call had come from the response cache, so a cached neighbour does not look free."""
    cost = run.get("cost_usd_uncached_per_task")
    return cost if cost is not None else run.get("cost_usd_per_task")


def spent(run: Row) -> float | None:
    """What a run's systems actually paid: every paid call as journaled when it returned
    (``cost_usd_spent_total``: tasks in flight at a kill, errored tasks predicted again and
    chunk contexts included); a run with no journal, what its records count."""
    journaled = run.get("cost_usd_spent_total")
    return journaled if journaled is not None else run.get("cost_usd_total")


def judge_spent(run: Row) -> float | None:
    """What a run's judges actually paid over every attempt of the run, panel and samples
    included (``judge_cost_usd_spent_total``: calls made before a kill included); a run
    logged without it, what its last attempt's judge calls cost."""
    journaled = run.get("judge_cost_usd_spent_total")
    return journaled if journaled is not None else run.get("judge_cost_usd_total")


def cost_sentence(runs: list[Row]) -> str:
    parts = [f"{r['run']} ${task_cost(r) or 0.0:.5f} (spent ${r.get('cost_usd_per_task') or 0.0:.5f}"
             f"; P50 {r.get('latency_ms_p50') or 0.0:.0f} ms)" for r in runs]
    judge = sum(judge_spent(r) or 0.0 for r in runs)
    return ("Cost per task (every task run, errored included; without the response cache, "
            "actual spend in brackets): " + "; ".join(parts) + "."
            + (f" The judge cost ${judge:.4f} in all." if judge else ""))


def _spent_sentence(left_out: list[Row]) -> str:
    return "".join(f" {r['run']} answered no task but spent ${spent(r) or 0.0:.5f}."
                   for r in left_out if (spent(r) or 0.0) > 0)


def paired_section(sets: TaskSets, key: str) -> str:
    rows = []
    for a, b in itertools.combinations(sets.runs, 2):
        res = sets.pair(a, b, key)
        if res is not None:
            rows.append([f"{a['run']} vs {b['run']}", res.n, res.n_untied, res.mean_diff,
                         f"[{res.ci_low:.3f}, {res.ci_high:.3f}]", res.p_text(),
                         f"{res.wins}/{res.losses}/{res.ties}", res.verdict()])
    intro = (f"On `{key}`, over the common tasks both runs have a score for: mean difference "
             "(first minus second) with a paired bootstrap 95% CI (2,000 resamples) and a "
             "two-sided Wilcoxon signed-rank p-value over the untied pairs (ties carry no sign "
             f"and are dropped; with fewer than {MIN_UNTIED} untied pairs no test can reach "
             "0.05). Significant: p < 0.05 and the CI excludes 0.\n\n")
    if not rows:
        return intro + "Fewer than two runs share two scored common tasks.\n"
    return intro + table(["pair", "pairs", "untied", "mean diff", "95% CI", "Wilcoxon p",
                          "wins/losses/ties", "verdict"], rows)


def common_rows(sets: TaskSets, metrics: list[str]) -> list[Row]:
    """Each compared run's row with each metric's mean and CI over that metric's common
    task set (``TaskSets.common_for``) and its n (``<metric>_n``): what the quality table,
    the comparison plot, the console and the parent run's metrics show."""
    out = []
    for r in sets.runs:
        row = {k: v for k, v in r.items() if not k.endswith(("_mean", "_ci_low", "_ci_high"))}
        for m in metrics:
            values = sets.values(r, m, sets.common_for(m))
            if values:
                row[f"{m}_mean"] = float(np.mean(values))
                row[f"{m}_n"] = len(values)
                ci = bootstrap_ci(values)
                if ci is not None:
                    row[f"{m}_ci_low"], row[f"{m}_ci_high"] = ci
        out.append(row)
    return out


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


HEADLINE_SCORES = ("retrieval_recall",)  # shown beside the comparison metric


def headline_rows(sets: TaskSets, finished: list[Row], key: str) -> list[Row]:
    """What the console and the parent run show per run, best first (``report.policy``;
    bounds after the contenders, runs that answered nothing last): the comparison metric
    and retrieval recall on their common task sets with their n (``<metric>_n``), its cost
    per task over every task run (without the response cache, and what was spent), and
    latency. ``<metric>_n_all``: the size of the full set, to say when n is smaller."""
    common = {r["run_id"]: r for r in common_rows(sets, [key, *HEADLINE_SCORES])}
    rows = []
    for run in finished:
        row = {k: v for k, v in run.items() if not k.endswith(("_mean", "_ci_low", "_ci_high"))}
        row.update({k: v for k, v in common.get(run["run_id"], {}).items()
                    if k.endswith(("_mean", "_n"))})
        row["cost_per_task"] = task_cost(run)
        row["n_all"] = len(sets.all_ids)
        rows.append(row)
    ranked = policy.ranked(policy.contenders(rows), lambda r: r.get(f"{key}_mean"), key)
    return ranked + [r for r in rows if r not in ranked]
