"""What the sweep report may conclude, and on which tasks: the model of the verdict.

The runs a sweep compares and the tasks they all answered (``TaskSets``), the one pairing of
two runs' tasks, the family of tests the verdict decides by (``Decision``, ``decisions``:
Holm-adjusted over every pair and decision metric), the rows every writer shows
(``common_rows``, ``headline_rows``) and what a task costs. The rules, and why they are what
they are: docs/verdict.md ("The rules behind the figures"). No text is made here: the
writers (``report/writers``) say it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from metrics import bootstrap_ci
from metrics.aggregate import task_means
from metrics.stats import (
    ALPHA,
    Paired,
    cluster_means,
    clusters_of,
    paired_difference,
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


def pair_records(first: Sequence[Record], second: Sequence[Record], key: str
                 ) -> tuple[list[str], list[float], list[float], Paired | None]:
    """The one task pairing of two runs' records outside a sweep's task sets (a baseline,
    the pairwise judge's absolute scores): each answered task's mean over its repeats, the
    tasks both have a ``key`` value for (in ``first``'s order), clustered by the documents
    they read; returns the ids, both runs' values and the paired difference first minus
    second."""
    a, b = (task_means([r for r in recs if is_answered(r)], key) for recs in (first, second))
    ids = [t for t in a if t in b]
    docs = {r["id"]: r.get("doc_ids") for r in [*second, *first] if r.get("doc_ids")}
    a_vals, b_vals = [a[t] for t in ids], [b[t] for t in ids]
    return ids, a_vals, b_vals, paired_difference(
        a_vals, b_vals, clusters=clusters_of([docs.get(t) for t in ids]))


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
        if d.key == key and d.first is b and d.second is a:
            p = d.paired
            return replace(d, first=a, second=b, paired=p and replace(
                p, mean_diff=-p.mean_diff, ci_low=-p.ci_high, ci_high=-p.ci_low, wins=p.losses,
                losses=p.wins))
    return None


def shown_pairs(sets: TaskSets, key: str, decided: Sequence[Decision]
                ) -> list[tuple[Row, Row, Decision | None, Paired]]:
    """Every pair of runs of one dataset with a paired result on ``key``: the family's test
    (turned to the pair's order), or, for a pair the verdict does not decide on (a bound),
    its unadjusted one."""
    out = []
    for part in by_dataset(sets).values():
        for a, b in itertools.combinations(part.runs, 2):
            d = find(decided, key, a, b)
            res = d.paired if d is not None else part.pair(a, b, key)
            if res is not None:
                out.append((a, b, d, res))
    return out


def run_counts(sets: TaskSets) -> list[Row]:
    """Each run's tasks, answered, skipped and errored, and whether it is compared."""
    def counted(r: Row) -> Row:
        recs = list(sets.tables[r["run_id"]].values())
        return {"run": r["run"], "tasks": len(recs), "answered": sum(map(is_answered, recs)),
                "skipped": sum(bool(x.get("skipped")) for x in recs),
                "errored": sum(bool(x.get("error")) for x in recs), "compared": r in sets.runs}
    return [counted(r) for r in sets.runs + sets.left_out]


SMALL_N = 10  # fewer pairs than this: a percentile-bootstrap CI is not to be trusted


def budget_pairs(runs: list[Row]) -> list[tuple[Row, Row]]:
    """A loop-budget sweep (every contender agentic, each with its own ``max_loops``): each
    budget against the largest, smallest first; any other sweep: none."""
    budgets = {r.get("max_loops") for r in runs}
    if len(runs) < 2 or not all(r.get("agentic") for r in runs) or len(budgets) != len(runs) \
            or not all(str(b).isdigit() for b in budgets):
        return []
    ordered = sorted(runs, key=lambda r: int(r["max_loops"]))
    return [(r, ordered[-1]) for r in ordered[:-1]]


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


def judge_spent(run: Row) -> float | None:
    """What a run's judges actually paid over every attempt of the run, panel and samples
    included (``judge_cost_usd_spent_total``: calls made before a kill included); a run
    logged without it, what its last attempt's judge calls cost."""
    journaled = run.get("judge_cost_usd_spent_total")
    return journaled if journaled is not None else run.get("judge_cost_usd_total")


def _lacking(sets: TaskSets, run: Row, key: str) -> tuple[int, int]:
    """How many of the run's records do not carry ``key`` (cost, latency: predictions made
    elsewhere may not say theirs), and how many records it has."""
    records = list(sets.tables.get(run["run_id"], {}).values())
    return sum(1 for x in records if not _number(x.get(key))), len(records)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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
        row["spent"] = spent(run)
        # how many records lack each figure, so an unknown is said as one, never 0
        row["lacking"] = {key: _lacking(sets, run, key)[0] for key in UNKNOWABLE}
        row["n_records"] = _lacking(sets, run, "cost_usd")[1]
        rows.append(row)
    ranked = policy.ranked(policy.contenders(rows), lambda r: r.get(f"{key}_mean"), key)
    return ranked + [r for r in rows if r not in ranked]
