"""People's labels of a sweep's answers, read from a labels file (``report.human_labels``)
or from the feedback people entered on the answers' traces in the MLflow UI (an assessment
whose source type is HUMAN), into one form the report compares with the judge.

A labels file is JSON lines, one label each::

    {"task_id": "AAN_q3_2021", "system": "arag", "dimension": "geval_faithfulness",
     "score": 4, "labeller": "ana"}

``score`` is 1-5 (the judge's scale) or 1/0 (consistent/inconsistent); ``null`` is a line
not labelled yet (the template ``python -m report label-sample`` writes) and is skipped.
``scale`` says which (``"1-5"`` or ``"yes/no"``; the template and the labelling page write
it): a line without it is read as 1-5, unless every such line of the file is 0 or 1.
``answer`` and ``question`` may be present (the template carries them for the labeller).
A bad line stops the reading with the file, the line and the fix; so do a file that is not
UTF-8, one over ``MAX_FILE_BYTES`` and one with no labelled line.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from metrics.base import parse_failure_counts
from tracking.runs import TrackingError

log = logging.getLogger(__name__)
REQUIRED = ("task_id", "system", "dimension", "score", "labeller")
CONTEXT = ("answer", "question")  # what a template line shows the labeller; not read
YES_NO, FIVE_POINT = "yes/no", "1-5"
SCALE_SCORES = {FIVE_POINT: (1, 2, 3, 4, 5), YES_NO: (0, 1)}
# people label tens to thousands of answers (a line is ~100-300 bytes without the answer
# text): a bigger file is almost surely not a labels file, and is refused before reading
MAX_FILE_BYTES = 20_000_000
MAX_PROBLEMS_SHOWN = 20  # bad lines listed in one refusal; the rest are counted
RENAMES = {"id": "task_id"}  # a key people often give -> the key it should be
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
    scale: str = FIVE_POINT  # FIVE_POINT or YES_NO
    where: str = field(default="", compare=False)  # "<file>:<line>", for the warnings


def score_problem(score: Any) -> str | None:
    """Why ``score`` is not a label's score (None: it is one)."""
    if isinstance(score, bool) or not isinstance(score, int | float):
        return f"score {score!r} is not a number"
    if not math.isfinite(score) or score != int(score) or not 0 <= score <= 5:
        return f"score {score!r} is not {SCORES}"
    return None


