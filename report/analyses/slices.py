"""The report's "Where each system wins" (``report.slice_by``): every pair of the verdict's family
sliced by each document feature, whether its difference depends on it (the interaction test), a
crossover plot per keyed pair; logged as ``slices.jsonl`` and ``interaction.jsonl``
(docs/verdict.md#where-each-system-wins-slices-by-document-feature)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from metrics.slices import (
    PERMUTATIONS,
    Bin,
    Interaction,
    Slice,
    crossover,
    feature_bins,
    interaction,
    is_numeric,
    slice_difference,
)
from metrics.stats import ALPHA
from report import policy
from report.model import Analysis, Authority, Claim, Inputs, Note, Table, register_analysis
from report.plots import crossover_plot
from report.verdict import Decision, TaskSets, by_dataset, is_answered
from report.writers.cells import interval, value_range

SECTION = "Where each system wins"
Rows = list[dict[str, Any]]
CROSSOVER_FEATURE = "document_tokens"  # what the crossover plot draws the difference against
UNITS = {"document_tokens": " tokens", "n_documents": " documents"}  # a numeric bin's unit


def feature_values(sets: TaskSets, feature: str) -> dict[str, Any]:
    """Task id (over several datasets: ``dataset/id``) -> the feature, from the first record."""
    values: dict[str, Any] = {}
    for name, part in _parts(sets).items():
        for table in part.tables.values():
            for task, record in table.items():
                if record.get(feature) is not None:
                    values.setdefault(_pooled_id(name, task), record[feature])
    return values


def _parts(sets: TaskSets) -> dict[str | None, TaskSets]:
    """The sweep's task sets by dataset; one dataset: ``{None: sets}`` (ids left as they are)."""
    parts: dict[str | None, TaskSets] = {name: part for name, part in by_dataset(sets).items()}
    return parts if len(parts) > 1 else {None: sets}


def _pooled_id(dataset: str | None, task: str) -> str:
    return task if dataset is None else f"{dataset}/{task}"


def pooled_label(run: dict[str, Any]) -> str:
    """A run's label without its dataset (``arag dataset=ectsum`` -> ``arag``)."""
    return " ".join(w for w in str(run["run"]).split() if not w.startswith("dataset")) \
        or str(run["run"])


@dataclass(frozen=True)
class Pooled:
    """One pair of systems on one metric over every dataset: the verdict's tests of it within
    each dataset (``decisions``), their tasks pooled as ``dataset/id``, each paired with itself."""

    a: str
    b: str
    key: str
    decisions: list[Decision]
    datasets: list[str]
    scores_a: dict[str, float]
    scores_b: dict[str, float]
    clusters: dict[str, Any] | None  # pooled id -> (dataset, its document cluster)


def pooled_pairs(sets: TaskSets, decided: Sequence[Decision]) -> list[Pooled]:
    """The sliced tests (``policy.sliced``) of one pair and metric, one per dataset, pooled."""
    groups: dict[tuple[str, str, str], list[tuple[str | None, TaskSets, Decision]]] = {}
    parts = _parts(sets)
    for name, part in parts.items():
        for d in policy.sliced(decided):
            if not any(d.first is r for r in part.runs):
                continue
            pooled = (pooled_label(d.first), pooled_label(d.second))
            names = pooled if name is not None and pooled[0] != pooled[1] and not any(
                other == name for other, _, _ in groups.get((*pooled, d.key), [])) else \
                (str(d.first["run"]), str(d.second["run"]))
            groups.setdefault((*names, d.key), []).append((name, part, d))
    return [_pooled(a, b, key, members) for (a, b, key), members in groups.items()]


def _pooled(a: str, b: str, key: str,
            members: list[tuple[str | None, TaskSets, Decision]]) -> Pooled:
    scores_a: dict[str, float] = {}
    scores_b: dict[str, float] = {}
    clusters: dict[str, Any] = {}
    known = True
    for name, part, d in members:
        ids = part.pair_ids(d.first, d.second, key)
        ta, tb = part.tables[d.first["run_id"]], part.tables[d.second["run_id"]]
        scores_a.update({_pooled_id(name, t): float(ta[t][key]) for t in ids})
        scores_b.update({_pooled_id(name, t): float(tb[t][key]) for t in ids})
        found = part.clusters(ids)
        known = known and found is not None
        clusters.update({_pooled_id(name, t): (name, c)
                         for t, c in zip(ids, found or [], strict=False)})
    return Pooled(a, b, key, [d for _, _, d in members],
                  [str(name) for name, _, _ in members if name is not None],
                  scores_a, scores_b, clusters if known else None)


