"""``python -m report <parent run id>``: rebuild a sweep's report and its MLflow description
from the stored runs, with the settings the sweep wrote it with (tag ``report_settings``;
only ``--decide-on`` and ``--human-labels`` override them), and print its verdict. A rebuild
that cannot write (a full disk) names the path and the key that chose it, leaves the parent
FAILED and exits 1; one that succeeds ends it FINISHED (docs/running.md)."""

from __future__ import annotations

import argparse
import json
import sys
from types import SimpleNamespace
from typing import Any

from arag.config import ConfigError
from report import console, overview, policy
from report.report import (
    REPORT_SETTINGS_TAG,
    keep_baseline_section,
    stored_report,
    write_sweep_report,
)
from tracking.human_labels import LabelsError, check_judged, judged_fields, read_labels_file
from tracking.paths import URI_ENV, default_tracking_uri, store_line
from tracking.runs import TrackingError
from tracking.sweeps import sweep_info

SUBCOMMANDS = (("compare", "hold a sweep against a baseline sweep, task by task (exit 3 on a "
                "regression)"),
               ("label-sample", "write a sample of a judged sweep's answers for people to "
                "label"))
REPORT_ERROR_TAG = "report_error"  # on a parent whose report could not be written


def check_decide_on(values: list[str], key: str = "report.decide_on") -> None:
    """The metrics a verdict decides on: each a per-task metric the scorers declare, named
    once (``run.py``'s ``report.decide_on`` and ``python -m report --decide-on`` alike)."""
    for ok, must, example in (
            (all(m in policy.decidable() for m in values),
             f"a list of per-task metric names the scorers declare, from {policy.decidable()}",
             "report.decide_on=[rouge2_f1,geval_faithfulness]"),
            (len(set(values)) == len(values), "a list naming each metric once",
             "report.decide_on=[" + ",".join(dict.fromkeys(values)) + "]")):
        if not ok:
            raise ConfigError(f"{key}={values!r} is invalid: it must be {must}. Fix: {example}")


