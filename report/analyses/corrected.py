"""The judge corrected by people's labels (PPI++, ``metrics/ppi.py``): per labelled
dimension, each run's judged mean corrected by the labels, and each pair's corrected
difference; what is logged and when a difference decides:
docs/validate-your-judge.md#the-judge-corrected-by-your-labels-ppi (the words:
``report/writers/corrected_words.py``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from itertools import combinations
from typing import Any

from metrics.ppi import MIN_LABELS, PPIEstimate, ppi_mean
from report.human_agreement import _threshold
from report.model import Analysis, Authority, Claim, Inputs, Note, Row, Table, register_analysis
from tracking.human_labels import YES_NO, HumanLabel

MIN_SHARED = 10  # report.ppi.min_shared's default (runners.config.PPIConfig)
SECTION = "The judge corrected by your labels"
RULE = "PPI++ (prediction-powered inference, power-tuned), 95% CI"


def min_shared(options: Mapping[str, Any]) -> int:
    """``report.ppi.min_shared`` from the sweep's report node (its default on a rebuild)."""
    ppi = options.get("ppi") or {}
    return int(ppi.get("min_shared") or MIN_SHARED)


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


def dimension_analysis(inputs: Inputs, dimension: str, labels: list[HumanLabel]) -> Analysis:
    scales = {x.scale for x in labels}  # labels carry their scale (tracking.human_labels)
    if len(scales) != 1:
        return Analysis()  # both scales: human_agreement already says to fix the labels
    (scale,) = scales
    runs = inputs.sets.runs
    yes_at = _threshold(dimension, [v for run in runs for v in judge_scores(
        inputs, run, dimension, None).values()]) if scale == YES_NO else None
    out, rows = Analysis(), []
    people = {r["run_id"]: people_scores(labels, dimension, r, runs) for r in runs}
    judged = {r["run_id"]: judge_scores(inputs, r, dimension, yes_at) for r in runs}
    for run in runs:
        rid, mine = run["run_id"], judged[run["run_id"]]
        if not mine:
            continue  # no judge score on this dimension: nothing to correct
        estimate = corrected(people[rid], mine, list(mine))
        raw = sum(mine.values()) / len(mine)
        labelled = [t for t in mine if t in people[rid]]
        if estimate is None:
            out.notes.append(_without_estimate(run["run"], dimension, labelled, len(mine),
                                               people[rid]))
            rows.append([run["run"], len(labelled), raw, None, None, None, None])
            continue
        out.run_metrics[rid] = {f"{dimension}_ppi_mean": estimate.mean,
                                f"{dimension}_ppi_ci_low": estimate.ci_low,
                                f"{dimension}_ppi_ci_high": estimate.ci_high}
        rows.append([run["run"], len(labelled), raw, estimate.mean, estimate.ci_low,
                     estimate.ci_high, estimate.mean - raw])
    if not out.run_metrics:
        return out
    unit = "share judged yes" if yes_at is not None else "mean"
    out.claims.append(Claim(
        "ppi_means", SECTION, tuple(r[0] for r in rows), metric=dimension, rule=RULE,
        figures={"dimension": dimension, "scale": scale, "unit": unit,
                 "runs": {r[0]: r[1:] for r in rows}},
        table=Table(["run", "labelled", f"judged {unit}", "corrected", "95% CI low",
                     "95% CI high", "moved by"], rows)))
    out.extend(_differences(inputs, dimension, people, judged))
    return out


def _without_estimate(run: str, dimension: str, labelled: list[str], tasks: int,
                      people: dict[str, float]) -> Note:
    """Why a run has no corrected mean: every task labelled (people's mean is then the
    estimate), or too few labels."""
    if labelled and len(labelled) == tasks:
        mean = sum(people[t] for t in labelled) / len(labelled)
        return Note("ppi_all_labelled", SECTION, (run,),
                    {"dimension": dimension, "labelled": len(labelled), "people_mean": mean})
    return Note("ppi_no_estimate", SECTION, (run,),
                {"dimension": dimension, "labelled": len(labelled), "min_labels": MIN_LABELS})


def _differences(inputs: Inputs, dimension: str, people: dict[str, dict[str, float]],
                 judged: dict[str, dict[str, float]]) -> Analysis:
    out = Analysis()
    needed = min_shared(inputs.options)
    runs = [r for r in inputs.sets.runs if judged[r["run_id"]]]
    for first, second in combinations(runs, 2):
        a, b = first["run_id"], second["run_id"]
        names = (first["run"], second["run"])
        tasks = [t for t in judged[a] if t in judged[b]]
        both = {t: people[a][t] - people[b][t] for t in tasks if t in people[a] and t in people[b]}
        counts = {"dimension": dimension, "shared": len(both), "min_shared": needed}
        if len(both) < needed:
            out.notes.append(Note("ppi_too_few_shared", SECTION, names, counts))
        diff = corrected(both, {t: judged[a][t] - judged[b][t] for t in tasks}, tasks)
        if diff is None:
            continue
        name = f"{first['run']}_vs_{second['run']}_{dimension}_ppi_diff"
        out.metrics |= {name: diff.mean, f"{name}_ci_low": diff.ci_low,
                        f"{name}_ci_high": diff.ci_high}
        zero_width = diff.ci_high - diff.ci_low <= 1e-12
        if zero_width:
            out.notes.append(Note("ppi_zero_width", SECTION, names, counts))
        decides = len(both) >= needed and not zero_width
        shown = diff.ci_low > 0 or diff.ci_high < 0
        out.claims.append(Claim(
            "corrected", SECTION, names, metric=dimension, difference=diff.mean,
            ci=(diff.ci_low, diff.ci_high), n_tasks=len(tasks), rule=RULE,
            authority=Authority.corrected if decides else Authority.descriptive,
            decisive=decides, key=decides,
            figures={**counts, "labelled": diff.labelled, "decides": decides,
                     "shown": shown, "zero_width": zero_width,
                     "higher": (names[0] if diff.mean > 0 else names[1]) if shown else None}))
    return out


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
