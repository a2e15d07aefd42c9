"""The judge corrected by people's labels (PPI++, ``metrics/ppi.py``): for each dimension
people labelled, each run's judged mean over all its tasks, corrected by the labels of the
tasks people scored, with a CI that includes the judge's own error; and each pair's
difference, corrected the same way on the tasks both runs answered.

Logged on each child run: ``<dimension>_ppi_mean``, ``<dimension>_ppi_ci_low``,
``<dimension>_ppi_ci_high``; on the parent: ``<a>_vs_<b>_<dimension>_ppi_diff`` with its CI.
The corrected difference decides (the key finding) only when every compared run has at
least ``MIN_LABELS_TO_DECIDE`` labels on that dimension; below that the report says so and
gives the corrected figures for information only. A run without labels gets no corrected
figure, and the report says why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import combinations
from typing import Any, Protocol

from metrics.ppi import MIN_LABELS, PPIEstimate, ppi_mean
from report.findings import Finding, Table
from report.human_agreement import _threshold
from report.model import Analysis, register_analysis
from report.verdict import TaskSets
from tracking.human_labels import YES_NO, HumanLabel

MIN_LABELS_TO_DECIDE = 10
SECTION = "The judge corrected by your labels"
Row = dict[str, Any]


class Inputs(Protocol):
    """What this analysis reads of ``report.analyses.Inputs`` (registered there)."""

    @property
    def sets(self) -> TaskSets: ...

    @property
    def labels(self) -> list[HumanLabel]: ...


def people_scores(labels: Iterable[HumanLabel], dimension: str, run: Row, runs: list[Row]
                  ) -> dict[str, float]:
    """Task id -> people's mean score of this run's answer (labels name the run, or its
    system when only this run has that system)."""
    sole_system = sum(r["system"] == run["system"] for r in runs) == 1
    names = {run["run"]} | ({run["system"]} if sole_system else set())
    scores: dict[str, list[float]] = defaultdict(list)
    for label in labels:
        if label.dimension == dimension and label.system in names:
            scores[label.task_id].append(float(label.score))
    return {task: sum(v) / len(v) for task, v in scores.items()}


def judge_scores(inputs: Inputs, run: Row, dimension: str, yes_at: float | None
                 ) -> dict[str, float]:
    """Task id -> the judge's score on the labels' scale (yes/no: at or above ``yes_at``)."""
    table = inputs.sets.tables.get(run["run_id"], {})
    values = {t: float(r[dimension]) for t, r in table.items() if r.get(dimension) is not None}
    if yes_at is None:
        return values
    return {t: float(v >= yes_at) for t, v in values.items()}


def corrected(people: dict[str, float], judged: dict[str, float], tasks: list[str]
              ) -> PPIEstimate | None:
    labelled = [t for t in tasks if t in people and t in judged]
    unlabelled = [t for t in tasks if t in judged and t not in people]
    return ppi_mean([people[t] for t in labelled], [judged[t] for t in labelled],
                    [judged[t] for t in unlabelled])


def _ci(e: PPIEstimate) -> str:
    return f"{e.mean:.2f} [{e.ci_low:.2f}, {e.ci_high:.2f}]"


def dimension_analysis(inputs: Inputs, dimension: str, labels: list[HumanLabel]) -> Analysis:
    scales = {x.scale for x in labels}  # labels carry their scale (tracking.human_labels)
    if len(scales) != 1:
        return Analysis()  # both scales: human_agreement already says to fix the labels
    (scale,) = scales
    runs = inputs.sets.runs
    yes_at = _threshold(dimension, [v for run in runs for v in judge_scores(
        inputs, run, dimension, None).values()]) if scale == YES_NO else None
    out, rows, missing = Analysis(), [], []
    people = {r["run_id"]: people_scores(labels, dimension, r, runs) for r in runs}
    judged = {r["run_id"]: judge_scores(inputs, r, dimension, yes_at) for r in runs}
    estimates: dict[str, PPIEstimate] = {}
    for run in runs:
        rid, mine = run["run_id"], judged[run["run_id"]]
        if not mine:
            continue  # no judge score on this dimension: nothing to correct
        estimate = corrected(people[rid], mine, list(mine))
        raw = sum(mine.values()) / len(mine)
        n = len(set(people[rid]) & set(mine))
        if estimate is None:
            missing.append(f"{run['run']} (every one of its {n} tasks labelled: the people's "
                           "mean is then the estimate)" if n and n >= len(mine) else
                           f"{run['run']} ({n} labelled answer{'s' * (n != 1)}; at least "
                           f"{MIN_LABELS} and one unlabelled task needed)")
            rows.append([run["run"], n, round(raw, 3), "n/a", "n/a"])
            continue
        estimates[rid] = estimate
        out.run_metrics[rid] = {f"{dimension}_ppi_mean": estimate.mean,
                                f"{dimension}_ppi_ci_low": estimate.ci_low,
                                f"{dimension}_ppi_ci_high": estimate.ci_high}
        rows.append([run["run"], n, round(raw, 3), _ci(estimate), round(estimate.mean - raw, 3)])
    if missing:  # said even when no run is corrected: the section never just vanishes
        out.findings.append(Finding(
            "ppi", SECTION, f"No corrected `{dimension}` for " + "; ".join(missing) + ".",
            {"dimension": dimension, "without": missing}, caveat=True))
    if not estimates:
        return out
    unit = "share judged yes" if yes_at is not None else "mean"
    out.findings.append(Finding(
        "ppi", SECTION,
        f"`{dimension}` ({scale}): each run's judged {unit} over all its tasks, corrected by "
        "people's labels (PPI++, 95% CI including the judge's error); *moved by* is corrected "
        "minus judged.", {"dimension": dimension, "runs": {r[0]: r[1:] for r in rows}},
        table=Table(["run", "labelled", f"judged {unit}", "corrected [95% CI]", "moved by"],
                    rows)))
    out.extend(_differences(inputs, dimension, people, judged))
    return out


def _differences(inputs: Inputs, dimension: str, people: dict[str, dict[str, float]],
                 judged: dict[str, dict[str, float]]) -> Analysis:
    out = Analysis()
    runs = [r for r in inputs.sets.runs if judged[r["run_id"]]]
    for first, second in combinations(runs, 2):
        a, b = first["run_id"], second["run_id"]
        tasks = [t for t in judged[a] if t in judged[b]]
        both = {t: people[a][t] - people[b][t] for t in tasks if t in people[a] and t in people[b]}
        diff = corrected(both, {t: judged[a][t] - judged[b][t] for t in tasks}, tasks)
        if diff is None:
            continue
        name = f"{first['run']}_vs_{second['run']}_{dimension}_ppi_diff"
        out.metrics |= {name: diff.mean, f"{name}_ci_low": diff.ci_low,
                        f"{name}_ci_high": diff.ci_high}
        enough = min(len(people[a]), len(people[b])) >= MIN_LABELS_TO_DECIDE
        out.findings.append(_difference_finding(first, second, dimension, diff, enough))
    return out


def _difference_finding(first: Row, second: Row, dimension: str, diff: PPIEstimate,
                        enough: bool) -> Finding:
    pair = f"{first['run']} − {second['run']}"
    if diff.ci_low > 0 or diff.ci_high < 0:
        higher = first["run"] if diff.mean > 0 else second["run"]
        says = f"{higher} is higher on `{dimension}` after correction"
    else:
        says = f"after correction the CI includes 0: no difference on `{dimension}` is shown"
    figures = {"dimension": dimension, "pair": pair, "diff": diff.mean, "ci_low": diff.ci_low,
               "ci_high": diff.ci_high, "labelled": diff.labelled, "decides": enough}
    if enough:
        return Finding("ppi", SECTION, f"**Corrected by your labels:** {pair} = {_ci(diff)} "
                       f"({diff.labelled} tasks labelled for both): {says}.", figures, key=True)
    return Finding("ppi", SECTION, f"{pair} corrected = {_ci(diff)}: not used to decide, "
                   f"fewer than {MIN_LABELS_TO_DECIDE} labels on `{dimension}` for a run "
                   "(label more: `python -m report label-sample --for ppi`).", figures,
                   caveat=True)


@register_analysis("corrected", 40)
def judge_corrected(inputs: Inputs) -> Analysis:
    """Every labelled dimension the runs have judge scores for."""
    out = Analysis()
    by_dimension: dict[str, list[HumanLabel]] = defaultdict(list)
    for label in inputs.labels:
        by_dimension[label.dimension].append(label)
    for dimension, labels in sorted(by_dimension.items()):
        out.extend(dimension_analysis(inputs, dimension, labels))
    return out


def corrected_answer(found: list[Finding], keys: list[str], raw: str) -> str:
    """The verdict's answer when people's labels decide: the corrected differences on the
    decision metrics, each run with at least ``MIN_LABELS_TO_DECIDE`` labels, then the raw
    answer for comparison; ``raw`` unchanged when no corrected figure decides."""
    deciding = [f for f in found if f.kind == "ppi" and f.figures.get("decides")
                and f.figures.get("dimension") in keys]
    if not deciding:
        return raw
    said = "; ".join(f.text.replace("**Corrected by your labels:** ", "") for f in deciding)
    return f"Corrected by your labels (PPI++): {said} The judge's raw scores: {raw}"
