"""People's labels of a sweep's answers (``report.human_labels``, HUMAN feedback on the traces)
against the judge per judged dimension, and between labellers; unusable labels are left out with
a warning, a labels file with none usable is refused (docs/validate-your-judge.md)."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

from metrics.agreement import Kappa, kappa
from metrics.meta_eval import MetaEvalOptions, balanced_accuracy_ci
from metrics.stats import Correlation, correlation
from report.model import Claim
from tracking.human_labels import FEEDBACK_SOURCE, FIVE_POINT, HumanLabel, LabelsError, judged_fields

log = logging.getLogger(__name__)
# Landis & Koch (1977): kappa 0.41-0.60 is "moderate"; at or below 0.40 "fair" or worse
LOW_KAPPA = 0.4
SECTION = "Agreement with your labels"
SHOWN_LINES = 5  # a warning names this many lines, then counts the rest
FIVE = (1, 2, 3, 4, 5)
Item = tuple[str, str]  # (system or run label, task id)


@dataclass
class JudgeAgreement:  # the judge against people on one dimension
    dimension: str
    scale: str
    kappa: Kappa | None
    spearman: Correlation | None = None  # 1-5 only
    balanced_accuracy: tuple[float, float | None, float | None] | None = None  # yes/no only
    threshold: float | None = None  # yes/no: the judge's score that means "yes"
    unmatched: int = 0  # labels of this dimension with no judge score to compare

    @property
    def low(self) -> bool:
        return self.kappa is not None and self.kappa.value < LOW_KAPPA

    @property
    def n(self) -> int:
        return self.kappa.n if self.kappa else 0


@dataclass
class LabellerAgreement:
    dimension: str
    first: str
    second: str
    kappa: Kappa | None
    n: int


@dataclass
class HumanAgreement:
    labels: list[HumanLabel]
    judge: list[JudgeAgreement] = field(default_factory=list)
    labellers: list[LabellerAgreement] = field(default_factory=list)
    mixed: list[str] = field(default_factory=list)  # dimensions labelled on both scales
    left_out: list[str] = field(default_factory=list)  # why labels were left out, by line

    @property
    def sources(self) -> str:
        counts = Counter(label.source for label in self.labels)
        return "; ".join(f"{n} from {source}" for source, n in sorted(counts.items()))

    @property
    def compared(self) -> list[JudgeAgreement]:
        return [a for a in self.judge if a.kappa is not None]


def compare(labels: list[HumanLabel], records: dict[str, list[dict[str, Any]]],
            rows: list[dict[str, Any]], warn: bool = True) -> HumanAgreement:
    """People's labels against the runs' records; a labels file on an unjudged dimension, or of
    which no label can be used, is a ``LabelsError``; ``warn``: log the labels left out."""
    out = HumanAgreement(labels)
    usable = _usable(labels, records, rows, out.left_out)
    for why in out.left_out if warn else []:
        log.warning("labels left out: %s", why)
    if not usable and any(x.source != FEEDBACK_SOURCE for x in labels):
        # a file given for this report, of which nothing can be used (feedback left on the
        # traces in the UI is only warned about: it never stops a report)
        raise LabelsError("no label can be used: " + "; ".join(out.left_out))
    by_dimension: dict[str, list[HumanLabel]] = defaultdict(list)
    for label in usable:
        by_dimension[label.dimension].append(label)
    values = _judge_values(records, rows)
    for dimension, mine in sorted(by_dimension.items()):
        scales = {x.scale for x in mine}
        if len(scales) > 1:
            out.mixed.append(dimension)
            continue
        scale = scales.pop()
        out.judge.append(_against_judge(dimension, scale, mine, values))
        out.labellers += _between_labellers(dimension, scale, mine)
    return out


def _usable(labels: list[HumanLabel], records: dict[str, list[dict[str, Any]]],
            rows: list[dict[str, Any]], left_out: list[str]) -> list[HumanLabel]:
    """The labels that can be held against the judge (why not the others: ``left_out``)."""
    judged = judged_fields(rows)
    unjudged = [x for x in labels if x.dimension not in judged]
    from_file = [x for x in unjudged if x.source != FEEDBACK_SOURCE]
    if from_file:
        names = sorted({f"`{x.dimension}`" for x in from_file})
        raise LabelsError(f"labels on {', '.join(names)} ({_lines(from_file)}): no judge scored "
                          f"{'that' if len(names) == 1 else 'those'} in this sweep, so there is no judge "
                          "to check. Fix: label a dimension a judge scored: " + (", ".join(judged) or
                          "none here (the sweep ran with no judge: run it with judge=...)"))
    _leave_out(left_out, unjudged, "feedback on a field no judge scored")
    tasks: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        for name in (row["run"], row["system"]):
            tasks[name] |= {rec["id"] for rec in records.get(row["run_id"], [])}
    kept = [x for x in labels if x.dimension in judged]
    _leave_out(left_out, [x for x in kept if x.system not in tasks],
               "a system that is not a run of this sweep (runs: " + ", ".join(
                   sorted({r["run"] for r in rows})) + ")")
    _leave_out(left_out, [x for x in kept if x.system in tasks and x.task_id not in tasks[x.system]],
               "a task that system did not answer in this sweep")
    kept = [x for x in kept if x.task_id in tasks.get(x.system, ())]
    return _without_contradictions(kept, left_out)


def _without_contradictions(labels: list[HumanLabel], left_out: list[str]) -> list[HumanLabel]:
    """One label per labeller, answer and dimension; a labeller's differing scores: left out."""
    same: dict[tuple[str, str, str, str], list[HumanLabel]] = defaultdict(list)
    for x in labels:
        same[(x.labeller, x.system, x.task_id, x.dimension)].append(x)
    for (who, system, task, dimension), group in same.items():
        if len({x.score for x in group}) > 1:
            _leave_out(left_out, group, f"{who} gave {system}/{task} `{dimension}` the scores "
                       + ", ".join(str(x.score) for x in group) + " (Fix: keep one)")
    return [group[-1] for group in same.values() if len({x.score for x in group}) == 1]


