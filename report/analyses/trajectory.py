"""The agent's path (``metrics.trajectory``) for "why each system loses": each agentic run's
main path problem with its figures, a plot per system of gold recall by step, and over a
loop-budget sweep where recall stops rising (the measures:
docs/judging.md#the-agents-path-trajectory-measures-anchored-to-gold-evidence). compare.html
shows each task's path from ``path_cells``."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from statistics import median
from typing import Any

from metrics.trajectory import NEVER_READ_GOLD, NO_GOLD, mean_of, recall_curve, recall_plateau
from report.model import Analysis, Claim, Inputs, Note, Row, register_analysis, runs_with

SECTION = "Why each system loses"
MEANS = {"hits_off": "off_document_result_rate", "reads_off": "off_document_read_rate",
         "redundant": "redundant_read_rate", "recall_at_stop": "gold_recall_at_stop",
         "p_rate": "p", "ir_rate": "ir", "seen_unread": "seen_unread_gold", "steps": "steps"}

def figures(records: list[Row]) -> dict[str, Any]:
    """A run's path figures over its tasks with a path (means of the per-task measures)."""
    # over-search: of the reads of tasks that read gold, those after the last new gold
    gold_read = [r for r in records if r.get("trajectory_reads_after_last_new_gold") is not None]
    reads = sum(r.get("trajectory_reads") or 0 for r in gold_read)
    after = sum(r["trajectory_reads_after_last_new_gold"] for r in gold_read)
    firsts = [r["trajectory_steps_to_first_gold"] for r in records
              if r.get("trajectory_steps_to_first_gold") is not None]
    out: dict[str, Any] = {name: mean_of(records, f"trajectory_{field}")
                           for name, field in MEANS.items()}
    out |= {"first_gold_median": median(firsts) if firsts else None,
            "never_gold": sum(1 for r in records if (r.get("null_reasons") or {}).get(
               "trajectory_steps_to_first_gold") == NEVER_READ_GOLD),
            "over_search": after / reads if reads else None}
    shares = {"off_document": max((v for v in (out["hits_off"], out["reads_off"])
                                   if v is not None), default=None),
              "premature": out["p_rate"], "redundant": out["redundant"],
              "over_search": out["over_search"]}
    known = {k: v for k, v in shares.items() if v}
    out["problem"] = max(known, key=lambda k: known[k]) if known else None
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


@register_analysis("trajectory", 35)
def analysis(inputs: Inputs) -> Analysis:
    out = Analysis()
    groups: dict[str, list[tuple[Row, list[Row]]]] = {}
    for row, recs in runs_with(inputs, lambda r: r.get("trajectory_steps") is not None,
                               lambda run: bool(run.get("agentic"))):
        groups.setdefault(str(row.get("system") or row["run"]), []).append((row, recs))
    for system, members in groups.items():
        plot = f"trajectory_{_safe(system)}"
        curves = {row["run"]: recall_curve(recs) for row, recs in members}
        if any(curves.values()):
            out.plots.append(partial(_draw, curves, plot, system))
        for row, recs in members:
            out.claims.append(Claim(
                "path", SECTION, (row["run"],), "trajectory_gold_recall_at_stop",
                n_tasks=len(recs), rule="the agent's path against the gold evidence",
                key=True, figures={**figures(recs),
                                   "plot": plot if any(curves.values()) else None}))
            out.notes += _notes(row, recs)
        budgets = sorted({int(row["max_loops"]) for row, _ in members
                          if row.get("max_loops") is not None})
        if len(budgets) > 1:
            out.claims.append(_budget_claim(system, members, budgets, plot))
    return out


def _budget_claim(system: str, members: list[tuple[Row, list[Row]]], budgets: list[int],
                  plot: str) -> Claim:
    by_budget: dict[int, list[Row]] = {}
    for row, recs in members:
        if row.get("max_loops") is not None:
            by_budget.setdefault(int(row["max_loops"]), []).extend(recs)
    recall = [mean_of(by_budget[b], "trajectory_gold_recall_at_stop") for b in budgets]
    known = [(b, v) for b, v in zip(budgets, recall, strict=True) if v is not None]
    plateau = recall_plateau([b for b, _ in known], [v for _, v in known])
    return Claim("path_budget", SECTION, tuple(r["run"] for r, _ in members),
                 "trajectory_gold_recall_at_stop", rule="gold recall at stop per loop budget",
                 figures={"system": system, "budgets": budgets, "recall": recall,
                          "plateau": plateau, "plot": plot})


def _notes(row: Row, recs: list[Row]) -> list[Note]:
    out = []
    unlocated = {k: int(sum(r.get(f"trajectory_unlocated_{k}") or 0 for r in recs))
                 for k in ("steps", "reads", "results")}
    if any(unlocated.values()):
        out.append(Note("path_unlocated", SECTION, (row["run"],),
                        {**unlocated, "tasks": len(recs)}))
    no_gold = sum(1 for r in recs if (r.get("null_reasons") or {}).get(
        "trajectory_gold_recall_at_stop") == NO_GOLD)
    if no_gold:
        out.append(Note("path_no_gold", SECTION, (row["run"],),
                        {"tasks": no_gold, "of": len(recs)}))
    return out


def _draw(curves: dict[str, list[float]], name: str, system: str, folder: Path) -> Path | None:
    from report.plots import plt, save

    fig, ax = plt.subplots(figsize=(6, 3.8))
    for run, curve in curves.items():
        if curve:
            ax.plot(range(1, len(curve) + 1), curve, marker="o", markersize=3, label=run)
    ax.set(xlabel="step (tool call)", ylabel="gold evidence read (share)", ylim=(0, 1.02),
           title=f"{system}: gold recall by step")
    ax.legend(fontsize=7)
    return save(fig, folder / f"{name}.png")


def path_cells(record: Row) -> list[tuple[str, Any, str | None]]:
    """compare.html: a task's path as (label, value, why it is null) cells; [] without one."""
    if record.get("trajectory_steps") is None:
        return []
    why = record.get("null_reasons") or {}
    return [(label, record.get(field), why.get(field)) for label, field in (
        ("steps", "trajectory_steps"), ("first gold read at step", "trajectory_steps_to_first_gold"),
        ("gold read by the stop", "trajectory_gold_recall_at_stop"),
        ("reads off the task's documents", "trajectory_off_document_read_rate"),
        ("search hits off them", "trajectory_off_document_result_rate"),
        ("redundant reads", "trajectory_redundant_read_rate"),
        ("mechanical codes", "trajectory_codes"))]
