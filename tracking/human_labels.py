"""People's labels of a sweep's answers, read from a labels file (``report.human_labels``)
or from the feedback people entered on the answers' traces in the MLflow UI (an assessment
whose source type is HUMAN), into one form the report compares with the judge.

A labels file is JSON lines, one label each::

    {"task_id": "AAN_q3_2021", "system": "arag", "dimension": "geval_faithfulness",
     "score": 4, "labeller": "ana"}

``score`` is 1-5 (the judge's scale) or 1/0 (consistent/inconsistent); ``null`` is a line
not labelled yet (the template ``python -m report label-sample`` writes) and is skipped.
``answer`` and ``question`` may be present (the template carries them for the labeller).
A bad line stops the reading with the file, the line and the fix.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracking.runs import TrackingError

log = logging.getLogger(__name__)
REQUIRED = ("task_id", "system", "dimension", "score", "labeller")
CONTEXT = ("answer", "question")  # what a template line shows the labeller; not read
FEEDBACK_SOURCE = "MLflow feedback"
SCORES = "an integer 1-5, or 1/0 for consistent/inconsistent (null: not labelled yet)"


class LabelsError(TrackingError):
    pass


@dataclass(frozen=True)
class HumanLabel:
    """One person's score of one answer on one dimension."""

    task_id: str
    system: str
    dimension: str
    score: int
    labeller: str
    source: str  # "file <path>" or FEEDBACK_SOURCE


def score_problem(score: Any) -> str | None:
    """Why ``score`` is not a label's score (None: it is one)."""
    if isinstance(score, bool) or not isinstance(score, int | float):
        return f"score {score!r} is not a number"
    if not math.isfinite(score) or score != int(score) or not 0 <= score <= 5:
        return f"score {score!r} is not {SCORES}"
    return None


def read_labels_file(path: str | Path) -> list[HumanLabel]:
    """Every labelled line of a labels file; a missing file or a bad line is a
    ``LabelsError`` naming the file, the line and the fix."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise LabelsError(f"report.human_labels={path}: no such file. Fix: give the path of a "
                          "JSON-lines labels file (python -m report label-sample writes one)")
    labels = []
    source = f"file {file.name}"
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            label = _parse_line(line, f"{file}:{number}", source)
            if label is not None:
                labels.append(label)
    return labels


def _parse_line(line: str, where: str, source: str) -> HumanLabel | None:
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LabelsError(f"{where}: not JSON ({exc.msg}). Fix: one JSON object per line, "
                          f"with keys {', '.join(REQUIRED)}") from None
    if not isinstance(item, dict):
        raise LabelsError(f"{where}: not a JSON object. Fix: one object per line, with keys "
                          f"{', '.join(REQUIRED)}")
    missing = [k for k in REQUIRED if k not in item]
    unknown = sorted(set(item) - set(REQUIRED) - set(CONTEXT))
    if missing or unknown:
        what = "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                         + ([f"unknown key {', '.join(unknown)}"] if unknown else []))
        raise LabelsError(f"{where}: {what}. Fix: each line has exactly the keys "
                          f"{', '.join(REQUIRED)} (answer and question may stay)")
    if item["score"] is None:
        return None
    problem = score_problem(item["score"])
    if problem:
        raise LabelsError(f"{where}: {problem}. Fix: score is {SCORES}")
    for key in ("task_id", "system", "dimension", "labeller"):
        if not isinstance(item[key], str) or not item[key].strip():
            raise LabelsError(f"{where}: {key} {item[key]!r} is not a name. Fix: {key} is a "
                              "non-empty string (labeller: who labelled, e.g. your initials)")
    return HumanLabel(item["task_id"], item["system"], item["dimension"], int(item["score"]),
                      item["labeller"].strip(), source)


def read_feedback_labels(experiment_id: str, systems: dict[str, str]) -> list[HumanLabel]:
    """The HUMAN feedback on the traces of the runs ``systems`` maps (run id -> system):
    one label per feedback whose value is a score (a yes/no answer counts as 1/0); a
    feedback that is not one is logged and left out."""
    import mlflow

    labels = []
    for run_id, system in systems.items():
        traces = mlflow.search_traces(locations=[experiment_id], run_id=run_id,
                                      return_type="list", include_spans=False)
        for trace in traces:
            task_id = trace.info.trace_metadata.get("task_id")
            for assessment in trace.info.assessments or []:
                label = _feedback_label(assessment, task_id, system)
                if label is not None:
                    labels.append(label)
    return labels


def _feedback_label(assessment: Any, task_id: str | None, system: str) -> HumanLabel | None:
    source = assessment.source
    if getattr(source, "source_type", None) != "HUMAN" or assessment.feedback is None \
            or assessment.valid is False or not task_id:
        return None  # a judge's or the harness's own score, an overridden or non-task one
    value = assessment.value
    score = int(value) if isinstance(value, bool) else value
    problem = score_problem(score)
    if problem:
        log.warning("feedback %r on trace %s left out of the agreement: %s (give %s)",
                    assessment.name, assessment.trace_id, problem, SCORES)
        return None
    return HumanLabel(task_id, system, assessment.name, int(score),
                      source.source_id or "unnamed", FEEDBACK_SOURCE)
