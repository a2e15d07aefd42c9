"""What a written report found (``ReportResult``), for the console's verdict and the
MLflow overview: its own module so the console needs nothing of the report's builder."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from report import verdict
from report.model import Claim, Note
from report.verdict import headline_rows, task_sets


def compared(row: dict[str, Any]) -> bool:
    """A run whose records the report compares: finished, or stopped early by the cost cap
    (KILLED; what it answered before the cap is as good as any other answer)."""
    return row["status"] in ("FINISHED", "KILLED")



@dataclass
class ReportResult:
    """What a written report found, for the console's verdict."""

    run_id: str  # the run the report was logged to
    experiment_id: str
    rows: list[dict[str, Any]]  # one per job run, finished first
    records: dict[str, list[dict[str, Any]]]  # run id -> eval records
    key: str  # the comparison metric
    artifact_uri: str  # where report.html is
    finding: str  # the key finding, as the report states it
    caveats: str = ""  # the report's caveats banner (empty: none apply)
    notes: str = ""  # notes on the figures: unreadable judge replies, resumed latencies
    judge_validation: str = ""  # the judge's measured agreement with people, or the caveat
    keys: list[str] = field(default_factory=list)  # the decision metrics (report.decide_on)
    decided: list[verdict.Decision] = field(default_factory=list)  # the verdict's tests
    answer: str = ""  # the one sentence that answers the question, said first everywhere
    claims: list[Claim] = field(default_factory=list)  # every analysis's claims
    caveat_notes: list[Note] = field(default_factory=list)  # every analysis's notes
    answered: list[Claim] = field(default_factory=list)  # the claims the answer states
    console: str = "summary"  # report.console: summary or full
    headline: list[dict[str, Any]] = field(default_factory=list)  # verdict.headline_rows

    @property
    def finished(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if compared(r)]

    def __post_init__(self) -> None:
        if not self.headline:  # one table for every writer (``verdict.headline_rows``)
            self.headline = headline_rows(task_sets(self.finished, self.records),
                                          self.finished, self.key, self.keys[1:])
