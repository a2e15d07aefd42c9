"""What a person sees in the terminal and first in MLflow: the headline metrics each child
run logs under ``headline/`` and the parent per child (``<child>/<metric>``, with a
comparison table), and the sweep's verdict (its quiet logs: ``tracking.logs``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from arag.redact import redact
from report import policy
from report.policy import comparison_order
from report.writers.cells import PLAIN, lacking
from report.writers.markdown import sweep_answer
from report.writers.verdict_words import stopped_words
from report.writers.words import say
from tracking.paths import DEFAULT_URI, resolve_tracking_uri, ui_address
from tracking.runs import RunTracker

if TYPE_CHECKING:
    from report.result import ReportResult
    from report.verdict import Decision

# (run metric, column title) after the comparison metric (docs/verdict.md: cost)
HEADLINE = (("retrieval_recall_mean", "retrieval recall"),
            ("cost_usd_uncached_per_task", "cost/task ($)"),
            ("cost_usd_per_task", "spent/task ($)"),
            ("judge_cost_usd_spent_total", "judge cost ($)"),
            ("latency_ms_p50", "P50 latency (ms)"), ("n_tasks", "n"))
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


def comparison_rows(finished: list[dict[str, Any]], key: str,
                    decided: Sequence[Decision] = ()) -> list[dict[str, Any]]:
    """One row per run (``verdict.headline_rows``): its name, system, headline numbers with
    the n of each score, and run id; then, for each test of the verdict's family
    (``decided``) the run is in, its raw and adjusted p against the other run
    (``<metric>: p vs <run>``, ``<metric>: Holm p vs <run>``)."""
    others = list(dict.fromkeys(d.key for d in decided if d.key != key))
    columns = [(f"{key}_mean", key), (f"{key}_n", f"{key} n"),
               *((f"{m}_{part}", f"{m}{suffix}") for m in others
                 for part, suffix in (("mean", ""), ("n", " n"))),
               *HEADLINE, ("retrieval_recall_n", "retrieval recall n"), ("n_errors", "errors")]
    return [{"run": r["run"], "system": r["system"],
             **{title: r.get(name) for name, title in columns}, **_tests_of(r, decided),
             "run_id": r["run_id"]}
            for r in finished]


def _tests_of(run: dict[str, Any], decided: Sequence[Decision]) -> dict[str, float | None]:
    """The family's p-values of the tests ``run`` is in, raw and adjusted, by metric and
    opponent (None: too few untied pairs to test)."""
    out: dict[str, float | None] = {}
    for d in decided:
        if run["run_id"] not in (d.first["run_id"], d.second["run_id"]):
            continue
        other = d.second if d.first["run_id"] == run["run_id"] else d.first
        raw = d.paired.p if d.paired is not None else None
        out[f"{d.key}: p vs {other['run']}"] = raw
        out[f"{d.key}: {policy.CORRECTION} p vs {other['run']}"] = d.p_adjusted
    return out


def log_comparison(client: Any, parent_run_id: str, experiment_id: str,
                   finished: list[dict[str, Any]], key: str,
                   decided: Sequence[Decision] = ()) -> None:
    """The parent run's metrics (``<child>/<metric>``) and comparison table, so the
    parent answers the question without expanding it; ``finished``: the headline rows
    (``verdict.headline_rows``: scores on their common task sets). Metrics go through the
    runs' own logging (rounded as every run's are)."""
    RunTracker(client, parent_run_id, experiment_id).log_metrics({
        f"{metric_label(r['run'])}/{name.removeprefix('headline/')}": value
        for r in finished
        for name, value in headline_metrics({**r, f"{key}_mean": r.get(f"{key}_mean")},
                                            prefix="").items()})
    rows = comparison_rows(finished, key, decided)
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


def table(rows: list[dict[str, Any]], key: str) -> str:
    """The headline table as the terminal shows it (every writer's columns and cells)."""
    from report.writers.console import headline_lines

    return "\n".join(headline_lines(rows, key))


def unknown_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Which runs' cost or latency is unknown and how many of their records lack it (runs
    lacking it in the same share said together)."""
    said = {"cost_usd": ("cost_per_task", "cost"), "latency_ms": ("latency_ms_p50", "latency")}
    out = []
    for field, (shown, what) in said.items():
        groups: dict[tuple[int, int], list[str]] = {}
        for r in rows:
            if r.get(shown) is None and r.get("lacking", {}).get(field):
                groups.setdefault((r["lacking"][field], int(r.get("n_records", 0))),
                                  []).append(r["run"])
        parts = [f"{', '.join(runs) if len(runs) <= 2 else f'{len(runs)} runs'} "
                 f"({lacking(missing, total)})" for (missing, total), runs in groups.items()]
        if parts:
            out.append(f"{what} unknown, not 0: " + "; ".join(parts))
    return out


def ui_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """Where the run is in the MLflow UI: the tracking server itself, or ``make ui``'s over
    the store the run is in (``make ui STORE=...`` for any but the default one)."""
    page = f"#/experiments/{experiment_id}/runs/{run_id}/artifacts"
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri.rstrip('/')}/{page}"
    default = resolve_tracking_uri(DEFAULT_URI)
    store = "" if resolve_tracking_uri(tracking_uri) == default else f" STORE={redact(tracking_uri)}"
    return f"make ui{store}, then {ui_address()}/{page}"


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


def plain(markdown: str) -> str:
    """Report Markdown as terminal text: no emphasis, code marks or quote bars."""
    text = re.sub(r"\*\*|`", "", markdown)
    return "\n".join(line.removeprefix("> ").removeprefix(">") for line in text.splitlines())


NOTE_TAG = "mlflow.note.content"  # the run description, where a report writes its verdict


def stored_verdict(run: Any) -> list[str]:
    """A sweep run's verdict as its report wrote it (the run's description: the answer,
    caveats, the verdict, every run), as terminal lines; a run without one says so."""
    note = run.data.tags.get(NOTE_TAG) or ""
    kept = [p for p in note.split("\n\n") if p.strip() and not p.startswith("Artifacts:")]
    if not kept:
        return ["(its description holds no verdict: python -m report "
                f"{run.info.run_id} writes it again)", ""]
    return [*plain("\n\n".join(kept)).splitlines(), ""]


def verdict(result: ReportResult, tracking_uri: str) -> str:
    """The end of a sweep in the terminal (``report.writers.console``): the answer, the
    caveats grouped by kind, the headline table, the most important findings and where to
    look; ``report.console=full``: everything the report says."""
    from report.writers import console as writer

    addresses = where_to_look(result.artifact_uri, tracking_uri, result.experiment_id,
                              result.run_id)
    not_finished = [r for r in result.rows if r["status"] != "FINISHED"]
    extra = [*unknown_lines(result.headline)]
    if not_finished:  # said first: what a run did not do comes before what it cost
        extra.insert(0, "not finished: " + ", ".join(
            f"{r['run']} ({'; '.join(filter(None, [r['status'], stopped_words(r)]))})"
            for r in not_finished))
    keys = result.keys or [result.key]
    answer = sweep_answer(result.claims, keys, result.answers, result.finished, PLAIN) \
        if result.answers else result.answer  # (a model built by hand has only its words)
    trust = [say(c, PLAIN) for c in result.trust]
    if result.console == "full":
        lines = writer.full(answer, result.caveat_notes, result.headline, result.key, keys,
                            result.claims, [*extra, *trust], addresses)
    else:  # the judge's measured agreement with people is said first among the rest
        lines = writer.summary(answer, result.caveat_notes, result.headline,
                               result.key, result.claims, result.answered,
                               [*extra[:1], *trust[:1], *extra[1:]], addresses)
    return "\n".join(["", *lines])
