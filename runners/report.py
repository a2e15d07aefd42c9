"""The sweep comparison attached to the parent run: a table and plots of its child runs."""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from runners.track import REUSED_RUNS_FILE

log = logging.getLogger(__name__)

HEADLINE = ("rouge1_f1_mean", "rouge2_f1_mean", "rougeL_f1_mean", "bertscore_f1_mean",
            "retrieval_recall_mean", "retrieval_precision_mean", "word_count_mean",
            "loops_mean", "cost_usd_total", "latency_ms_p50", "latency_ms_p90", "n_tasks",
            "n_errors", "n_skipped")
PLOTTED = ("rouge2_f1_mean", "bertscore_f1_mean", "retrieval_recall_mean",
           "retrieval_precision_mean")


def child_runs(client, parent: dict[str, str]) -> list[Any]:
    """The sweep's job runs: its children plus finished runs it reused unchanged."""
    runs = client.search_runs(
        [parent["experiment_id"]],
        filter_string=f"tags.mlflow.parentRunId = '{parent['run_id']}'",
        order_by=["attributes.start_time ASC"],
    )
    reused = Path(parent.get("sweep_dir", "")) / REUSED_RUNS_FILE
    if parent.get("sweep_dir") and reused.exists():
        ids = [json.loads(line)["run_id"] for line in reused.read_text().splitlines() if line]
        runs += [client.get_run(i) for i in dict.fromkeys(ids)]
    return runs


def comparison_rows(runs: list[Any]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        row: dict[str, Any] = {"run": r.info.run_name, "system": r.data.tags.get("system", ""),
                               "status": r.info.status,
                               "max_loops": r.data.params.get("max_loops")}
        for key in HEADLINE:
            row[key] = r.data.metrics.get(key)
        rows.append(row)
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "_no child runs_\n"
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        out.append("| " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    return "\n".join(out) + "\n"


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summarize_sweep(client, parent: dict[str, str]) -> None:
    runs = child_runs(client, parent)
    rows = comparison_rows(runs)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "comparison.md").write_text(
            "# Sweep comparison\n\n" + markdown_table(rows), encoding="utf-8")
        client.log_artifact(parent["run_id"], str(folder / "comparison.md"))
        for plot in (_bar_plot(rows, folder), _loop_curve(rows, folder)):
            if plot is not None:
                client.log_artifact(parent["run_id"], str(plot), "plots")
    log.info("sweep comparison of %d runs logged to parent %s", len(rows), parent["run_id"])


def _bar_plot(rows: list[dict[str, Any]], folder: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    finished = [r for r in rows if r["status"] == "FINISHED"]
    if not finished:
        return None
    fig, axes = plt.subplots(1, len(PLOTTED), figsize=(4 * len(PLOTTED), 3.5))
    for ax, metric in zip(axes, PLOTTED, strict=True):
        labels = [r["run"] for r in finished]
        values = [r[metric] if r[metric] is not None else 0.0 for r in finished]
        bars = ax.bar(range(len(labels)), values, color="#4C72B0")
        for bar, r in zip(bars, finished, strict=True):
            if r[metric] is None:
                bar.set_hatch("//")
                bar.set_alpha(0.3)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(metric.replace("_mean", ""), fontsize=10)
    fig.suptitle("Sweep comparison (hatched: not applicable)")
    fig.tight_layout()
    path = folder / "comparison.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _loop_curve(rows: list[dict[str, Any]], folder: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = sorted(
        (int(r["max_loops"]), r) for r in rows
        if r["status"] == "FINISHED" and r["system"] == "arag" and r["max_loops"] is not None
    )
    if len({p for p, _ in points}) < 2:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [p for p, _ in points]
    for metric in PLOTTED:
        ys = [r[metric] for _, r in points]
        if all(y is not None for y in ys):
            ax.plot(xs, ys, marker="o", label=metric.replace("_mean", ""))
    ax.set_xlabel("max_loops")
    ax.set_ylabel("score")
    ax.set_title("A-RAG loop-budget curve")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = folder / "loop_budget_curve.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


HISTOGRAMS = ("geval_faithfulness", "geval_coverage", "rouge2_f1", "bertscore_f1",
              "retrieval_recall", "numeric_precision")


def run_plots(records: list[dict[str, Any]], folder: Path) -> list[Path]:
    """Per-run plots: score histograms and, with a judge, error-taxonomy frequencies."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from metrics.geval import ERROR_CODES

    plots = []
    present = [f for f in HISTOGRAMS if any(r.get(f) is not None for r in records)]
    if present:
        fig, axes = plt.subplots(1, len(present), figsize=(3.2 * len(present), 3), squeeze=False)
        for ax, field in zip(axes[0], present, strict=True):
            values = [r[field] for r in records if r.get(field) is not None]
            bins = [0.5, 1.5, 2.5, 3.5, 4.5, 5.5] if field.startswith("geval_") else 10
            ax.hist(values, bins=bins, color="#4C72B0", edgecolor="white")
            ax.set_title(f"{field} (n={len(values)})", fontsize=9)
        fig.tight_layout()
        path = folder / "score_histograms.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        plots.append(path)
    assessed = [r["error_codes"] for r in records if isinstance(r.get("error_codes"), list)]
    if assessed:
        fig, ax = plt.subplots(figsize=(5, 3))
        codes = list(ERROR_CODES)
        ax.bar(codes, [sum(c in a for a in assessed) / len(assessed) for c in codes],
               color="#C44E52")
        ax.set_ylabel("share of judged tasks")
        ax.set_title(f"Error taxonomy (n={len(assessed)})", fontsize=10)
        fig.tight_layout()
        path = folder / "error_taxonomy.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        plots.append(path)
    return plots
