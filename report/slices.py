"""The report's "Where each system wins" section (``report.slice_by``): every pair of the
verdict's family, sliced by each named document feature (``metrics.slices``), and whether
its difference depends on the feature (the interaction test), said per pair in the key
finding. Logged on the parent run as ``slices.jsonl`` and ``interaction.jsonl``, with a
crossover plot per pair (its paired difference against document length).

Every slice's Wilcoxon p is Holm-adjusted over the whole family of slices x pairs x
metrics; every interaction p over features x pairs x metrics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from metrics.slices import (
    Bin,
    Interaction,
    Slice,
    crossover,
    feature_bins,
    interaction,
    is_numeric,
    slice_difference,
)
from metrics.stats import ALPHA, MIN_UNTIED
from report import policy
from report.findings import Analysis, Finding, Plot, Table
from report.plots import crossover_plot
from report.verdict import Decision, TaskSets, is_answered

SECTION = "Where each system wins"
# how a feature is said in a sentence, and the unit of its values
WORDS = {"document_tokens": ("document length", " tokens"),
         "evidence_position": ("where the gold evidence lies (0 start, 1 end)", ""),
         "n_documents": ("the number of documents", " documents")}
CROSSOVER_FEATURE = "document_tokens"  # what the crossover plot draws the difference against


class SliceInputs(Protocol):
    """What slicing reads of ``report.analyses.Inputs`` (named structurally: analyses.py
    registers this module, so this module does not import it)."""

    @property
    def sets(self) -> TaskSets: ...
    @property
    def keys(self) -> list[str]: ...
    @property
    def decided(self) -> list[Decision]: ...
    @property
    def options(self) -> Mapping[str, Any]: ...


def words(feature: str) -> tuple[str, str]:
    return WORDS.get(feature, (f"`{feature}`", ""))


def feature_values(sets: TaskSets, feature: str) -> dict[str, Any]:
    """Task id -> the feature's value, from the first record that carries it."""
    values: dict[str, Any] = {}
    for table in sets.tables.values():
        for task, record in table.items():
            if record.get(feature) is not None:
                values.setdefault(task, record[feature])
    return values


@dataclass(frozen=True)
class PairSlices:
    """One test of the family sliced by one feature."""

    feature: str
    decision: Decision
    slices: list[Slice]
    test: Interaction | None
    numeric: bool


def _scores(sets: TaskSets, run: dict[str, Any], key: str, ids: list[str]) -> dict[str, float]:
    table = sets.tables[run["run_id"]]
    return {t: float(table[t][key]) for t in ids}


def slice_pair(sets: TaskSets, d: Decision, feature: str, values: Mapping[str, Any],
               bins: list[Bin]) -> PairSlices:
    ids = [t for t in sets.pair_ids(d.first, d.second, d.key) if t in values]
    a, b = _scores(sets, d.first, d.key, ids), _scores(sets, d.second, d.key, ids)
    found = sets.clusters(ids)
    clusters = dict(zip(ids, found, strict=True)) if found is not None else None
    slices = [s for s in (slice_difference(bin_, a, b, clusters) for bin_ in bins) if s]
    test = interaction(values, {t: a[t] - b[t] for t in ids}, clusters)
    return PairSlices(feature, d, slices, test, is_numeric(values))


def slices_analysis(inputs: SliceInputs) -> Analysis:
    """``report.slice_by``: slices, interaction tests, findings, artifacts and plots."""
    features = list(inputs.options.get("slice_by") or [])
    if not features:
        return Analysis()
    if len(policy.contenders(inputs.sets.runs)) < 2:
        return Analysis([Finding("slice", SECTION, f"`report.slice_by` names {features}, but "
                                 "fewer than two systems are compared: there is no pair to "
                                 "slice, so no slices are given.", caveat=True)])
    out = Analysis()
    done: list[PairSlices] = []
    for feature in features:
        values = {t: v for t, v in feature_values(inputs.sets, feature).items()
                  if any(is_answered(tb.get(t, {"skipped": True}))
                         for tb in inputs.sets.tables.values())}
        if not values:
            out.findings.append(Finding("slice", SECTION, f"No compared task has the feature "
                                        f"`{feature}`, so nothing is sliced by it: its records "
                                        "do not carry it (runs scored before document features "
                                        "existed, or a dataset that does not say it; re-score "
                                        "with mode=evaluate).", caveat=True))
            continue
        edges = (inputs.options.get("slice_edges") or {}).get(feature) or None
        bins = feature_bins(values, int(inputs.options.get("slice_bins") or 4), edges)
        done += [slice_pair(inputs.sets, d, feature, values, bins)
                 for d in policy.sliced(inputs.decided)]
    slice_rows, interaction_rows = _rows(done)
    out.artifacts = {"slices.jsonl": slice_rows, "interaction.jsonl": interaction_rows}
    out.findings += _findings(done, interaction_rows, slice_rows, inputs.keys)
    for p in done:
        if p.feature == CROSSOVER_FEATURE and p.numeric and any(
                p.decision is d for d in policy.keyed_slices(inputs.decided, inputs.keys)):
            name = plot_name(p)
            out.plots.append(_crossover_plot(p, slice_rows, name))
            out.findings.append(Finding("crossover", SECTION, f"![{name}](plots/{name}.png)"))
    return out


def plot_name(p: PairSlices) -> str:
    """The crossover plot's file name (run labels made safe for a path)."""
    pair = f"{_label(p.decision.first)}_vs_{_label(p.decision.second)}"
    return "crossover_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", pair)


