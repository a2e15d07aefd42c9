"""The report's section on people's labels of a sweep's answers (a labels file given as
``report.human_labels``, HUMAN feedback on the traces): how far the judge agrees with
people per dimension, how far the people agree with each other, and the sentence the
verdict quotes.

A dimension is a field a judge scored (``geval_faithfulness``, ``geval_coverage``,
``factual_consistency``, ...: every judged field logs its ``<field>_parse_failures``); labels
of any other field (``rouge2_f1``) are refused, naming the judged ones. Labels for a system
or task the sweep does not have, and one labeller's contradictory labels of one answer, are
left out with a warning naming their lines; nothing usable left is an error. Labels carry
their scale (``tracking.human_labels``): **yes/no** (consistent/inconsistent; the judge's
score decides "yes" at or above the signal's ``metrics.meta_eval`` threshold, e.g. 4 of 5
for G-Eval), or **1-5** (the judge's score rounded to the nearest whole point). Per dimension:
Cohen's kappa (quadratic-weighted on 1-5), Spearman's rho (1-5) or balanced accuracy with
people as the truth (yes/no), each with a bootstrap 95% CI, and n (label pairs). Kappa
below ``LOW_KAPPA`` flags the dimension: its judge scores are not to be trusted alone.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from metrics.agreement import Kappa, kappa
from metrics.meta_eval import MetaEvalOptions, balanced_accuracy_ci
from metrics.stats import Correlation, correlation
from report.verdict import table
from tracking.human_labels import FEEDBACK_SOURCE, FIVE_POINT, HumanLabel, LabelsError, judged_fields

log = logging.getLogger(__name__)
# Landis & Koch (1977): kappa 0.41-0.60 is "moderate"; at or below 0.40 "fair" or worse
LOW_KAPPA = 0.4
SHOWN_LINES = 5  # a warning names this many lines, then counts the rest
FIVE = (1, 2, 3, 4, 5)
Item = tuple[str, str]  # (system or run label, task id)


@dataclass
class JudgeAgreement:
    """The judge against people on one dimension."""

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
        counts: dict[str, int] = defaultdict(int)
        for label in self.labels:
            counts[label.source] += 1
        return "; ".join(f"{n} from {source}" for source, n in sorted(counts.items()))

    @property
    def compared(self) -> list[JudgeAgreement]:
        return [a for a in self.judge if a.kappa is not None]


def compare(labels: list[HumanLabel], records: dict[str, list[dict[str, Any]]],
            rows: list[dict[str, Any]]) -> HumanAgreement:
    """People's labels against the runs' records (run id -> records; ``rows``: the runs).
    Labels of a file on a dimension no judge scored are a ``LabelsError``; so is a labels
    file none of whose labels can be used."""
    out = HumanAgreement(labels)
    usable = _usable(labels, records, rows, out.left_out)
    for why in out.left_out:
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
        (scale,) = scales
        out.judge.append(_against_judge(dimension, scale, mine, values))
        out.labellers += _between_labellers(dimension, scale, mine)
    return out


def _usable(labels: list[HumanLabel], records: dict[str, list[dict[str, Any]]],
            rows: list[dict[str, Any]], left_out: list[str]) -> list[HumanLabel]:
    """The labels that can be held against the judge; why the others cannot goes to
    ``left_out``. A labels file's label on an unjudged field is refused outright."""
    judged = judged_fields(rows)
    unjudged = [x for x in labels if x.dimension not in judged]
    from_file = [x for x in unjudged if x.source != FEEDBACK_SOURCE]
    if from_file:
        names = sorted({f"`{x.dimension}`" for x in from_file})
        raise LabelsError(
            f"labels on {', '.join(names)} ({_lines(from_file)}): no judge scored "
            + ("that" if len(names) == 1 else "those")
            + " in this sweep, so there is no judge to check. Fix: label a dimension a judge "
            + "scored: " + (", ".join(judged) if judged else "none here (the sweep ran with "
                            "no judge: run it with judge=...)"))
    _leave_out(left_out, unjudged, "feedback on a field no judge scored")
    tasks: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        ids = {rec["id"] for rec in records.get(row["run_id"], [])}
        tasks[row["run"]] |= ids
        tasks[row["system"]] |= ids
    kept = [x for x in labels if x.dimension in judged]
    _leave_out(left_out, [x for x in kept if x.system not in tasks],
               "a system that is not a run of this sweep (runs: " + ", ".join(
                   sorted({r["run"] for r in rows})) + ")")
    _leave_out(left_out, [x for x in kept if x.system in tasks and x.task_id not in tasks[x.system]],
               "a task that system did not answer in this sweep")
    kept = [x for x in kept if x.task_id in tasks.get(x.system, ())]
    return _without_contradictions(kept, left_out)