def _leave_out(left_out: list[str], labels: list[HumanLabel], why: str) -> None:
    if labels:
        left_out.append(f"{len(labels)} label(s) for {why}: {_lines(labels)}")


def _lines(labels: list[HumanLabel]) -> str:
    more = len(labels) - SHOWN_LINES
    return ", ".join(x.where or f"{x.system}/{x.task_id}" for x in labels[:SHOWN_LINES]) + (
        f" and {more} more" if more > 0 else "")


def _judge_values(records: dict[str, list[dict[str, Any]]], rows: list[dict[str, Any]]
                  ) -> dict[Item, dict[str, float]]:
    """(run label, or system where one run has it; task id) -> each field's mean over repeats."""
    per_system = Counter(row["system"] for row in rows)
    sums: dict[Item, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        names = {row["run"]} | ({row["system"]} if per_system[row["system"]] == 1 else set())
        for record in records.get(row["run_id"], []):
            for key, value in record.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    for name in names:
                        sums[(name, record["id"])][key].append(float(value))
    return {item: {k: sum(v) / len(v) for k, v in fields.items()} for item, fields in sums.items()}


def _against_judge(dimension: str, scale: str, labels: list[HumanLabel],
                   values: dict[Item, dict[str, float]]) -> JudgeAgreement:
    pairs = [(x.score, values[(x.system, x.task_id)][dimension]) for x in labels
             if dimension in values.get((x.system, x.task_id), {})]
    people, judged = [p for p, _ in pairs], [j for _, j in pairs]
    unmatched = len(labels) - len(pairs)
    if scale == FIVE_POINT:
        rounded = [min(5, max(1, int(j + 0.5))) for j in judged]
        return JudgeAgreement(dimension, scale, kappa(people, rounded, "quadratic", FIVE),
                              spearman=correlation(people, judged), unmatched=unmatched)
    threshold = _threshold(dimension, judged)
    decided = [1 if j >= threshold else 0 for j in judged]
    return JudgeAgreement(dimension, scale, kappa(people, decided),
                          balanced_accuracy=_balanced_accuracy(people, decided) if len(set(people)) > 1
                          else None,  # one class only: a recall of the other is undefined
                          threshold=threshold, unmatched=unmatched)


def _threshold(dimension: str, judged: list[float]) -> float:
    """The judge's "yes": a known signal's threshold, else 4 of 5 (a 1-5 score) or 1.0 (a share)."""
    return MetaEvalOptions().thresholds.get(dimension, 4.0 if judged and max(judged) > 1 else 1.0)


def _balanced_accuracy(people: list[int], decided: list[int]) -> tuple[float, float | None, float | None]:
    from sklearn.metrics import balanced_accuracy_score

    low, high = balanced_accuracy_ci(people, decided) or (None, None)
    return float(balanced_accuracy_score(people, decided)), low, high


def _between_labellers(dimension: str, scale: str, labels: list[HumanLabel]
                       ) -> list[LabellerAgreement]:
    scored: dict[str, dict[Item, int]] = defaultdict(dict)
    for x in labels:
        scored[x.labeller][(x.system, x.task_id)] = x.score
    weights, points = ("quadratic", FIVE) if scale == FIVE_POINT else (None, (0, 1))
    return [LabellerAgreement(dimension, a, b, kappa([scored[a][i] for i in both],
                                                     [scored[b][i] for i in both], weights, points),
                              len(both)) for a, b in combinations(sorted(scored), 2)
            if (both := sorted(set(scored[a]) & set(scored[b])))]


def claims(found: HumanAgreement) -> list[Claim]:
    """The "Agreement with your labels" section's claim (none without labels)."""
    return [Claim("people_judge", SECTION, figures={
        "sources": found.sources, "low": LOW_KAPPA, "mixed": found.mixed, "left_out": found.left_out,
        "judge": [asdict(a) for a in found.judge], "labellers": [asdict(x) for x in found.labellers]})
    ] if found.labels else []


def agreement(found: HumanAgreement) -> list[Claim]:
    """The judge's agreement with these labels, as the judge's trust states it first (none:
    nothing was compared)."""
    return [Claim("people_agreement", "How far the judge can be trusted", figures={
        "sources": found.sources, "low": LOW_KAPPA, "judge": [asdict(a) for a in found.compared]})
    ] if found.compared else []
