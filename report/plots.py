"""Plots logged with runs and sweeps (PNG, matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from metrics import Metric, Scorer, default_scorers  # noqa: E402
from metrics.geval import ERROR_CODES  # noqa: E402
from report import policy  # noqa: E402
from report.policy import report_metrics  # noqa: E402
from report.verdict import task_cost  # noqa: E402

HISTOGRAM_COLUMNS = 4
BLUE, RED = "#4C72B0", "#C44E52"


def save(fig: Any, path: Path, laid_out: bool = False) -> Path:
    if not laid_out:
        fig.tight_layout()
    # the layout is set: without this, savefig lays the figure out and draws it once more
    # before drawing it for the file (the same pixels, ~30% of a plot's time)
    fig.set_layout_engine("none")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _panels(n: int, panel: tuple[float, float], fixed: bool = False) -> tuple[Any, list[Any]]:
    """``n`` panels, ``HISTOGRAM_COLUMNS`` a row, the rest hidden. ``fixed``: margins fixed
    in inches (0.3 above and below), as ``tight_layout`` measuring every tick label of a
    run's 36 score histograms was half the plot's time."""
    cols = min(HISTOGRAM_COLUMNS, n)
    rows = -(-n // cols)
    width, height = panel[0] * cols, panel[1] * rows + (0.6 if fixed else 0.0)
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    if fixed:
        fig.subplots_adjust(left=0.55 / width, right=1 - 0.15 / width, top=1 - 0.3 / height,
                            bottom=0.3 / height, wspace=0.35, hspace=0.45)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _histogram_metrics(records: list[dict[str, Any]], scorers: Sequence[Scorer] | None
                       ) -> list[Metric]:
    declared = [m for s in (default_scorers() if scorers is None else scorers) for m in s.metrics
                if m.histogram]
    present = {k for r in records for k, v in r.items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    return sorted((m for m in declared if m.name in present), key=lambda m: m.name)


def histogram_fields(records: list[dict[str, Any]], scorers: Sequence[Scorer] | None = None
                     ) -> list[str]:
    """Every declared score the run has at least one value of."""
    return [m.name for m in _histogram_metrics(records, scorers)]


def run_plots(records: list[dict[str, Any]], folder: Path,
              scorers: Sequence[Scorer] | None = None) -> list[Path]:
    """Per-run plots: score histograms and, with a judge, error-taxonomy frequencies."""
    plots = []
    present = _histogram_metrics(records, scorers)
    if present:
        fig, axes = _panels(len(present), (3.2, 2.8), fixed=True)
        for ax, metric in zip(axes, present, strict=True):
            values = [r[metric.name] for r in records if r.get(metric.name) is not None]
            # one outline a panel, white lines between the bins: hist's patch a bin drew
            # the same picture at a third of the speed
            counts, edges = np.histogram(values, bins=list(metric.bins) if metric.bins else 10)
            ax.stairs(counts, edges, fill=True, color=BLUE)
            ax.vlines(edges[1:-1], 0, np.maximum(counts[:-1], counts[1:]), color="white",
                      linewidth=1)
            ax.set_title(f"{metric.name} (n={len(values)})", fontsize=9)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of tasks
        plots.append(save(fig, folder / "score_histograms.png", laid_out=True))
    assessed = [r["error_codes"] for r in records if isinstance(r.get("error_codes"), list)]
    if assessed:
        fig, ax = plt.subplots(figsize=(5, 3))
        codes = list(ERROR_CODES)
        ax.bar(codes, [sum(c in a for a in assessed) / len(assessed) for c in codes], color=RED)
        ax.set_ylabel("share of judged tasks")
        ax.set_title(f"Error taxonomy (n={len(assessed)})", fontsize=10)
        plots.append(save(fig, folder / "error_taxonomy.png"))
    return plots


def comparison_plot(rows: list[dict[str, Any]], folder: Path) -> Path | None:
    """One panel per metric, one bar per run with its 95% CI; a run without the metric
    gets no bar but the words "n/a" (a zero-height bar would read as a score of 0)."""
    metrics = [f"{m.name}_mean" for m in report_metrics()  # comparison metrics first
               if any(r.get(f"{m.name}_mean") is not None for r in rows)]
    if not rows or not metrics:
        return None
    fig, axes = _panels(len(metrics), (3.8, 3.6))
    labels = [r["run"] for r in rows]
    for ax, metric in zip(axes, metrics, strict=True):
        for x, row in enumerate(rows):
            value = row.get(metric)
            if value is None:
                ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=9, color="#777777")
                continue
            low = row.get(metric.replace("_mean", "_ci_low"))
            high = row.get(metric.replace("_mean", "_ci_high"))
            err = None if low is None or high is None else \
                [[max(0.0, value - low)], [max(0.0, high - value)]]
            ax.bar([x], [value], yerr=err, capsize=3, color=BLUE)
        ax.set_xticks(range(len(rows)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.set_xlabel("run", fontsize=8)
        ax.set_ylabel(metric.replace("_mean", " (mean)"), fontsize=8)
        ax.set_title(metric.replace("_mean", ""), fontsize=10)
    fig.suptitle("Systems compared (bars: mean, whiskers: bootstrap 95% CI, n/a: not "
                 "applicable)", fontsize=10)
    return save(fig, folder / "comparison.png")


def pareto_front(points: list[tuple[float, float]], key: str | None = None) -> list[int]:
    """Indices of the points no other point beats on both cost (lower) and quality (in
    ``key``'s direction, ``report.policy``; higher without a key), cheapest first."""
    sign = 1.0 if key is None or policy.higher_is_better(key) else -1.0
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -sign * points[i][1]))
    front: list[int] = []
    for i in order:
        if not front or sign * points[i][1] > sign * points[front[-1]][1]:
            front.append(i)
    return front