def stored_settings(run: Any) -> dict[str, Any]:
    """What the sweep wrote its report with (empty: a sweep from before it kept them)."""
    try:
        return dict(json.loads(run.data.tags.get(REPORT_SETTINGS_TAG) or "{}"))
    except ValueError:
        return {}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m report", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="python -m report [-h] parent_run_id [options]\n"
              "       python -m report {compare,label-sample} ... (see <subcommand> --help)",
        description="Rebuild the report of a past sweep, with the settings it was written "
                    "with.",
        epilog="subcommands:\n" + "\n".join(f"  {name:<14}{what}" for name, what in SUBCOMMANDS))
    parser.add_argument("parent_run_id")
    parser.add_argument("--tracking-uri", default=None,
                        help="the MLflow store (default: $MLFLOW_TRACKING_URI, else "
                             "sqlite:///mlruns/mlflow.db)")
    parser.add_argument("--human-labels", metavar="FILE", default=None,
                        help="a JSON-lines labels file to hold the judge against, in place "
                             "of the sweep's report.human_labels (docs/validate-your-judge.md)")
    parser.add_argument("--decide-on", nargs="+", metavar="METRIC", default=None,
                        help="the metrics the verdict decides on, in order (default: the "
                             "sweep's report.decide_on)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        if args.decide_on is not None:
            check_decide_on(args.decide_on, "--decide-on")
        if args.human_labels:  # a bad file stops the command before anything is written
            read_labels_file(args.human_labels)
        uri, configured = open_store(args.tracking_uri)
    except (ConfigError, LabelsError, TrackingError) as exc:
        raise SystemExit(f"error: {exc}") from None
    print(store_line(configured, uri), file=sys.stderr)
    rebuild(uri, configured, args.parent_run_id, args.decide_on, args.human_labels)


def open_store(given: str | None) -> tuple[str, str]:
    """The store to read (as resolved, as given), checked as ``run.py`` checks
    ``tracking.uri``; one from ``$MLFLOW_TRACKING_URI`` is named so."""
    from tracking.storage import check_tracking

    configured = given if given is not None else default_tracking_uri()
    return check_tracking(SimpleNamespace(uri=configured, artifact_location=None)), configured


def rebuild(uri: str, configured: str, run_id: str, decide_on: list[str] | None,
            human_labels: str | None) -> None:
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(uri)  # traces are read through the fluent API (compare.html)
    client = MlflowClient(tracking_uri=uri)
    run = _parent(client, run_id, configured)
    settings = stored_settings(run)
    labels = human_labels or settings.get("human_labels")
    if human_labels:  # checked against what this sweep's judge scored, as run.py checks it
        _check_labels(client, run, human_labels)
    before = stored_report(client, run.info.run_id)
    try:  # labels that cannot be held against this sweep's judge: refused, nothing written
        result = write_sweep_report(
            client, sweep_info(run),
            decide_on=decide_on if decide_on is not None else settings.get("decide_on"),
            human_labels=labels, options=settings.get("options"))
        # the rebuilt report is the sweep's: its description answers as the report does
        keep_baseline_section(client, run.info.run_id, before)
        overview.publish(client, result)
    except LabelsError as exc:
        raise SystemExit(f"error: {exc}") from None
    except Exception as exc:  # a full disk, an unwritable artifact store or database
        why = write_failure(exc, client, run, uri)
        if why is None:
            raise
        try:  # the parent says so until a rebuild succeeds (a full database may refuse)
            client.set_tag(run.info.run_id, REPORT_ERROR_TAG, why[:5000])
            client.set_terminated(run.info.run_id, "FAILED")
        except Exception:  # noqa: BLE001 - the message below is what matters then
            pass
        raise SystemExit(f"error: the report could not be written: {why}") from None
    if REPORT_ERROR_TAG in run.data.tags:
        client.delete_tag(run.info.run_id, REPORT_ERROR_TAG)
    client.set_terminated(run.info.run_id, "FINISHED")
    print(console.verdict(result, configured))
    print(f"report logged to run {run.info.run_id}")


def _check_labels(client: Any, run: Any, path: str) -> None:
    from tracking.sweeps import child_runs

    runs = child_runs(client, sweep_info(run))
    judged = judged_fields([dict(r.data.metrics) for r in runs])
    judge = next((r.data.params.get("judge.name") for r in runs), None) or "none"
    try:
        check_judged(path, read_labels_file(path), judged, judge)
    except LabelsError as exc:
        raise SystemExit(f"error: {exc}") from None


def _parent(client: Any, run_id: str, configured: str) -> Any:
    """The sweep run ``run_id`` names in this store, or a one-line error naming both."""
    from tracking.sweeps import SweepNotFound, find_sweep

    try:
        return find_sweep(client, run_id, key="python -m report")
    except SweepNotFound as exc:
        raise SystemExit(f"error: {exc} (store: {store_line(configured)}; another store: "
                         f"--tracking-uri, or ${URI_ENV})") from None


def write_failure(exc: Exception, client: Any, run: Any, uri: str) -> str | None:
    """A failed write as one line: the path, what went wrong, where the report's files go
    and the key that chose that place; None when ``exc`` is no failed write."""
    import os

    from arag.files import is_storage_failure
    from tracking.storage import explain_write_failure

    where = client.get_experiment(run.info.experiment_id).artifact_location
    if not (isinstance(exc, OSError) and exc.errno and is_storage_failure(exc)):
        places = SimpleNamespace(tracking=SimpleNamespace(uri=uri, artifact_location=where),
                                 runner=SimpleNamespace(runs_dir="data/runs"),
                                 cache=SimpleNamespace(dir="data/cache"))
        explained = explain_write_failure(exc, places)  # the store's own database is full
        return None if explained is None else f"{explained}"
    path = exc.filename if isinstance(exc.filename, str) else None
    return (f"{path or 'a file of the report'}: {os.strerror(exc.errno)}. The report's files "
            f"go to the experiment's artifact location {where} (chosen by "
            "tracking.artifact_location when the experiment was made; a temporary folder "
            f"first). Fix: free space there (or in $TMPDIR), then python -m report "
            f"{run.info.run_id}")
