"""What the sweep report may conclude, and on which tasks.

Every comparison is made on the **common task set**: the tasks every compared run answered
(a run is compared when it answered at least one task). A run that skipped or failed a
task is never ranked against one that answered it. Means over each run's own answered
tasks are shown too, with their own n, but nothing is concluded from them.

The verdict decides on the metrics ``report.decide_on`` names (``report.policy``). Each is
tested on every pair of contenders that has it (``decisions``), and the p-values of that
whole family are adjusted for the number of comparisons (Holm). A difference is declared
only when it is significant (``Decision.significant``): at least 6 untied pairs, the
**adjusted** Wilcoxon p < 0.05 and a bootstrap CI that excludes 0; otherwise the report
says "no significant difference" (naming which of the two failed) or "too few to test".
Each comparison the key finding makes also states the minimum detectable difference of
this very rule (80% power; simulated from the pair's own differences, Holm at its worst case
for the family's size: ``metrics.stats.min_detectable_difference``) and, when the observed
difference is smaller, how many tasks the rule would need to declare it.

With ``runner.repeats`` a task has several answers per run: every comparison is made on the
task's mean over its answered repeats (``per_task``), so pairs, CIs and tests are over tasks
(a task's repeats stay with it) and K identical repeats give the verdict of one. The answers
themselves stay in ``TaskSets.answers`` for the variance split and the stability of the
verdict (``report.repeats``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from metrics import bootstrap_ci
from metrics.aggregate import task_means
from metrics.repeats import STABLE_SHARE, repeat_differences, stability_share
from metrics.stats import (
    ALPHA,
    MIN_UNTIED,
    POWER,
    SIMULATIONS,
    Paired,
    cluster_means,
    clusters_of,
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
        table = self.tables.get(run["run_id"], {})
        return [table[t][key] for t in (self.common if ids is None else ids)
                if table.get(t, {}).get(key) is not None]

    def has(self, run: Row, key: str) -> bool:
        """Whether the run has any ``key`` score (stuffing has no retrieval metric at all)."""
        return any(x.get(key) is not None for x in self.tables.get(run["run_id"], {}).values())

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

    def pair_ids(self, a: Row, b: Row, key: str) -> list[str]:
        """The tasks a pair is compared on: every task both its runs answered and scored,
        whatever other runs of the sweep did (a third run's skips never shrink it)."""
        return [t for t in self.all_ids if all(
            is_answered(self.tables[r["run_id"]].get(t, {"skipped": True}))
            and self.tables[r["run_id"]][t].get(key) is not None for r in (a, b))]

    def pair(self, a: Row, b: Row, key: str, ids: list[str] | None = None) -> Paired | None:
        ids = self.pair_ids(a, b, key) if ids is None else ids
        ta, tb = self.tables[a["run_id"]], self.tables[b["run_id"]]
        return paired_difference([ta[t][key] for t in ids], [tb[t][key] for t in ids],
                                 clusters=self.clusters(ids))

    def clusters(self, ids: Sequence[str]) -> list[int] | None:
        """Each task's document cluster (tasks sharing a document share one), from the
        records' ``doc_ids``; None where a record does not say its documents."""
        return clusters_of([next((table[t]["doc_ids"] for table in self.tables.values()
                                  if t in table and table[t].get("doc_ids")), None)
                            for t in ids])

    def cluster_differences(self, a: Row, b: Row, key: str, ids: list[str]) -> list[float]:
        """The paired differences the test is made on: per task, or per document cluster
        (its tasks' mean) where tasks share documents."""
        diff = np.asarray(self.differences(a, b, key, ids), dtype=float)
        clusters = self.clusters(ids)
        if clusters is None or len(set(clusters)) == len(ids):
            return list(diff)
        return list(cluster_means(diff, np.asarray(clusters)))

    def differences(self, a: Row, b: Row, key: str, ids: list[str]) -> list[float]:
        """``a``'s score minus ``b``'s on each of ``ids``."""
        ta, tb = self.tables[a["run_id"]], self.tables[b["run_id"]]
        return [ta[t][key] - tb[t][key] for t in ids]


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


def dataset_of(run: Row) -> str:
    """The dataset a run answered (``dataset.name``; "" for a run that does not say)."""
    return str(run.get("dataset") or "")


def by_dataset(sets: TaskSets) -> dict[str, TaskSets]:
    """The sweep's task sets, one per dataset its runs answered (``dataset_of``): every
    comparison is made within one, so a task is only ever paired with itself, never with
    another dataset's task (even one of the same id). One dataset: ``{name: sets}``."""
    names = list(dict.fromkeys(dataset_of(r) for r in sets.runs + sets.left_out))
    if len(names) <= 1:
        return {names[0] if names else "": sets}
    return {name: task_sets([r for r in sets.runs + sets.left_out if dataset_of(r) == name],
                            sets.answers) for name in names}


def each_dataset(sets: TaskSets, render: Callable[[TaskSets], str]) -> str:
    """``render`` of the sweep's tasks, or, over several datasets, of each dataset's in turn
    under its name."""
    parts = by_dataset(sets)
    if len(parts) == 1:
        return render(sets)
    shown = {name: text for name, part in parts.items() if (text := render(part).strip())}
    return "\n\n".join(f"**Dataset `{name}`** ({', '.join(r['run'] for r in parts[name].runs)}):"
                       f"\n{text}" for name, text in shown.items()) + ("\n" if shown else "")


@dataclass(frozen=True)
class Decision:
    """One test of the verdict's family: ``first`` against ``second`` on ``key``, over the
    tasks both answered and have a score for, with its p-value adjusted over the family."""

    key: str
    first: Row
    second: Row
    paired: Paired | None  # None: fewer than two pairs
    p_adjusted: float | None = None  # None: untestable (too few untied pairs)
    family: int = 1  # how many tests were adjusted together

    @property
    def significant(self) -> bool:
        return (self.paired is not None and self.p_adjusted is not None
                and self.p_adjusted < ALPHA and not self.paired.ci_includes_zero)

    @property
    def better(self) -> Row | None:
        """The significantly better run, or None."""
        if not self.significant or self.paired is None:
            return None
        return self.first if policy.advantage(self.paired.mean_diff, self.key) > 0 else \
            self.second

    def p_words(self) -> str:
        """The raw p, and the adjusted p when more than one test was made."""
        assert self.paired is not None and self.paired.p is not None
        if self.family == 1:
            return f"p={self.paired.p_text()}"
        return (f"p={self.paired.p_text()}, {policy.CORRECTION}-adjusted over {self.family} "
                f"comparisons p={self.p_adjusted:.3g}")

    def verdict(self) -> str:
        if self.paired is None or not self.paired.testable:
            return "too few to test"
        return "significant" if self.significant else "no significant difference"

    def why_not(self) -> str:
        """Why a testable difference is not declared, in words that match both figures: the
        test decides together with the CI, and both are named."""
        assert self.paired is not None
        rejects = self.p_adjusted is not None and self.p_adjusted < ALPHA
        p = "adjusted p" if self.family > 1 else "p"
        if not rejects and self.paired.ci_includes_zero:
            return f"the test does not reject ({p} ≥ {ALPHA}) and the CI includes 0"
        if not rejects:
            return (f"the test does not reject ({p} ≥ {ALPHA}); the CI excludes 0, but a "
                    "difference needs both")
        return (f"the test rejects ({p} < {ALPHA}) but the CI includes 0; a difference needs "
                "both")


def compared_pairs(sets: TaskSets, key: str) -> list[tuple[Row, Row]]:
    """Every pair of contenders with ``key`` scores, an agentic run first (bounds are never
    decided on)."""
    runs = policy.contenders([r for r in sets.runs if sets.has(r, key)])
    return [(b, a) if b.get("agentic") and not a.get("agentic") else (a, b)
            for a, b in itertools.combinations(runs, 2)]


def decisions(sets: TaskSets, keys: Sequence[str]) -> list[Decision]:
    """The verdict's family: each metric of ``keys`` on every compared pair of the same
    dataset (``by_dataset``), each pair on the tasks both its runs answered and scored,
    p-values adjusted over the whole family (every dataset's tests together)."""
    raw = [Decision(key, a, b, part.pair(a, b, key)) for part in by_dataset(sets).values()
           for key in keys for a, b in compared_pairs(part, key)]
    adjusted = policy.adjusted([d.paired.p if d.paired else None for d in raw])
    family = sum(p is not None for p in adjusted)
    return [replace(d, p_adjusted=p, family=max(family, 1)) for d, p in zip(raw, adjusted,
                                                                             strict=True)]


def find(decided: Sequence[Decision], key: str, a: Row, b: Row) -> Decision | None:
    """The family's test of ``a`` and ``b`` on ``key`` (in either order), turned so that
    ``a`` is first."""
    for d in decided:
        if d.key == key and d.first is a and d.second is b:
            return d
        if d.key == key and d.first is b and d.second is a and d.paired is None:
            return replace(d, first=a, second=b)
        if d.key == key and d.first is b and d.second is a and d.paired is not None:
            p = d.paired
            turned = replace(p, mean_diff=-p.mean_diff, ci_low=-p.ci_high, ci_high=-p.ci_low,
                             wins=p.losses, losses=p.wins)
            return replace(d, first=a, second=b, paired=turned)
    return None


MOST_NAMED = 3  # decided differences named in the one-line answer; the rest are counted


def answer(sets: TaskSets, keys: Sequence[str], decided: Sequence[Decision]) -> str:
    """The question answered in one sentence, before any caveat or figure: who is
    significantly better than whom on what (the family's rule: adjusted p and CI), or that
    nothing was decided and why."""
    if not sets.runs:
        return "Nothing decided: no run answered any task."
    parts = by_dataset(sets)
    if len(parts) > 1:  # each dataset's answer, from its own tests
        return " ".join(f"On `{name}`: " + answer(part, keys, [
            d for d in decided if any(d.first is r for r in part.runs)])
            for name, part in parts.items())
    wins = [d for d in decided if d.better is not None]
    if wins:
        named = "; ".join(_win_words(d) for d in wins[:MOST_NAMED])
        more = f" and {len(wins) - MOST_NAMED} more" if len(wins) > MOST_NAMED else ""
        rest = len(decided) - len(wins)
        return (f"Decided: {named}{more}" + (f"; the other {rest} comparison(s) decide "
                                              "nothing" if rest else "")
                + f" ({_family_words(decided)}).")
    metrics = ", ".join(keys)
    contenders = policy.contenders(sets.runs)
    if len(contenders) < 2:
        return (f"Nothing decided: {len(contenders)} contender(s) answered, so there is no "
                "pair to compare.")
    if not any(d.paired is not None for d in decided):
        return f"Nothing decided: no two contenders have two scored tasks in common on {metrics}."
    shared = [d.paired.n for d in decided if d.paired is not None]
    if not any(d.paired is not None and d.paired.testable for d in decided):
        return (f"Nothing decided on {metrics}: too few tasks to test (at most {max(shared)} "
                f"shared; a test needs {MIN_UNTIED} that differ).")
    return (f"Nothing decided on {metrics}: no difference between "
            f"{', '.join(r['run'] for r in contenders)} is significant "
            f"({_family_words(decided)}, {_span(shared)} shared tasks"
            + (", small n" if min(shared) < SMALL_N else "") + ").")


def _span(counts: list[int]) -> str:
    """``24`` when every pair shares as many tasks, else ``9-24``."""
    low, high = min(counts), max(counts)
    return f"{low}" if low == high else f"{low}-{high}"


def _win_words(d: Decision) -> str:
    assert d.paired is not None and d.better is not None
    loser = d.second if d.better is d.first else d.first
    small = ", small n" if d.paired.n < SMALL_N else ""
    return (f"{d.better['run']} beats {loser['run']} on {d.key} "
            f"(by {abs(d.paired.mean_diff):.3f}, n={n_words(d.paired.n, d.paired)}{small})")


def _family_words(decided: Sequence[Decision]) -> str:
    family = max((d.family for d in decided), default=1)
    return (f"{policy.CORRECTION}-adjusted over {family} tests" if family > 1
            else "one test")


def task_set_section(sets: TaskSets) -> str:
    """How many tasks each run answered, and the common set every comparison uses."""
    parts = by_dataset(sets)
    head = (f"There are **{len(sets.common)} tasks every compared run answered** (of "
            f"{len(sets.all_ids)} in the sweep)." if len(parts) == 1 else
            f"The sweep ran on **{len(parts)} datasets**, each compared on its own: a run is "
            "compared only with the runs of its dataset, task by task, never with another "
            "dataset's tasks. Tasks every compared run of a dataset answered: " + "; ".join(
                f"`{name}` **{len(part.common)}** of {len(part.all_ids)}"
                for name, part in parts.items()) + ".")
    lines = [f"{head} Every comparison below (key finding, paired "
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


def key_finding(sets: TaskSets, keys: str | Sequence[str],
                reasons: Mapping[str, str] | None = None,
                decided: Sequence[Decision] | None = None) -> str:
    """The verdict on each decision metric of ``keys`` (``report.decide_on``, first the main
    one): each agentic run against each baseline (or, without that split, the two best
    contenders), each pair with n, difference, CI and its test from the family
    ``decided`` (``decisions``); then the best contender, the bounds beside them (on the
    first metric), and what a task costs."""
    keys = [keys] if isinstance(keys, str) else list(keys)
    reasons = reasons or {}
    if not sets.runs:
        return "No run answered any task: nothing to compare." + _spent_sentence(sets.left_out)
    decided = decisions(sets, keys) if decided is None else decided
    if len(by_dataset(sets)) > 1:  # each dataset's runs compared among themselves
        return each_dataset(sets, lambda part: key_finding(part, keys, reasons, decided))
    blocks = [_metric_block(sets, key, reasons.get(key, ""), decided, bounds=i == 0)
              for i, key in enumerate(keys)]
    ranked = policy.contenders([r for r in sets.runs if sets.has(r, keys[0])]) or sets.runs
    cost = f"- {cost_sentence(sets, ranked + [r for r in sets.runs if policy.is_bound(r)])}"
    return "\n".join([*blocks, cost]) + _spent_sentence(sets.left_out)


def _metric_block(sets: TaskSets, key: str, reason: str, decided: Sequence[Decision],
                  bounds: bool) -> str:
    """The finding on one decision metric: its pairs, its best contender and (``bounds``)
    the bounds beside them."""
    scored = [r for r in sets.runs if sets.has(r, key)]
    if not scored:
        return f"No run has `{key}` scores{reason}." + _nothing_to_rank(sets)
    ids = sets.scored_ids(scored, key)
    if not ids:
        return (f"On `{key}`: no task was answered by every compared run, so no run is "
                "ranked; each run's own means are in the Quality section.")
    means = {r["run_id"]: float(np.mean(sets.values(r, key, ids))) for r in scored}
    ranked = policy.ranked_by_mean(policy.contenders(scored), means, key)
    if len(scored) == len(sets.runs):
        head = f"On the **{len(ids)} tasks** every compared run answered and has `{key}` for"
    else:
        names = ", ".join(r["run"] for r in scored)
        head = f"On the **{len(ids)} tasks** every run with `{key}` ({names}) answered"
    parts = [f"{head} ({direction(key)}):"]
    agents, baselines = policy.agent_baselines(scored)
    budgets = budget_pairs(ranked)
    pairs = [(a, b) for a in agents for b in baselines] or budgets or \
        ([(ranked[0], ranked[1])] if len(ranked) > 1 else [])
    parts += [f"- {pair_sentence(sets, find(decided, key, a, b), a, b, key, means)}"
              for a, b in pairs]
    if budgets:
        parts.append(f"- {BUDGET_NOTE}")
    parts.append(f"- {_best_sentence(sets, ranked, key, means, decided, pairs)}")
    shown = [r for r in scored if policy.is_bound(r)] if bounds else []
    if shown:
        parts.append("- Bounds (reference points, never ranked): " + "; ".join(
            f"{r['run']} {means[r['run_id']]:.3f}" for r in shown) + ".")
    return "\n".join(parts)


def direction(key: str) -> str:
    return "higher is better" if policy.higher_is_better(key) else "lower is better"


# what a loop count means (arag/agent/loop.py): the budget, then a forced answer call
LOOPS_NOTE = ("`max_loops` is the budget of model calls that may use tools; an agent that "
              "spends it makes one more call, without tools, to answer, so its `loops` is then "
              "max_loops + 1.")
BUDGET_NOTE = ("Every budget is compared with the largest above; the loop-budget curve "
               "(`plots/loop_budget_curve.png`, section \"Retrieval and the loop budget\") "
               f"draws them all. {LOOPS_NOTE}")


def budget_pairs(runs: list[Row]) -> list[tuple[Row, Row]]:
    """A loop-budget sweep (every contender agentic, each with its own ``max_loops``): each
    budget against the largest, smallest first; any other sweep: none."""
    budgets = {r.get("max_loops") for r in runs}
    if len(runs) < 2 or not all(r.get("agentic") for r in runs) or len(budgets) != len(runs) \
            or not all(str(b).isdigit() for b in budgets):
        return []
    ordered = sorted(runs, key=lambda r: int(r["max_loops"]))
    return [(r, ordered[-1]) for r in ordered[:-1]]


def pair_sentence(sets: TaskSets, decision: Decision | None, a: Row, b: Row, key: str,
                  means: dict[str, float]) -> str:
    """One comparison: the two means on the tasks both have a score for, their paired
    difference with its CI, the test (raw and adjusted p) and what it decides."""
    ids = sets.pair_ids(a, b, key)
    ma, mb = (float(np.mean(sets.values(r, key, ids))) if ids else means[r["run_id"]]
              for r in (a, b))
    res = decision.paired if decision is not None else None
    text = (f"**{_name(a)}** vs **{_name(b)}** (n={n_words(len(ids), res)}"
            f"{shrunk(sets, a, b, ids)}): {ma:.3f} vs {mb:.3f}")
    if decision is None or res is None:
        return f"{text}; too few tasks for a paired comparison."
    if res.n_untied == 0:
        return f"{text}: **a tie**, identical on all {res.n} tasks."
    text += (f", difference {res.mean_diff:+.3f}, 95% CI [{res.ci_low:.3f}, {res.ci_high:.3f}]"
             + small_n_note(res.n))
    if res.testable:
        untied = "documents' mean differences" if res.n_clusters else "pairs"
        text += f", Wilcoxon {decision.p_words()} over {res.n_untied} untied {untied}"
    power = " " + power_sentence(sets.cluster_differences(a, b, key, ids), decision.family,
                                 "documents" if res.n_clusters else "tasks")
    better = decision.better
    if better is not None:
        return (f"{text}: **significant**, {better['run']} is better."
                + stability_note(sets, a, b, key, ids, res.mean_diff) + power)
    if not res.testable:
        return (f"{text}: **too few to test** (only {res.n_untied} pairs differ, at least "
                f"{MIN_UNTIED} are needed)." + stability_note(sets, a, b, key, ids, res.mean_diff)
                + power)
    return (f"{text}: **no significant difference** ({decision.why_not()})."
            + stability_note(sets, a, b, key, ids, res.mean_diff) + power)


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


CONTEXT_SETTING = "model.context_limit"  # what a "exceeds the model's context" skip names


def shrunk(sets: TaskSets, a: Row, b: Row, ids: list[str]) -> str:
    """Said beside a pair's n when it is not every task: which set it is, and what shrank
    it (each run's skips with their commonest reason, the config setting named)."""
    if len(ids) == len(sets.all_ids):
        return ""
    whys = []
    for run in (a, b):
        records = [sets.tables[run["run_id"]].get(t, {}) for t in sets.all_ids]
        skipped = [x for x in records if x.get("skipped")]
        errored = sum(bool(x.get("error")) for x in records)
        if skipped:
            reason = max(set(r := [x.get("skip_reason") or "no reason given" for x in skipped]),
                         key=r.count)
            setting = f", `{CONTEXT_SETTING}`" if "context" in reason else ""
            whys.append(f"{run['run']} skipped {len(skipped)} ({reason}{setting})")
        if errored:
            whys.append(f"{run['run']} errored on {errored}")
    why = "; ".join(whys) or "the rest lack a score"
    return f" of {len(sets.all_ids)}: the tasks both answered; {why}"



def _name(run: Row) -> str:
    """A run's name in a comparison; an agent that called no tool is named as what it was."""
    return f"{run['run']} (called no tool: closed-book)" if policy.void_agent(run) else run["run"]


def small_n_note(n: int, unit: str = "pairs") -> str:
    """Said beside a CI over fewer than ``SMALL_N`` pairs (or tasks)."""
    return (f" (small n: a bootstrap CI over {n} {unit} is unreliable)" if n < SMALL_N else "")


def _best_sentence(sets: TaskSets, ranked: list[Row], key: str, means: dict[str, float],
                   decided: Sequence[Decision], pairs: Sequence[tuple[Row, Row]]) -> str:
    """The best contender, and whether it is significantly ahead of the runner-up (with the
    rule's power when that pair has no line of its own among ``pairs``)."""
    if not ranked:
        return "Only bounds are scored: no contender to name."
    best = ranked[0]
    if len(ranked) == 1:
        return f"Best: **{best['run']}** ({means[best['run_id']]:.3f}), the only contender scored."
    runner_up = ranked[1]
    tied = [r["run"] for r in ranked if means[r["run_id"]] == means[best["run_id"]]]
    if len(tied) > 1:  # an exact tie has no best: naming one would pick by the sort order
        return (f"No best mean: {', '.join(tied)} tie at {means[best['run_id']]:.3f}: no "
                "winner is declared.")
    decision = find(decided, key, best, runner_up)
    res = decision.paired if decision is not None else None
    power = ""
    if res is not None and res.n_untied and not any({id(best), id(runner_up)} == {id(a), id(b)}
                                                    for a, b in pairs):
        ids = sets.pair_ids(best, runner_up, key)
        power = " " + power_sentence(sets.cluster_differences(best, runner_up, key, ids),
                                     decision.family if decision else 1,
                                     "documents" if res.n_clusters else "tasks")
    if decision is not None and res is not None and decision.better is best:
        return (f"Best: **{best['run']}** ({means[best['run_id']]:.3f}), significantly ahead "
                f"of {runner_up['run']}.{power}")
    return (f"Best mean: {best['run']} ({means[best['run_id']]:.3f}), but not significantly "
            f"ahead of {runner_up['run']}: no winner is declared.{power}")


RULE_WORDS = (f"Holm-adjusted Wilcoxon with a bootstrap CI, simulated from the observed "
              f"differences, {SIMULATIONS:,} resamples")


def n_words(n: int, paired: Paired | None) -> str:
    """A pair's n: its tasks, and the documents they read where tasks share one."""
    if paired is None or not paired.n_clusters:
        return str(n)
    return f"{n} tasks on {paired.n_clusters} documents"


def power_sentence(differences: Sequence[float], comparisons: int, unit: str = "tasks") -> str:
    """The minimum detectable difference of the rule the verdict applies, over a pair's own
    tasks (or documents, ``unit``, where tasks share them: the differences are then each
    document's mean) and family, and how many its observed difference would need."""
    holm = f"; Holm at its worst case, p < {ALPHA}/{comparisons}" if comparisons > 1 else ""
    rule = f"the rule that decides ({RULE_WORDS}{holm})"
    mdd = min_detectable_difference(differences, comparisons)
    cannot = f"The **minimum detectable difference** of {rule} cannot be computed: {mdd.why}."
    if not mdd.defined:
        return cannot
    if mdd.value is None:
        text = cannot
    else:
        text = (f"The **minimum detectable difference** over these {len(differences)} {unit} "
                f"is {mdd.value:.3f}: the smallest true difference {rule} declares with "
                f"{POWER:.0%} power.")
    observed = abs(float(np.mean(differences)))
    if observed == 0:
        return text + " The observed difference is 0: no number of tasks would declare it."
    if mdd.value is None or observed < mdd.value:
        needed = tasks_needed(differences, comparisons)
        text += (f" Declaring the observed difference ({observed:.3f}) would "
                 + (f"take about {int(needed.value):,} {unit}." if needed.value is not None
                    else f"take {needed.why}."))
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


def tasks_asked(run: Row) -> int:
    """The answers a run was asked for: those it ran and those the cost cap left unrun
    (``n_not_run``), so a capped run's counts are of every task, as its journal's are."""
    return int((run.get("n_tasks") or 0) + (run.get("n_not_run") or 0))


def stopped_words(run: Row) -> str:
    """How a run the cost cap stopped is said: what it ran of what it was asked and what it
    spent (the spend journal's figure); empty for a run the cap did not stop."""
    not_run = int(run.get("n_not_run") or 0)
    if not not_run:
        return ""
    paid = spent(run)
    money = f"spent ${paid:.4f}" if paid is not None else "spend unknown"
    return (f"stopped by the cost cap: {int(run.get('n_tasks') or 0)} of {tasks_asked(run)} "
            f"tasks run, {not_run} not run, {money}")


def judge_spent(run: Row) -> float | None:
    """What a run's judges actually paid over every attempt of the run, panel and samples
    included (``judge_cost_usd_spent_total``: calls made before a kill included); a run
    logged without it, what its last attempt's judge calls cost."""
    journaled = run.get("judge_cost_usd_spent_total")
    return journaled if journaled is not None else run.get("judge_cost_usd_total")


def lacking(sets: TaskSets, run: Row, key: str) -> tuple[int, int]:
    """How many of the run's records do not carry ``key`` (cost, latency: predictions made
    elsewhere may not say theirs), and how many records it has."""
    records = list(sets.tables.get(run["run_id"], {}).values())
    return sum(1 for x in records if not _number(x.get(key))), len(records)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def unknown(sets: TaskSets, run: Row, key: str, what: str) -> str:
    """What a figure the records cannot support is called: unknown, never 0."""
    missing, total = lacking(sets, run, key)
    return (f"{what} unknown ({missing} of {total} records lack it)" if missing
            else f"{what} unknown")


def cost_sentence(sets: TaskSets, runs: list[Row]) -> str:
    parts = [f"{r['run']} {_cost_words(sets, r)}" for r in runs]
    judge = sum(judge_spent(r) or 0.0 for r in runs)
    return ("Cost per task (every task run, errored included; without the response cache, "
            "actual spend in brackets): " + "; ".join(parts) + "."
            + (f" The judge cost ${judge:.4f} in all." if judge else ""))


def _cost_words(sets: TaskSets, run: Row) -> str:
    """A run's cost per task, what it spent and its P50 latency; each unknown where the
    records cannot support it (never $0)."""
    cost, paid = task_cost(run), run.get("cost_usd_per_task")
    p50 = run.get("latency_ms_p50")
    latency = f"P50 {p50:.0f} ms" if p50 is not None else unknown(sets, run, "latency_ms",
                                                                 "P50 latency")
    if cost is None:
        return f"({unknown(sets, run, 'cost_usd', 'cost')}; {latency})"
    spent_words = f"spent ${paid:.5f}" if paid is not None else "spent unknown"
    return f"${cost:.5f} ({spent_words}; {latency})"


def _spent_sentence(left_out: list[Row]) -> str:
    return "".join(f" {r['run']} answered no task but spent ${spent(r) or 0.0:.5f}."
                   for r in left_out if (spent(r) or 0.0) > 0)


def paired_section(sets: TaskSets, keys: Sequence[str], decided: Sequence[Decision],
                   descriptive: bool = False) -> str:
    """Every pair of runs on each decision metric: the family's tests with raw and adjusted
    p (a pair with a bound is shown for reference, untested by the verdict)."""
    family = max((d.family for d in decided), default=1)
    intro = ("Over the common tasks both runs have a score for: mean difference (first minus "
             "second) with a paired bootstrap 95% CI (2,000 resamples) and a two-sided Wilcoxon "
             "signed-rank p-value over the untied pairs (ties carry no sign and are dropped; "
             f"with fewer than {MIN_UNTIED} untied pairs no test can reach 0.05). The verdict "
             f"decides on {', '.join(f'`{k}`' for k in keys)}: every pair of contenders on each, "
             f"{family} test(s) in all, whose p-values are {policy.CORRECTION}-adjusted together "
             "(both shown). Significant: adjusted p < 0.05 and the CI excludes 0.\n")
    if descriptive:
        intro += ("**Descriptive:** this sweep stopped by its anytime-valid intervals (section "
                  "\"Sequential stop\"): these tests are on tasks a data-dependent rule chose "
                  "to run, so their verdicts decide nothing.\n")
    return intro + "".join(_paired_table(sets, key, decided, descriptive) for key in keys)


def _paired_table(sets: TaskSets, key: str, decided: Sequence[Decision],
                  descriptive: bool = False) -> str:
    rows = []
    for part, (a, b) in ((within, pair) for within in by_dataset(sets).values()
                         for pair in itertools.combinations(within.runs, 2)):
        d = find(decided, key, a, b)
        res = d.paired if d is not None else part.pair(a, b, key)
        if res is None:
            continue
        held = d is not None and d.p_adjusted is not None
        rows.append([f"{a['run']} vs {b['run']}", n_words(res.n, res), res.n_untied, res.mean_diff,
                     f"[{res.ci_low:.3f}, {res.ci_high:.3f}]", res.p_text(),
                     f"{d.p_adjusted:.3g}" if held and d else
                     "– (a bound: not decided on)" if d is None else "–",
                     f"{res.wins}/{res.losses}/{res.ties}",
                     f"descriptive ({d.verdict() if d else res.verdict()})" if descriptive else
                     d.verdict() if d is not None else f"{res.verdict()} (unadjusted)"])
    head = f"\n### `{key}`\n\n"
    if not rows:
        return head + "Fewer than two runs share two scored common tasks.\n"
    return head + table(["pair", "pairs", "untied", "mean diff", "95% CI", "Wilcoxon p",
                         f"{policy.CORRECTION} p", "wins/losses/ties", "verdict"], rows)


def common_rows(sets: TaskSets, metrics: list[str]) -> list[Row]:
    """Each compared run's row with each metric's mean and CI over that metric's common
    task set (``TaskSets.common_for``; over several datasets, its own dataset's) and its n
    (``<metric>_n``): what the quality table, the comparison plot, the console and the
    parent run's metrics show."""
    parts = by_dataset(sets)
    if len(parts) > 1:
        return [row for part in parts.values() for row in common_rows(part, metrics)]
    out = []
    for r in sets.runs:
        row = {k: v for k, v in r.items() if not k.endswith(("_mean", "_ci_low", "_ci_high"))}
        for m in metrics:
            ids = [t for t in sets.common_for(m)
                   if sets.tables[r["run_id"]].get(t, {}).get(m) is not None]
            values = sets.values(r, m, ids)
            if values:
                row[f"{m}_mean"] = float(np.mean(values))
                row[f"{m}_n"] = len(values)
                ci = bootstrap_ci(values, clusters=sets.clusters(ids))
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
UNKNOWABLE = ("cost_usd", "latency_ms")  # record fields a pipeline's records may not carry


def headline_rows(sets: TaskSets, finished: list[Row], key: str, also: Sequence[str] = ()
                  ) -> list[Row]:
    """What the console and the parent run show per run, best first (``report.policy``;
    bounds after the contenders, runs that answered nothing last): the comparison metric
    and retrieval recall on their common task sets with their n (``<metric>_n``), its cost
    per task over every task run (without the response cache, and what was spent), and
    latency. ``<metric>_n_all``: the size of the full set, to say when n is smaller.
    ``also``: the other decision metrics, shown the same way."""
    scores = list(dict.fromkeys([key, *also, *HEADLINE_SCORES]))
    common = {r["run_id"]: r for r in common_rows(sets, scores)}
    rows = []
    for run in finished:
        row = {k: v for k, v in run.items() if not k.endswith(("_mean", "_ci_low", "_ci_high"))}
        row.update({k: v for k, v in common.get(run["run_id"], {}).items()
                    if k.endswith(("_mean", "_n"))})
        row["cost_per_task"] = task_cost(run)
        row["n_all"] = len(sets.all_ids)
        row["n_asked"] = tasks_asked(run)
        row["judge_cost"] = judge_spent(run)
        row["answered_any"] = run in sets.runs
        # how many records lack each figure, so an unknown is said as one, never 0
        row["lacking"] = {key: lacking(sets, run, key)[0] for key in UNKNOWABLE}
        row["n_records"] = lacking(sets, run, "cost_usd")[1]
        rows.append(row)
    ranked = policy.ranked(policy.contenders(rows), lambda r: r.get(f"{key}_mean"), key)
    return ranked + [r for r in rows if r not in ranked]