def _cost_points(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [r for r in rows if r.get(f"{key}_mean") is not None and task_cost(r) is not None]


def cost_plot_gap(rows: list[dict[str, Any]], key: str) -> str | None:
    """Why a cost-vs-quality plot would say nothing (None: it says something)."""
    scored = _cost_points(rows, key)
    if not scored:
        return f"No run has both a cost and `{key}`: there is no cost-vs-quality plot."
    if all(task_cost(r) == 0 for r in scored):
        return ("Every run cost $0 per task (the offline model has no prices), so a "
                "cost-vs-quality plot would put every run on one vertical line: it is left out.")
    return None


def cost_quality_plot(rows: list[dict[str, Any]], key: str, folder: Path) -> Path | None:
    """Cost per task (every task run, without the response cache) against the comparison
    metric, one point per run, with the Pareto front (the runs nothing beats on both)
    drawn through; None when it would say nothing (``cost_plot_gap``)."""
    if cost_plot_gap(rows, key) is not None:
        return None
    scored = _cost_points(rows, key)
    points = [(float(task_cost(r) or 0.0), float(r[f"{key}_mean"])) for r in scored]
    front = pareto_front(points, key)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([p[0] for p in points], [p[1] for p in points], color=BLUE, zorder=3)
    for (x, y), row in zip(points, scored, strict=True):
        ax.annotate(row["run"], (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.plot([points[i][0] for i in front], [points[i][1] for i in front], color=RED,
            linestyle="--", label="Pareto front", zorder=2)
    ax.set_xlabel("cost per task ($, every task run, without the response cache)")
    ax.set_ylabel(f"{key} (mean, {'higher' if policy.higher_is_better(key) else 'lower'} "
                  "is better)")
    ax.set_title("Cost vs quality")
    ax.legend(fontsize=8)
    return save(fig, folder / "cost_vs_quality.png")


def taxonomy_by_system(rows: list[dict[str, Any]], folder: Path) -> Path | None:
    with_codes = [r for r in rows if any(r.get(f"error_rate_{c}") is not None for c in ERROR_CODES)]
    if not with_codes:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / len(with_codes)
    for i, r in enumerate(with_codes):
        xs = [j + i * width for j in range(len(ERROR_CODES))]
        rates = [r.get(f"error_rate_{c}") for c in ERROR_CODES]
        ax.bar([x for x, v in zip(xs, rates, strict=True) if v is not None],
               [v for v in rates if v is not None], width, label=r["run"])
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(ERROR_CODES))], list(ERROR_CODES))
    ax.set_xlabel("error code")
    ax.set_ylabel("share of judged tasks")
    ax.set_title("Error taxonomy by system")
    ax.legend(fontsize=8)
    return save(fig, folder / "error_taxonomy_by_system.png")


def loops_plot_gap(points: list[tuple[float, float]], swept: bool = False) -> str | None:
    """Why a recall-vs-loops plot would say nothing (None: it says something); ``swept``:
    the sweep already varies ``max_loops`` (the loop-budget curve shows it)."""
    if not points:
        return "No agentic run with retrieval gold in this sweep."
    loops = {p[0] for p in points}
    if len(loops) == 1:
        hint = ("the loop-budget curve below shows recall at each budget" if swept else
                "sweep `max_loops` to see how recall grows with the budget")
        return (f"Every agentic task used {next(iter(loops)):.0f} loops, so recall against "
                f"loops would be one vertical line: the plot is left out ({hint}).")
    return None


def recall_vs_loops(points: list[tuple[float, float]], folder: Path) -> Path | None:
    """A-RAG: retrieval recall of each task against the loops it used; None when it would
    say nothing (``loops_plot_gap``)."""
    if loops_plot_gap(points) is not None:
        return None
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.scatter([p[0] for p in points], [p[1] for p in points], alpha=0.6, color=BLUE)
    ax.set_xlabel("loops (model calls)")
    ax.set_ylabel("retrieval recall")
    ax.set_title(f"A-RAG: recall vs loops (n={len(points)})")
    return save(fig, folder / "recall_vs_loops.png")


