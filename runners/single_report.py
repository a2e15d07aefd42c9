"""A single run's report (no sweep): written once, and again after a kill while writing it."""

from __future__ import annotations

from typing import Any

from report import overview
from report.console import verdict, where_to_look
from report.report import write_run_report

REPORT_TAG = "report_written"  # a single run's report is complete: its last step sets it


def single_run_report(client: Any, run: Any, tracking_uri: str) -> None:
    """A single run's report and verdict, written unless the run already holds a complete
    one (the tag is set last, so a run killed while its report was written gets it from
    the next run of the same command); then where to read it."""
    if run.data.tags.get(REPORT_TAG) == "true":
        print("\n".join([f"Nothing new: the verdict of run {run.info.run_id} is in its report.",
                         *where_to_look(f"{run.info.artifact_uri}/report.html", tracking_uri,
                                        run.info.experiment_id, run.info.run_id)]), flush=True)
        return
    result = write_run_report(client, run.info.run_id)
    overview.publish(client, result)
    client.set_tag(run.info.run_id, REPORT_TAG, "true")
    print(verdict(result, tracking_uri), flush=True)