@dataclass(frozen=True)
class PairSlices:
    """One pair of the family (pooled over the sweep's datasets) sliced by one feature."""

    feature: str
    pair: Pooled
    slices: list[Slice]
    test: Interaction | None
    numeric: bool


def slice_pair(pair: Pooled, feature: str, values: Mapping[str, Any],
               bins: list[Bin]) -> PairSlices:
    ids = [t for t in pair.scores_a if t in values]
    a, b = {t: pair.scores_a[t] for t in ids}, {t: pair.scores_b[t] for t in ids}
    clusters = {t: pair.clusters[t] for t in ids} if pair.clusters is not None else None
    slices = [s for s in (slice_difference(bin_, a, b, clusters) for bin_ in bins) if s]
    test = interaction(values, {t: a[t] - b[t] for t in ids}, clusters)
    return PairSlices(feature, pair, slices, test, is_numeric(values))


@register_analysis("slices", 20)
def slices_analysis(inputs: Inputs) -> Analysis:
    features = list(inputs.options.get("slice_by") or [])
    if not features:
        return Analysis()
    if len(policy.contenders(inputs.sets.runs)) < 2:
        return Analysis(notes=[Note("slices_no_pair", SECTION, counts={"features": features})])
    out = Analysis()
    done: list[PairSlices] = []
    pairs = pooled_pairs(inputs.sets, inputs.decided)
    answered = {_pooled_id(name, t) for name, part in _parts(inputs.sets).items()
                for table in part.tables.values() for t, r in table.items() if is_answered(r)}
    for feature in features:
        values = {t: v for t, v in feature_values(inputs.sets, feature).items() if t in answered}
        if not values:
            out.notes.append(Note("slices_missing_feature", SECTION, counts={"feature": feature}))
            continue
        edges = (inputs.options.get("slice_edges") or {}).get(feature) or None
        bins = feature_bins(values, int(inputs.options.get("slice_bins") or 4), edges)
        done += [slice_pair(pair, feature, values, bins) for pair in pairs]
    pooled = sorted({n for p in pairs for n in p.datasets})
    if len(pooled) > 1 and "dataset" not in features:
        out.notes.append(Note("slices_pooled", SECTION, counts={"datasets": pooled}))
    slice_rows, interaction_rows = _rows(done)
    out.artifacts = {"slices.jsonl": slice_rows, "interaction.jsonl": interaction_rows}
    out.claims += _claims(done, interaction_rows, slice_rows, inputs.keys)
    keyed = policy.keyed_slices(inputs.decided, inputs.keys)
    for p in done:
        if p.feature == CROSSOVER_FEATURE and p.numeric and any(
                d is k for d in p.pair.decisions for k in keyed):
            name = plot_name(p)
            out.plots.append(partial(_draw, _of(p, slice_rows), name,
                                     f"{p.pair.key}: {p.pair.a} − {p.pair.b} by {p.feature}"))
            out.claims.append(Claim("plot", SECTION, figures={"name": name}))
    return out


def _of(p: PairSlices, slice_rows: Rows) -> Rows:
    """The slices of one pair on one feature."""
    return [r for r in slice_rows if r["feature"] == p.feature and r["metric"] == p.pair.key
            and (r["a"], r["b"]) == (p.pair.a, p.pair.b)]


def _draw(rows: Rows, name: str, title: str, folder: Path) -> Path | None:
    return crossover_plot(rows, folder / f"{name}.png", title)


def plot_name(p: PairSlices) -> str:
    """The crossover plot's file name (run labels made safe for a path)."""
    return "crossover_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{p.pair.a}_vs_{p.pair.b}")