def loop_budget_curve(rows: list[dict[str, Any]], key: str, folder: Path) -> Path | None:
    """The comparison score and retrieval recall of the agentic runs against their loop
    budget (only scores on the score axis), and on its own axis what a task costs at each
    budget (every task run, without the response cache): only when some cost is known and
    not 0 (an axis of zeros or unknowns would draw a cost nobody paid)."""
    points = sorted(((int(r["max_loops"]), r) for r in rows  # two agents may share a budget
                     if r.get("agentic") and r.get("max_loops") is not None), key=lambda p: p[0])
    if len({p for p, _ in points}) < 2:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4))
    xs = [p for p, _ in points]
    for metric in dict.fromkeys([f"{key}_mean", "retrieval_recall_mean"]):
        ys = [r.get(metric) for _, r in points]
        if all(y is not None for y in ys):
            ax.plot(xs, [float(y) for y in ys if y is not None], marker="o",
                    label=metric.replace("_mean", ""))
    ax.set_xlabel("max_loops")
    ax.set_ylabel("score")
    costs = [task_cost(r) for _, r in points]
    if all(c is not None for c in costs) and any(costs):
        right = ax.twinx()
        right.plot(xs, [float(c) for c in costs if c is not None], marker="s", color="#555555",
                   linestyle=":", label="cost per task ($)")
        right.set_ylabel("cost per task ($, without the response cache)")
        right.legend(fontsize=8, loc="lower right")
    ax.set_title("Loop-budget curve of the agentic system")
    ax.legend(fontsize=8, loc="upper left")
    return save(fig, folder / "loop_budget_curve.png")


ATTRIBUTION_COLOURS = {"covered": "#55A868", "retrieved_unused": "#DD8452",
                       "not_retrieved": RED, "unknown": "#BBBBBB"}


def attribution_plot(bars: list[tuple[str, dict[str, float], float | None]], folder: Path
                     ) -> Path | None:
    """Per run, a stacked bar of its gold facts by status (shares), and beside it the share
    of its checked claims that nothing it read supports."""
    if not bars:
        return None
    fig, (facts, claims) = plt.subplots(1, 2, figsize=(9, 0.6 * len(bars) + 1.8),
                                        gridspec_kw={"width_ratios": [3, 1]}, sharey=True)
    names = [run for run, _, _ in bars]
    left = [0.0] * len(bars)
    for status, colour in ATTRIBUTION_COLOURS.items():
        widths = [shares[status] for _, shares, _ in bars]
        facts.barh(names, widths, left=left, color=colour, label=status.replace("_", " "))
        left = [a + b for a, b in zip(left, widths, strict=True)]
    facts.set_xlim(0, 1)
    facts.set_xlabel("share of gold facts")
    facts.set_title("Where gold facts were lost")
    facts.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=4)
    unsupported = [u if u is not None else 0.0 for _, _, u in bars]
    claims.barh(names, unsupported, color=RED)
    for y, u in enumerate(u for _, _, u in bars):
        if u is None:
            claims.text(0.01, y, "no claims", va="center", fontsize=7)
    claims.set_xlim(0, 1)
    claims.set_xlabel("share of claims")
    claims.set_title("Unsupported claims")
    return save(fig, folder / "attribution.png")


def crossover_plot(rows: list[dict[str, Any]], path: Path, title: str) -> Path | None:
    """A pair's paired difference by bin of a numeric feature (``slices.jsonl`` rows): the
    bin's mean difference with its bootstrap 95% CI, at the bin's middle, and the zero line
    (above it the first run leads)."""
    rows = [r for r in rows if r.get("lo") is not None and r.get("hi") is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.6))
    mids = [(r["lo"] + r["hi"]) / 2 for r in rows]
    diffs = [r["diff"] for r in rows]
    err = [[max(0.0, r["diff"] - r["ci_low"]) if r["ci_low"] is not None else 0.0 for r in rows],
           [max(0.0, r["ci_high"] - r["diff"]) if r["ci_high"] is not None else 0.0
            for r in rows]]
    ax.errorbar(mids, diffs, yerr=err, fmt="o-", capsize=4, color=BLUE)
    ax.axhline(0.0, color="#777777", linewidth=1, linestyle="--")
    for x, r in zip(mids, rows, strict=True):
        ax.annotate(f"n={r['n']}", (x, r["diff"]), textcoords="offset points", xytext=(0, 8),
                    ha="center", fontsize=7)
    ax.set_xlabel(f"{rows[0]['feature']} (bin middle)", fontsize=9)
    ax.set_ylabel(f"{rows[0]['a']} − {rows[0]['b']}", fontsize=9)
    ax.set_title(title, fontsize=10)
    return save(fig, path)