def _label(run: dict[str, Any]) -> str:
    return str(run["run"])


def _rows(done: Sequence[PairSlices]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of ``slices.jsonl`` and ``interaction.jsonl``, each family Holm-adjusted."""
    slice_rows: list[dict[str, Any]] = [
                  {"feature": p.feature, "bin": s.bin.label, "lo": s.bin.lo, "hi": s.bin.hi,
                   "a": _label(p.decision.first), "b": _label(p.decision.second),
                   "metric": p.decision.key, "n": s.n, "mean_a": s.mean_a, "mean_b": s.mean_b,
                   "diff": s.mean_a - s.mean_b,
                   "ci_low": s.paired.ci_low if s.paired else None,
                   "ci_high": s.paired.ci_high if s.paired else None,
                   "p": None if s.too_few or s.paired is None else s.paired.p}
                  for p in done for s in p.slices]
    for row, adjusted in zip(slice_rows, policy.adjusted([r["p"] for r in slice_rows]),
                             strict=True):
        row["p_adjusted"] = adjusted
    inter_rows: list[dict[str, Any]] = [{"feature": p.feature, "a": _label(p.decision.first),
                   "b": _label(p.decision.second), "metric": p.decision.key,
                   "n": p.test.n if p.test else None,
                   "statistic": p.test.statistic if p.test else None,
                   "p": p.test.p if p.test else None,
                   "test": p.test.test if p.test else None} for p in done]
    for row, adjusted in zip(inter_rows, policy.adjusted([r["p"] for r in inter_rows]),
                             strict=True):
        row["p_adjusted"] = adjusted
    return slice_rows, inter_rows


def _findings(done: Sequence[PairSlices], inter_rows: list[dict[str, Any]],
              slice_rows: list[dict[str, Any]], keys: Sequence[str]) -> list[Finding]:
    out = []
    for p, row in zip(done, inter_rows, strict=True):
        mine = [r for r in slice_rows if r["feature"] == p.feature and r["metric"] == row[
            "metric"] and (r["a"], r["b"]) == (row["a"], row["b"])]
        key = bool(keys) and p.decision.key == keys[0]
        out.append(Finding("interaction", SECTION, interaction_sentence(p, row),
                           {k: row[k] for k in ("feature", "a", "b", "metric", "n", "statistic",
                                                "p", "p_adjusted", "test")},
                           key=key, table=_table(mine)))
    return out


def _table(rows: list[dict[str, Any]]) -> Table:
    return Table(["bin", "n", "mean a", "mean b", "diff (a − b)", "95% CI", "Wilcoxon p",
                  f"{policy.CORRECTION} p"],
                 [[r["bin"], r["n"], r["mean_a"], r["mean_b"], r["diff"],
                   "n/a" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
                   "too few" if r["p"] is None else r["p"],
                   "too few" if r["p_adjusted"] is None else r["p_adjusted"]] for r in rows])


def interaction_sentence(p: PairSlices, row: dict[str, Any]) -> str:
    """Whether the pair's difference depends on the feature, and where each side leads."""
    a, b = row["a"], row["b"]
    name, unit = words(p.feature)
    head = f"**{a}** vs **{b}** on `{row['metric']}`: "
    if p.test is None:
        return (head + f"whether the difference depends on {name} cannot be tested (fewer "
                f"than {MIN_UNTIED} tasks with a value, or no spread in it or in the "
                "difference).")
    figures = f"{p.test.test}, p = {row['p']:.3g}, {policy.CORRECTION}-adjusted p = " \
              f"{row['p_adjusted']:.3g}, n = {p.test.n}"
    if row["p_adjusted"] >= ALPHA:
        return head + f"no evidence that the difference depends on {name} ({figures})."
    sign = 1.0 if policy.higher_is_better(row["metric"]) else -1.0
    if not p.numeric:
        leads = {side: [s.bin.label for s in p.slices
                        if sign * (s.mean_a - s.mean_b) * (1 if side == a else -1) > 0]
                 for side in (a, b)}
        where = "; ".join(f"{side} ahead on {', '.join(bins)}" for side, bins in leads.items()
                          if bins)
        return head + f"the difference depends on {name}: {where} ({figures})."
    edge = crossover(p.slices, sign)
    first = p.slices[0]
    low_side = a if sign * (first.mean_a - first.mean_b) > 0 else b
    high_side = b if low_side == a else a
    if edge is None:
        grows = (p.test.statistic > 0) == (sign > 0)
        return (head + f"the difference depends on {name}: {a}'s "
                f"{'advantage grows' if grows else 'advantage shrinks'} as it increases, "
                f"without changing hands ({figures}).")
    return (head + f"the difference depends on {name}: {high_side} ahead above "
            f"~{edge:,.0f}{unit}, {low_side} below ({figures}).")


def _crossover_plot(p: PairSlices, slice_rows: list[dict[str, Any]], name: str) -> Plot:
    a, b, key = _label(p.decision.first), _label(p.decision.second), p.decision.key
    rows = [r for r in slice_rows if r["feature"] == p.feature and r["metric"] == key
            and (r["a"], r["b"]) == (a, b)]

    def draw(folder: Path) -> Path | None:
        return crossover_plot(rows, folder / f"{name}.png",
                              f"{key}: {a} − {b} by {words(p.feature)[0]}")

    return draw
