"""Results by document length (the slices' bins): each run's means per third of the length, and,
in the key finding, whether retrieval adds value for the shortest and the longest third (the
best run that retrieves against the best that reads whole documents, paired on shared tasks)."""

from __future__ import annotations

import numpy as np

from metrics.slices import numeric_bins
from report import policy
from report.analyses.slices import feature_values
from report.meta_eval import is_meta_evaluation
from report.model import Analysis, Claim, Inputs, Row, register_analysis
from report.verdict import SMALL_N, TaskSets, by_dataset, is_answered

SECTION = "By document length"
SHOWN_METRICS = 3  # the first of the comparison order any run has


def reads_whole_documents(run: Row) -> bool:
    """A run that reads whole documents (``long_context``; logged before it: one not retrieving)."""
    declared = run.get("long_context")
    return bool(declared) if declared is not None else not run.get("retrieves")


@register_analysis("length", 25)
def length(inputs: Inputs) -> Analysis:
    if is_meta_evaluation(inputs.finished):
        return Analysis()
    metrics = [m for m in policy.comparison_order()
               if any(r.get(f"{m}_mean") is not None for r in inputs.finished)][:SHOWN_METRICS]
    out = []
    parts = by_dataset(inputs.sets)
    for name, sets in parts.items():
        dataset = name if len(parts) > 1 else None
        lengths = feature_values(sets, "document_tokens")
        found = numeric_bins(lengths, 3) if len(lengths) >= 3 else []
        bins = [(b.ids, b.lo if k else None, b.hi if k < len(found) - 1 else None)
                for k, b in enumerate(found)]
        out += [_breakdown(sets, bins, m, dataset, k == 0) for k, m in enumerate(metrics)] \
            if bins and metrics else [Claim("length_breakdown", SECTION, figures={"too_few": True})]
        out += _findings(sets, bins, inputs.keys[0], dataset) if len(bins) > 1 else []
    return Analysis(claims=out)


def _breakdown(sets: TaskSets, bins: list, metric: str, dataset: str | None, first: bool) -> Claim:
    """A metric's mean and n per bin and run, over each run's answered tasks."""
    cells = {}
    for run in sets.runs:
        table = sets.tables[run["run_id"]]
        values = [[table[t][metric] for t in ids if t in table and is_answered(table[t])
                   and table[t].get(metric) is not None] for ids, _, _ in bins]
        cells[run["run"]] = [[float(np.mean(v)) if v else None, len(v)] for v in values]
    return Claim("length_breakdown", SECTION, metric=metric, figures={
        "bins": [[lo, hi] for _, lo, hi in bins], "sizes": [len(ids) for ids, _, _ in bins],
        "cells": cells, "first": first, "dataset": dataset})


def _findings(sets: TaskSets, bins: list, key: str, dataset: str | None) -> list[Claim]:
    # a bound (the oracle, closed book) is a reference point, never either side
    runs = policy.contenders(sets.runs)
    retrieving = [r for r in runs if r.get("retrieves") and sets.has(r, key)]
    whole = [r for r in runs if reads_whole_documents(r) and sets.has(r, key)]
    if not retrieving or not whole:
        return []
    return [_finding(sets, key, dataset, end, bins[k], retrieving, whole)
            for end, k in (("short", 0), ("long", -1))]


def _finding(sets: TaskSets, key: str, dataset: str | None, end: str, bin_: tuple,
             retrieving: list[Row], whole: list[Row]) -> Claim:
    wanted = set(bin_[0])
    ids = [t for t in sets.all_ids if t in wanted]

    def score(run: Row) -> float:
        values = sets.values(run, key, ids)
        return policy.advantage(float(np.mean(values)), key) if values else -np.inf

    r, w = max(retrieving, key=score), max(whole, key=score)
    skipped = [t for t in ids if sets.tables[w["run_id"]].get(t, {}).get("skipped")]
    both = [t for t in ids if all(sets.tables[x["run_id"]].get(t, {}).get(key) is not None
                                  for x in (r, w))]
    figures = {"end": end, "range": list(bin_[1:]), "dataset": dataset, "skipped": len(skipped),
               "of": len(ids)}
    if not both:
        return Claim("length_value", "Key finding", (r["run"], w["run"]), key, n_tasks=0,
                     figures={**figures, "outcome": "only_option" if skipped else "none_scored"})
    res = sets.pair(r, w, key, both)
    mine, theirs = (float(np.mean([sets.tables[x["run_id"]][t][key] for t in both])) for x in (r, w))
    ahead = r if policy.advantage(mine - theirs, key) > 0 else w
    outcome = ("same" if mine == theirs else "unclear") if res is None or res.ci_includes_zero \
        else "adds" if ahead is r else "not"
    return Claim("length_value", "Key finding", (r["run"], w["run"]), key,
                 res.mean_diff if res else None, (res.ci_low, res.ci_high) if res else None,
                 n_tasks=len(both), figures={**figures, "outcome": outcome, "mine": mine,
                                             "theirs": theirs, "ahead": ahead["run"],
                                             "small": len(both) < SMALL_N})
