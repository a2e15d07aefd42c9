"""How far the judge can be trusted: its spread over samples, its agreement with a panel, where
the judges disagree most, a panel judge that reverses a ranking (in the key finding), the G-Eval
dimensions a team added (docs/judging.md); people's labels against it and a meta-evaluation's
signals against SummEdits' (docs/validate-your-judge.md)."""

from __future__ import annotations

import numpy as np

from metrics.base import PARSE_FAILURES as FLAG
from metrics.base import parse_failure_counts
from metrics.geval import DIMENSIONS
from report import policy
from report.human_agreement import claims as people_claims
from report.human_agreement import compare
from report.meta_eval import signal_tables
from report.model import Analysis, Claim, Inputs, Row, register_analysis
from report.verdict import TaskSets
from tracking.human_labels import LabelsError

SECTION = "The judge"
TOP = 3  # disagreements shown


def judged_dimensions(rows: list[Row]) -> list[str]:
    """The G-Eval dimensions judged, from the parse-failure count each logs; the defaults first."""
    found = {f.removeprefix("geval_") for r in rows for f in parse_failure_counts(r)
             if f.startswith("geval_")}
    return [d for d in DIMENSIONS if d in found or not found] + sorted(found - set(DIMENSIONS))


@register_analysis("judge", 40)
def judge(inputs: Inputs) -> Analysis:
    rows, dims = inputs.finished, judged_dimensions(inputs.finished)
    claims = _reversals(inputs.sets)
    if policy.judged(inputs.rows):
        claims.append(Claim("judge_spread", SECTION, figures={"dimensions": dims, "samples": {
            r["run"]: [r.get("judge_samples"), *(r.get(f"geval_{d}_judge_sd_mean") for d in dims)]
            for r in rows if any(r.get(f"geval_{d}_judge_sd_mean") is not None for d in dims)},
            "panel": {r["run"]: {"judges": [r.get("judge"), *r["judge_panel"]], "alpha": {d: [r.get(
                f"judge_agreement_{d}{s}") for s in ("", "_ci_low", "_ci_high", "_n")] for d in dims},
                "failures": {name: int(sum(r.get(f"panel_{name}_geval_{d}{FLAG}") or 0 for d in dims))
                             for name in r["judge_panel"]}} for r in rows if r.get("judge_panel")}}))
        claims += _disagreements(inputs.sets)
    return Analysis(claims=claims + further_dimensions(rows))


def further_dimensions(rows: list[Row]) -> list[Claim]:
    """The dimensions a team added to faithfulness and coverage, each run over its own
    answered tasks: mean, 95% CI, the share scoring 4 or more, unreadable replies."""
    extra = [d for d in judged_dimensions(rows) if d not in DIMENSIONS]
    return [Claim("judge_dimensions", SECTION, figures={"runs": {r["run"]: {d: [
        r.get(f"geval_{d}_{k}") for k in ("mean", "ci_low", "ci_high", "share_ge4")]
        + [int(r.get(f"geval_{d}{FLAG}") or 0)] for d in extra} for r in rows}})] if extra else []


def _disagreements(sets: TaskSets) -> list[Claim]:
    """The widest gaps between the primary judge and a panel judge on one item."""
    found = []
    for run in sets.runs:
        for tid in sets.common:
            rec = sets.tables[run["run_id"]][tid]
            for name, view in (rec.get("geval_panel") or {}).items():
                for d in [k for k in view or {} if f"{k}_reasoning" in view]:
                    mine, theirs = rec.get(f"geval_{d}"), view.get(d)
                    if mine is not None and theirs is not None and mine != theirs:
                        found.append((abs(mine - theirs), run["run"], rec, name, view, d))
    found.sort(key=lambda f: (-f[0], f[1], f[2]["id"], f[4].get(f[5]) or 0))
    return [Claim("judge_disagreement", SECTION, (run,), f"geval_{d}", figures={
        "rank": k, "task": rec["id"], "dimension": d, "judge": name, "primary": rec[f"geval_{d}"],
        "other": view[d], "samples": len(rec.get(f"geval_{d}_samples") or [None]),
        "primary_reasoning": rec.get(f"geval_{d}_reasoning"),
        "other_reasoning": view.get(f"{d}_reasoning")})
        for k, (_, run, rec, name, view, d) in enumerate(found[:TOP])]


def _reversals(sets: TaskSets) -> list[Claim]:
    """Where a panel judge ranks two compared runs the other way round from the primary judge
    on a dimension (mean differences of opposite signs on the tasks both scored for both)."""
    runs = [r for r in sets.runs if not policy.is_bound(r)]
    found: dict[tuple[str, str], list[list[object]]] = {}
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            for (dim, judge), (mine, theirs, n) in _judge_differences(sets, a, b).items():
                if mine * theirs < 0:
                    found.setdefault((dim, judge), []).append([a["run"], b["run"], mine, theirs, n])
    return [Claim("judge_reversal", "Key finding", tuple(dict.fromkeys(str(r) for p in pairs for r in p[:2])),
                  f"geval_{dim}", figures={"dimension": dim, "judge": judge, "pairs": pairs})
            for (dim, judge), pairs in found.items()]


def _judge_differences(sets: TaskSets, a: Row, b: Row
                       ) -> dict[tuple[str, str], tuple[float, float, int]]:
    """Per (dimension, panel judge): the mean score difference a minus b by the primary
    judge and by the panel judge, over the tasks both judges scored for both runs."""
    first, second = sets.tables.get(a["run_id"], {}), sets.tables.get(b["run_id"], {})
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for mine, theirs in ((first[t], second[t]) for t in sorted(set(first) & set(second))):
        views = (mine.get("geval_panel") or {}, theirs.get("geval_panel") or {})
        for judge in sorted(set(views[0]) & set(views[1])):
            one, two = views[0][judge] or {}, views[1][judge] or {}
            for dim in [k for k in one if f"{k}_reasoning" in one]:
                scores = [mine.get(f"geval_{dim}"), theirs.get(f"geval_{dim}"), one.get(dim),
                          two.get(dim)]
                if all(v is not None for v in scores):
                    x = [float(v) for v in scores]  # type: ignore[arg-type]
                    pairs.setdefault((dim, judge), []).append((x[0] - x[1], x[2] - x[3]))
    return {k: (float(np.mean([d[0] for d in v])), float(np.mean([d[1] for d in v])), len(v))
            for k, v in pairs.items()}


@register_analysis("meta_evaluation", 5)
def meta_evaluation(inputs: Inputs) -> Analysis:
    return Analysis(claims=signal_tables(inputs.finished))


@register_analysis("human_agreement", 80)
def human_agreement(inputs: Inputs) -> Analysis:
    try:
        found = inputs.people or compare(inputs.labels, inputs.records, inputs.rows, warn=False)
    except LabelsError:
        return Analysis()
    return Analysis(claims=people_claims(found))
