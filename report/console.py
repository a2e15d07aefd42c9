"""What a person sees in the terminal and first in MLflow: quiet logs, the headline
metrics, and the sweep's verdict.

Quiet by default (``runner.verbose=0``): our own INFO lines and one progress bar per job,
no artifact-download or weight-loading bars, HTTP request lines only at DEBUG.
``runner.verbose=1`` lets the libraries' INFO lines through, ``2`` is DEBUG everywhere.

The headline of a run is the comparison metric, retrieval recall, cost per task, P50
latency and the number of tasks: the console's verdict table shows them, each child run
logs them under ``headline/`` (MLflow charts a run's prefixed metrics first), and the
sweep's parent run logs them per child as ``<child>/<metric>`` next to a comparison table.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from report.policy import comparison_order
from report.sections import dataset_caveats

if TYPE_CHECKING:
    from report.report import ReportResult

# (run metric, column title) after the comparison metric
HEADLINE = (("retrieval_recall_mean", "retrieval recall"), ("cost_usd_mean", "cost/task ($)"),
            ("latency_ms_p50", "P50 latency (ms)"), ("n_tasks", "n"))
# libraries whose INFO lines are noise at verbosity 0 (httpx: one line per HTTP request)
# (anthropic 2.x sends through httpx2, which logs one INFO line per request)
NOISY = ("httpx", "httpx2", "httpcore", "anthropic", "openai", "absl", "mlflow", "alembic",
         "sentence_transformers", "transformers", "huggingface_hub", "urllib3", "filelock",
         "matplotlib", "faiss")
UI_PORT = 5000


def quiet(verbose: int = 0) -> None:
    """Set the libraries' log levels and progress bars for ``runner.verbose``."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if verbose < 1:
        os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        if "transformers" in sys.modules:  # read once at import: switch it off directly
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
    import mlflow  # noqa: F401 - it sets its own logger's level on import: import it first

    level = logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING
    for name in NOISY:
        logging.getLogger(name).setLevel(level)
    if verbose >= 2:
        logging.getLogger().setLevel(logging.DEBUG)


def quality_key(metrics: dict[str, Any]) -> str | None:
    """The first comparison metric the run has a mean of."""
    return next((k for k in comparison_order() if metrics.get(f"{k}_mean") is not None), None)


def headline_metrics(metrics: dict[str, Any], prefix: str = "headline/") -> dict[str, float]:
    """The run's headline numbers under ``prefix``."""
    key = quality_key(metrics)
    names = ([f"{key}_mean"] if key else []) + [name for name, _ in HEADLINE]
    return {f"{prefix}{n}": float(metrics[n]) for n in names if metrics.get(n) is not None}


def metric_label(run_name: str) -> str:
    """A run's name as a metric-name prefix (MLflow allows letters, digits, ``_-. :``)."""
    return re.sub(r"[^\w\-. :]", "_", run_name.replace("=", ":")).strip() or "run"


def comparison_rows(finished: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """One row per finished run: its name, system, headline numbers and run id."""
    columns = [(f"{key}_mean", key), *HEADLINE, ("n_errors", "errors")]
    return [{"run": r["run"], "system": r["system"],
             **{title: r.get(name) for name, title in columns}, "run_id": r["run_id"]}
            for r in finished]


def log_comparison(client: Any, parent_run_id: str, finished: list[dict[str, Any]],
                   key: str) -> None:
    """The parent run's metrics (``<child>/<metric>``) and comparison table, so the
    parent answers the question without expanding it."""
    import time

    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    items = [Metric(f"{metric_label(r['run'])}/{name.removeprefix('headline/')}", value, now, 0)
             for r in finished
             for name, value in headline_metrics({**r, f"{key}_mean": r.get(f"{key}_mean")},
                                                 prefix="").items()]
    if items:
        client.log_batch(parent_run_id, metrics=items)
    rows = comparison_rows(finished, key)
    if rows:
        _log_table(client, parent_run_id, rows, "comparison_table.json")


def _log_table(client: Any, run_id: str, rows: list[dict[str, Any]], name: str) -> None:
    """``log_table`` appends to an existing table: a rebuilt report replaces it instead."""
    import tempfile
    from pathlib import Path

    import pandas as pd

    existing = {a.path for a in client.list_artifacts(run_id)}
    frame = pd.DataFrame(rows)
    if name not in existing:
        client.log_table(run_id, data=frame, artifact_file=name)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(frame.to_json(orient="split", index=False), encoding="utf-8")
        client.log_artifact(run_id, str(path))


def _cell(value: Any, digits: int) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def table(finished: list[dict[str, Any]], key: str) -> str:
    """The verdict's table: run x comparison metric, recall, cost, P50 latency, and how
    many of its tasks each run answered (a skipped or errored task has no score)."""
    columns = [(f"{key}_mean", key, 3), ("retrieval_recall_mean", "recall", 3),
               ("cost_usd_mean", "cost/task $", 5), ("latency_ms_p50", "P50 ms", 0)]
    header = ["run", *(title for _, title, _ in columns), "answered"]
    body = [[r["run"], *(_cell(r.get(name), digits) for name, _, digits in columns),
             f"{r.get('n_answered', 0):.0f}/{r.get('n_tasks', 0):.0f}"] for r in finished]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in [header, *body]]
    return "\n".join(lines)


def ui_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """Where the run is in the MLflow UI: the tracking server itself, or ``make ui``'s."""
    page = f"#/experiments/{experiment_id}/runs/{run_id}/artifacts"
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri.rstrip('/')}/{page}"
    return f"make ui, then http://127.0.0.1:{UI_PORT}/{page}"


def local_path(artifact_uri: str) -> str:
    """A file:// artifact URI as a path (other stores: the URI itself)."""
    parsed = urlparse(artifact_uri)
    return unquote(parsed.path) if parsed.scheme == "file" else artifact_uri


def where_to_look(report_uri: str, tracking_uri: str, experiment_id: str, run_id: str
                  ) -> list[str]:
    """The report, the side-by-side page and the run in the MLflow UI."""
    report = local_path(report_uri)
    return [f"report:  {report}",
            f"compare: {report.removesuffix('report.html')}compare.html (every task, side by "
            "side)",
            f"MLflow:  {ui_url(tracking_uri, experiment_id, run_id)}"]


def verdict(result: ReportResult, tracking_uri: str) -> str:
    """The end of a sweep in the terminal: the table, the key finding, where to look."""
    finished = result.finished
    finding = re.sub(r"\*\*|`", "", result.finding)
    lines = ["", table(finished, result.key), "", finding,
             *(f"note: {n}" for n in dataset_caveats(finished)), "",
             *where_to_look(result.artifact_uri, tracking_uri,
                            result.experiment_id, result.run_id)]
    not_finished = [r for r in result.rows if r["status"] != "FINISHED"]
    if not_finished:
        lines.insert(3, "not finished: " + ", ".join(f"{r['run']} ({r['status']})"
                                                      for r in not_finished))
    return "\n".join(lines)