def read_labels_file(path: str | Path) -> list[HumanLabel]:
    """Every labelled line of a labels file; a missing, oversized, non-UTF-8 or unlabelled
    file, or a bad line, is a ``LabelsError`` naming the file (and line) and the fix."""
    file = Path(path).expanduser()
    if not file.is_file():
        what = "a folder" if file.is_dir() else "no such file"
        raise LabelsError(f"report.human_labels={path}: {what}. Fix: give the path of a "
                          "JSON-lines labels file (python -m report label-sample writes one)")
    size = file.stat().st_size
    if size > MAX_FILE_BYTES:
        raise LabelsError(f"report.human_labels={path}: {size / 1e6:.0f} MB, over the "
                          f"{MAX_FILE_BYTES / 1e6:.0f} MB a labels file may be. Fix: give the "
                          "labels only (one short JSON line per label; drop answer/question)")
    labels: list[HumanLabel] = []
    unscaled: list[HumanLabel] = []
    source = f"file {file.name}"
    problems: list[str] = []
    seen: dict[str, int] = {}  # a line's text -> the first line that holds it
    repeated: list[str] = []
    for number, line in enumerate(_utf8_lines(file), start=1):
        text = line.removeprefix("\ufeff") if number == 1 else line  # a byte-order mark
        if not text.strip():
            continue
        if text.strip() in seen:  # the same label pasted twice: one label, said once
            repeated.append(f"{number} (as {seen[text.strip()]})")
            continue
        seen[text.strip()] = number
        try:
            label = _parse_line(text, f"{file}:{number}", source)
        except LabelsError as exc:  # every bad line is listed, not only the first
            problems.append(str(exc))
            continue
        if label is not None:
            (labels if label.scale else unscaled).append(label)
    labels = _on_scale(labels, problems)
    unscaled = _on_scale(_with_inferred_scale(unscaled, str(file)), problems)
    if len(problems) == 1:
        raise LabelsError(problems[0])
    if problems:
        shown = problems[:MAX_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        raise LabelsError(f"report.human_labels={path}: {len(problems)} bad line(s):\n  "
                          + "\n  ".join(shown) + (f"\n  ... and {more} more" if more else ""))
    if repeated:
        log.warning("%s: %d line(s) repeat an earlier line exactly and are counted once: "
                    "line %s", file, len(repeated), ", ".join(repeated[:MAX_PROBLEMS_SHOWN]))
    if not labels and not unscaled:
        raise LabelsError(f"report.human_labels={path}: no labelled line (the file is empty, "
                          "or every score is null). Fix: fill in score and labeller on the "
                          "lines you labelled (or use the page: label-sample --html)")
    return labels + unscaled


def _on_scale(labels: list[HumanLabel], problems: list[str]) -> list[HumanLabel]:
    """The labels whose score is on their scale; each other one is a problem naming its line
    (a 0 in a file read as 1-5 is no score of that scale)."""
    kept = []
    for x in labels:
        if x.score in SCALE_SCORES[x.scale]:
            kept.append(x)
        else:
            problems.append(f"{x.where}: score {x.score} is not on the {x.scale} scale the file "
                            f"is read on. Fix: score is one of {SCALE_SCORES[x.scale]} (or give "
                            "\"scale\": \"yes/no\" on a line scored 1/0)")
    return kept


def _utf8_lines(file: Path) -> Iterator[str]:
    """The file's lines, read one at a time; a byte that is not UTF-8 is a ``LabelsError``
    naming its position."""
    offset = 0
    with file.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise LabelsError(
                    f"{file}:{number}: byte {offset + exc.start} ({raw[exc.start]:#04x}) is not "
                    "UTF-8. Fix: save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 "
                    f"{file} > labels.utf8.jsonl)") from None
            offset += len(raw)


def _with_inferred_scale(labels: list[HumanLabel], source: str) -> list[HumanLabel]:
    """Labels that do not say their scale: 1-5, unless every one is 0 or 1."""
    scale = YES_NO if labels and all(x.score in (0, 1) for x in labels) else FIVE_POINT
    if scale == YES_NO:
        log.warning("%s: no scale given and every score is 0 or 1, so they are read as "
                    "yes/no. Fix: give the scale (\"scale\": \"1-5\" on each line of a "
                    "labels file) if they are 1 of 5", source)
    return [replace(x, scale=scale) for x in labels]


class _RepeatedKey(ValueError):
    pass


def _no_repeated_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose every key is given once (json keeps the last of a repeated one)."""
    keys = [k for k, _ in pairs]
    twice = next((k for k in keys if keys.count(k) > 1), None)
    if twice is not None:
        raise _RepeatedKey(repr(twice))
    return dict(pairs)


def _parse_line(line: str, where: str, source: str) -> HumanLabel | None:
    try:
        item = json.loads(line, object_pairs_hook=_no_repeated_key)
    except _RepeatedKey as exc:
        raise LabelsError(f"{where}: the key {exc} is given twice (only one would count). "
                          f"Fix: keep one {exc} on the line") from None
    except json.JSONDecodeError as exc:
        raise LabelsError(f"{where}: not JSON ({exc.msg}). Fix: one JSON object per line, "
                          f"with keys {', '.join(REQUIRED)}") from None
    if not isinstance(item, dict):
        raise LabelsError(f"{where}: not a JSON object. Fix: one object per line, with keys "
                          f"{', '.join(REQUIRED)}")
    missing = [k for k in REQUIRED if k not in item]
    unknown = sorted(set(item) - set(REQUIRED) - set(CONTEXT) - {"scale"})
    if missing or unknown:
        what = "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                         + ([f"unknown key {', '.join(unknown)}"] if unknown else []))
        renames = [f"rename {k} to {RENAMES[k]}" for k in unknown
                   if k in RENAMES and RENAMES[k] in missing]
        fix = "; ".join(renames) + " (" if renames else ""
        raise LabelsError(f"{where}: {what}. Fix: {fix}each line has exactly the keys "
                          f"{', '.join(REQUIRED)}{')' if renames else ''} (answer and question "
                          "may stay)")
    scale = item.get("scale")
    if scale is not None and scale not in SCALE_SCORES:
        raise LabelsError(f"{where}: scale {scale!r} is not one of {', '.join(SCALE_SCORES)}. "
                          "Fix: scale is \"1-5\" or \"yes/no\" (or leave it out)")
    if item["score"] is None:
        return None
    problem = score_problem(item["score"])
    if problem is None and scale and item["score"] not in SCALE_SCORES[scale]:
        problem = f"score {item['score']!r} is not on the {scale} scale the line gives"
    if problem:
        raise LabelsError(f"{where}: {problem}. Fix: score is {SCORES}")
    for key in ("task_id", "system", "dimension", "labeller"):
        if not isinstance(item[key], str) or not item[key].strip():
            raise LabelsError(f"{where}: {key} {item[key]!r} is not a name. Fix: {key} is a "
                              "non-empty string (labeller: who labelled, e.g. your initials)")
    # scale "" until the file is read: inferred from the file's lines that give none
    return HumanLabel(item["task_id"], item["system"], item["dimension"], int(item["score"]),
                      item["labeller"].strip(), source, scale or "", where)



def judged_fields(rows: list[dict[str, Any]]) -> list[str]:
    """The fields a judge scored in these runs (their metrics): each logs how many of its
    replies were unreadable (``<field>_parse_failures``); none when no judge was called."""
    if not any((r.get("judge_calls") or 0) > 0 for r in rows):
        return []
    return sorted({field for r in rows for field in parse_failure_counts(r)})


def check_judged(path: str, labels: list[HumanLabel], judged: set[str] | list[str],
                 judge: str = "none") -> None:
    """Labels a sweep can hold against its judge: a sweep that judges nothing takes none;
    a label of a field no judge scores is listed with its line (up to 20)."""
    if not judged:
        raise LabelsError(f"report.human_labels={path} holds people's scores to hold a judge "
                          "against, and no job of this sweep has a judge that scores "
                          f"(judge={judge}). Fix: add judge=claude-haiku-4-5 (or another "
                          "judge), or leave out report.human_labels")
    bad = [f"{x.where}: dimension {x.dimension!r} is scored by no judge of this sweep"
           for x in labels if x.dimension not in judged]
    if bad:
        more = len(bad) - MAX_PROBLEMS_SHOWN
        named = ", ".join(sorted(judged))
        raise LabelsError(f"report.human_labels={path}: {len(bad)} label(s) of a field no "
                          f"judge scores (judged: {named}):\n  "
                          + "\n  ".join(bad[:MAX_PROBLEMS_SHOWN])
                          + (f"\n  ... and {more} more" if more > 0 else "")
                          + f"\nFix: give dimension one of {named}")


def read_feedback_labels(experiment_id: str, systems: dict[str, str],
                         traces: Callable[[str], list[Any]] | None = None) -> list[HumanLabel]:
    """The HUMAN feedback on the traces of the runs ``systems`` maps (run id -> system):
    one label per feedback whose value is a score (a yes/no answer counts as 1/0); a
    feedback that is not one is logged and left out. ``traces``: a run's traces, where the
    caller holds them (``tracking.traces.RunTraces``)."""
    from tracking.traces import RunTraces

    labels: list[HumanLabel] = []
    unscaled: list[HumanLabel] = []
    of_run = traces or RunTraces(experiment_id)
    for run_id, system in systems.items():
        for trace in of_run(run_id):
            task_id = trace.info.trace_metadata.get("task_id")
            for assessment in trace.info.assessments or []:
                label = _feedback_label(assessment, task_id, system)
                if label is not None:
                    (labels if label.scale else unscaled).append(label)
    return labels + _with_inferred_scale(unscaled, "the HUMAN feedback on the traces")


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
    scale = YES_NO if isinstance(value, bool) else ""  # the UI's yes/no; a number: inferred
    return HumanLabel(task_id, system, assessment.name, int(score),
                      source.source_id or "unnamed", FEEDBACK_SOURCE, scale,
                      f"feedback {assessment.assessment_id} on trace {assessment.trace_id}")