def _rows(done: Sequence[PairSlices]) -> tuple[Rows, Rows]:
    """The rows of ``slices.jsonl`` and ``interaction.jsonl``, each family Holm-adjusted."""
    slice_rows: Rows = [{"feature": p.feature, "bin": s.bin.label, "lo": s.bin.lo, "hi": s.bin.hi,
                         "a": p.pair.a, "b": p.pair.b, "metric": p.pair.key, "n": s.n,
                         "mean_a": s.mean_a, "mean_b": s.mean_b, "diff": s.mean_a - s.mean_b,
                         "ci_low": s.paired.ci_low if s.paired else None,
                         "ci_high": s.paired.ci_high if s.paired else None,
                         "p": None if s.too_few or s.paired is None else s.paired.p}
                        for p in done for s in p.slices]
    inter_rows: Rows = [{"feature": p.feature, "a": p.pair.a, "b": p.pair.b, "metric": p.pair.key,
                         **{k: getattr(p.test, k) if p.test else None
                            for k in ("n", "statistic", "p", "test")}} for p in done]
    for rows in (slice_rows, inter_rows):  # each family Holm-adjusted on its own
        for row, adjusted in zip(rows, policy.adjusted([r["p"] for r in rows]), strict=True):
            row["p_adjusted"] = adjusted
    return slice_rows, inter_rows


def _claims(done: Sequence[PairSlices], inter_rows: list[dict[str, Any]],
            slice_rows: list[dict[str, Any]], keys: Sequence[str]) -> list[Claim]:
    """Per pair and feature: whether its difference depends on the feature (decisive at a
    Holm-adjusted p below ALPHA) and where each side leads."""
    out = []
    for p, row in zip(done, inter_rows, strict=True):
        mine = _of(p, slice_rows)
        decisive = p.test is not None and row["p_adjusted"] < ALPHA
        out.append(Claim("interaction", SECTION, (row["a"], row["b"]), row["metric"],
                         p=row["p"], p_adjusted=row["p_adjusted"], n_tasks=row["n"],
                         rule=row["test"] or "", authority=Authority.interaction,
                         decisive=decisive, key=bool(keys) and p.pair.key == keys[0],
                         figures={"feature": p.feature, "datasets": p.pair.datasets,
                                  "statistic": row["statistic"], "numeric": p.numeric,
                                  "p_floor": 1 / (PERMUTATIONS + 1)
                                  if row["test"] == "spearman permutation" else None,
                                  **(_where(p, row) if decisive else {})},
                         table=_table(mine, UNITS.get(p.feature, ""))))
    return out


def _where(p: PairSlices, row: dict[str, Any]) -> dict[str, Any]:
    """Where each side leads: the categories each is ahead on, or the value where the lead
    changes hands (None: it grows or shrinks without changing hands), who leads below and above."""
    a, b = row["a"], row["b"]
    sign = 1.0 if policy.higher_is_better(row["metric"]) else -1.0
    if not p.numeric:
        return {"leads": {side: [s.bin.label for s in p.slices
                                 if sign * (s.mean_a - s.mean_b) * (1 if side == a else -1) > 0]
                          for side in (a, b)}}
    first = p.slices[0]
    low = a if sign * (first.mean_a - first.mean_b) > 0 else b
    return {"edge": crossover(p.slices, sign), "below": low, "above": b if low == a else a,
            "grows": (p.test is not None and (p.test.statistic > 0) == (sign > 0))}


def _table(rows: list[dict[str, Any]], unit: str) -> Table:
    """A pair's slices; a numeric bin reads as a range, its first open below, its last above."""
    last = len(rows) - 1
    return Table(["bin", "n", "mean a", "mean b", "diff (a − b)", "95% CI", "Wilcoxon p",
                  f"{policy.CORRECTION} p"],
                 [[r["bin"] if r["lo"] is None else value_range(r["lo"] if k else None,
                                                                 r["hi"] if k < last else None, unit),
                   r["n"], r["mean_a"], r["mean_b"], r["diff"],
                   "too few" if r["ci_low"] is None else interval((r["ci_low"], r["ci_high"])),
                   "too few" if r["p"] is None else r["p"],
                   "too few" if r["p_adjusted"] is None else r["p_adjusted"]]
                  for k, r in enumerate(rows)])
