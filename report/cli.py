"""``python -m report <parent run id>``: rebuild a sweep's report and its MLflow
description from the stored runs (``report.report``), and print its verdict."""

from __future__ import annotations

import argparse
import sys

from report import console, overview
from report.report import keep_baseline_section, stored_report, write_sweep_report
from tracking.human_labels import LabelsError, read_labels_file
from tracking.paths import default_tracking_uri, resolve_tracking_uri, store_line
from tracking.sweeps import sweep_info

SUBCOMMANDS = (("compare", "hold a sweep against a baseline sweep, task by task (exit 3 on a "
                "regression)"),
               ("label-sample", "write a sample of a judged sweep's answers for people to "
                "label"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m report", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="python -m report [-h] parent_run_id [options]\n"
              "       python -m report {compare,label-sample} ... (see <subcommand> --help)",
        description="Rebuild the report of a past sweep.",
        epilog="subcommands:\n" + "\n".join(f"  {name:<14}{what}" for name, what in SUBCOMMANDS))
    parser.add_argument("parent_run_id")
    parser.add_argument("--tracking-uri", default=default_tracking_uri(),
                        help="the MLflow store (default: $MLFLOW_TRACKING_URI, else "
                             "sqlite:///mlruns/mlflow.db)")
    parser.add_argument("--human-labels", metavar="FILE", default=None,
                        help="a JSON-lines labels file to hold the judge against "
                             "(docs/validate-your-judge.md)")
    parser.add_argument("--decide-on", nargs="+", metavar="METRIC", default=None,
                        help="the metrics the verdict decides on, in order (default: the "
                             "sweep's report.decide_on)")
    args = parser.parse_args(argv)
    import mlflow
    from mlflow import MlflowClient

    if args.human_labels:
        try:  # a bad file stops the command before anything is written
            read_labels_file(args.human_labels)
        except LabelsError as exc:
            raise SystemExit(f"error: {exc}") from None
    uri = resolve_tracking_uri(args.tracking_uri)
    print(store_line(args.tracking_uri, uri), file=sys.stderr)
    mlflow.set_tracking_uri(uri)  # traces are read through the fluent API (compare.html)
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(args.parent_run_id)
    before = stored_report(client, run.info.run_id)
    try:  # labels that cannot be held against this sweep's judge: refused, nothing written
        result = write_sweep_report(client, sweep_info(run), decide_on=args.decide_on,
                                    human_labels=args.human_labels)
    except LabelsError as exc:
        raise SystemExit(f"error: {exc}") from None
    # the rebuilt report is the sweep's: its description answers as the report does
    keep_baseline_section(client, run.info.run_id, before)
    overview.publish(client, result)
    print(console.verdict(result, args.tracking_uri))
    print(f"report logged to run {run.info.run_id}")