def _without_contradictions(labels: list[HumanLabel], left_out: list[str]) -> list[HumanLabel]:
    """One label per labeller, answer and dimension: repeats of one score count once; a
    labeller's differing scores of one answer are all left out (neither can be chosen)."""
    same: dict[tuple[str, str, str, str], list[HumanLabel]] = defaultdict(list)
    for x in labels:
        same[(x.labeller, x.system, x.task_id, x.dimension)].append(x)
    kept = []
    for (who, system, task, dimension), group in same.items():
        if len({x.score for x in group}) > 1:
            _leave_out(left_out, group, f"{who} gave {system}/{task} `{dimension}` the scores "
                       + ", ".join(str(x.score) for x in group) + " (Fix: keep one)")
        else:
            kept.append(group[-1])
    return kept


def _leave_out(left_out: list[str], labels: list[HumanLabel], why: str) -> None:
    if labels:
        left_out.append(f"{len(labels)} label(s) for {why}: {_lines(labels)}")


def _lines(labels: list[HumanLabel]) -> str:
    shown = [x.where or f"{x.system}/{x.task_id}" for x in labels[:SHOWN_LINES]]
    more = len(labels) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def _judge_values(records: dict[str, list[dict[str, Any]]], rows: list[dict[str, Any]]
                  ) -> dict[Item, dict[str, float]]:
    """(run label or system, task id) -> each numeric field's mean over the task's repeats;
    a system name keys its records only when one run has that system."""
    per_system = defaultdict(list)
    for row in rows:
        per_system[row["system"]].append(row)
    sums: dict[Item, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        names = {row["run"]} | ({row["system"]} if len(per_system[row["system"]]) == 1 else set())
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
                          balanced_accuracy=_balanced_accuracy(people, decided),
                          threshold=threshold, unmatched=unmatched)


def _threshold(dimension: str, judged: list[float]) -> float:
    """The judge's "yes": the meta-evaluation's threshold for a known signal; otherwise 4
    of 5 for a 1-5 score, and 1.0 (everything supported) for a share."""
    known = MetaEvalOptions().thresholds
    if dimension in known:
        return known[dimension]
    return 4.0 if judged and max(judged) > 1 else 1.0


def _balanced_accuracy(people: list[int], decided: list[int]
                       ) -> tuple[float, float | None, float | None] | None:
    from sklearn.metrics import balanced_accuracy_score

    if len(set(people)) < 2:
        return None  # one class only: a recall of the other is undefined
    ci = balanced_accuracy_ci(people, decided)
    low, high = ci if ci is not None else (None, None)
    return float(balanced_accuracy_score(people, decided)), low, high


def _between_labellers(dimension: str, scale: str, labels: list[HumanLabel]
                       ) -> list[LabellerAgreement]:
    scored: dict[str, dict[Item, int]] = defaultdict(dict)
    for x in labels:
        scored[x.labeller][(x.system, x.task_id)] = x.score
    out = []
    weights, points = ("quadratic", FIVE) if scale == FIVE_POINT else (None, (0, 1))
    for first, second in combinations(sorted(scored), 2):
        both = sorted(set(scored[first]) & set(scored[second]))
        if both:
            out.append(LabellerAgreement(
                dimension, first, second, kappa([scored[first][i] for i in both],
                                                [scored[second][i] for i in both], weights, points),
                len(both)))
    return out


