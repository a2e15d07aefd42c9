"""The analyses a sweep report runs over its records, each returning an ``Analysis``
(``report/findings.py``): findings the writers render, JSON-lines rows and metrics for the
parent run, plots for report.html.

An analysis is a function ``(Inputs) -> Analysis`` listed in ``ANALYSES``; it returns an
empty ``Analysis`` when it does not apply (one system, no gold, an option not set). The
report runs them in this order, after the key finding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from report.findings import Analysis
from report.verdict import Decision, TaskSets
from tracking.human_labels import HumanLabel

Row = dict[str, Any]


@dataclass(frozen=True)
class Inputs:
    """What every analysis may read: the runs, their records, the verdict's task sets and
    tests, and the sweep's ``report`` options (``report.slice_by``, ...; empty when a report
    is rebuilt without them)."""

    rows: list[Row]  # every run of the report (``report.report._row``)
    finished: list[Row]  # the compared ones
    records: dict[str, list[Row]]  # run id -> eval records
    sets: TaskSets
    keys: list[str]  # the decision metrics (report.decide_on)
    decided: list[Decision]  # the verdict's family of tests
    options: Mapping[str, Any] = field(default_factory=dict)
    labels: list[HumanLabel] = field(default_factory=list)  # people's (report.human_labels)


ANALYSES: list[Callable[[Inputs], Analysis]] = []


def run_all(inputs: Inputs) -> Analysis:
    """Every registered analysis, in order, merged into one."""
    merged = Analysis()
    for analysis in ANALYSES:
        merged.extend(analysis(inputs))
    return merged


# the registered analyses, in the report's order (imported here, after ANALYSES exists,
# since each imports Inputs from this module)
from report import attribution  # noqa: E402
from report.corrected import judge_corrected  # noqa: E402
from report.factcheck_quote import factcheck_accuracy  # noqa: E402
from report.self_preference import self_preference  # noqa: E402
from report.sequential import sequential_verdict  # noqa: E402
from report.slices import slices_analysis  # noqa: E402

ANALYSES += [sequential_verdict, slices_analysis, attribution.analysis, judge_corrected, factcheck_accuracy,
             self_preference]