def _ci(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f" [{low:.2f}, {high:.2f}]"


def _percent_ci(value: float, low: float | None, high: float | None) -> str:
    ci = "" if low is None or high is None else f" [{100 * low:.1f}, {100 * high:.1f}]"
    return f"{100 * value:.1f}{ci}"


def _kappa_text(k: Kappa | None) -> str:
    return "undefined (one value throughout)" if k is None else f"{k.value:.2f}" + _ci(
        k.ci_low, k.ci_high)


def _kind(scale: str) -> str:
    return "quadratic-weighted kappa" if scale == FIVE_POINT else "Cohen's kappa"


def _judge_row(a: JudgeAgreement) -> list[Any]:
    rho = "–" if a.spearman is None else f"{a.spearman.rho:.2f}" + _ci(a.spearman.ci_low,
                                                                      a.spearman.ci_high)
    ba = "–" if a.balanced_accuracy is None else _percent_ci(*a.balanced_accuracy)
    flag = "undefined" if a.kappa is None else (f"**low** (< {LOW_KAPPA})" if a.low else "ok")
    scale = a.scale if a.threshold is None else f"{a.scale} (judge yes at ≥ {a.threshold:g})"
    return [f"`{a.dimension}`", scale, a.n, f"{_kind(a.scale)} {_kappa_text(a.kappa)}", rho, ba,
            flag, a.unmatched]


def section(found: HumanAgreement) -> str:
    """The report's "Agreement with your labels" section (empty: no labels)."""
    if not found.labels:
        return ""
    text = ("## Agreement with your labels\n\n"
            f"People's labels ({found.sources}) against the judge's scores of the same "
            "answers. Kappa is Cohen's (quadratic-weighted for 1-5 scores), with a bootstrap "
            "95% CI over label pairs; n counts label pairs; a kappa below "
            f"{LOW_KAPPA} (Landis & Koch: fair or worse) is flagged **low**: that dimension's "
            "judge scores are not to be trusted alone. *Not compared*: labels whose answer "
            "has no judge score (not in this sweep, or the judge's reply was unreadable).\n\n")
    text += table(["dimension", "scale", "n", "judge vs people: kappa [95% CI]",
                   "Spearman [95% CI]", "balanced accuracy % [95% CI]", "agreement",
                   "not compared"], [_judge_row(a) for a in found.judge])
    if found.mixed:
        text += ("\nLeft out, labelled on both scales (1-5 and yes/no): "
                 + ", ".join(f"`{d}`" for d in found.mixed) + ". Fix: one scale per dimension.\n")
    if found.left_out:
        text += "\nLabels left out:\n\n" + "".join(f"- {why}\n" for why in found.left_out)
    text += "\n### Between labellers\n\n"
    if not found.labellers:
        return text + ("No answer was labelled by two people on the same dimension, so how "
                       "far people agree with each other is not measured here.\n")
    return text + table(["dimension", "labellers", "n (both labelled)", "kappa [95% CI]"],
                        [[f"`{x.dimension}`", f"{x.first}, {x.second}", x.n,
                          _kappa_text(x.kappa)] for x in found.labellers])


def quote(found: HumanAgreement) -> str:
    """The verdict's sentence on the judge's agreement with these labels (empty: nothing
    was compared)."""
    compared = found.compared
    if not compared:
        return ""
    parts = [f"`{a.dimension}` {_kind(a.scale)} {_kappa_text(a.kappa)} (n={a.n})"
             + (" — **low**" if a.low else "") for a in compared]
    low = [a.dimension for a in compared if a.low]
    warning = (f" Agreement is low on {', '.join(f'`{d}`' for d in low)}: its judge scores "
               "are not to be trusted alone." if low else "")
    return (f"**Judge checked against your labels:** {'; '.join(parts)}, 95% CIs in "
            f"brackets (labels: {found.sources}).{warning}\n")
