"""The pairwise judge (``judge.pairwise``): in the key finding, per pair, its preference beside
the absolute scores' paired difference; its section's figures, rankings and panel, recomputed
from ``pairwise.jsonl`` (docs/judging.md#pairwise-which-summary-is-better)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from metrics.pairwise import PairFigures
from metrics.stats import Paired
from report import policy
from report.model import Analysis, Claim, Inputs, Row, register_analysis
from report.verdict import pair_records

SECTION = "Pairwise judge"
KEY = "Key finding"
FINDING_DIMENSION = "overall"  # the dimension the key finding states (else the first judged)


@register_analysis("pairwise", 70)
def pairwise(inputs: Inputs) -> Analysis:
    return Analysis(claims=[] if inputs.pairwise is None else claims(
        inputs.pairwise, inputs.finished, inputs.records, inputs.keys[0]))


def claims(view: Any, rows: list[Row], records: dict[str, list[Row]], key: str) -> list[Claim]:
    """The key finding's and the section's claims of a ``PairwiseView``."""
    summary = view.summary
    if summary is None:
        return [Claim("pairwise_skipped", s, figures={"why": view.skipped}) for s in (KEY, SECTION)]
    figures = summary.figures()
    dims = [f.dimension for f in figures]
    dim = FINDING_DIMENSION if FINDING_DIMENSION in dims else dims[0]
    by_run = {r["run"]: records.get(r["run_id"], []) for r in rows}
    out = [preference(f, pair_records(by_run.get(f.pair.a, []), by_run.get(f.pair.b, []), key)[3],
                      key) for f in figures if f.dimension == dim]
    first = summary.of(summary.judges[0])
    if first["position_inconsistency"] is not None:
        out.append(Claim("pairwise_position", KEY, figures={"share": first["position_inconsistency"]}))
    return out + [Claim("pairwise_judge", SECTION, figures={
        "judge": summary.judges[0], "calls": view.calls, "cached": view.cached_calls,
        "cost": view.cost_usd, "rows": [
            [f.pair.name, f.dimension, f.n_tasks, f.wins, f.ties, f.losses, f.win_rate,
             f.win_rate_ci, f.sign_test_p, f.position_inconsistency, f.first_position_preference,
             f.unreadable, f.not_judged] for f in figures],
        "ranking": {d: [[s.run, s.strength, s.ci_low, s.ci_high] for s in ranking]
                    for d, ranking in summary.ranking.items()},
        "pairs": [f"{f.pair.name} ({f.dimension})" for f in figures],
        "judges": {j: [summary.of(j)["position_inconsistency"],
                       summary.of(j)["first_position_preference"],
                       [f.winner for f in summary.figures(j)]] for j in summary.judges},
        "agreement": {d: None if a is None else [a.alpha, a.ci_low, a.ci_high]
                      for d, a in summary.agreement.items()}})]


def preference(f: PairFigures, absolute: Paired | None, key: str) -> Claim:
    """The judge's preference on a pair, beside the absolute scores' difference by direction."""
    low, high = sorted(policy.advantage(x, key) for x in (absolute.ci_low, absolute.ci_high)) \
        if absolute is not None else (0.0, 0.0)
    return Claim("pairwise_preference", KEY, (f.pair.a, f.pair.b), key,
                 None if absolute is None else policy.advantage(absolute.mean_diff, key),
                 None if absolute is None else (low, high), p=f.sign_test_p, n_tasks=f.n_tasks,
                 rule="sign test", figures={
                     "dimension": f.dimension, "name": f.pair.name, "winner": f.winner,
                     "wins": f.wins, "ties": f.ties, "losses": f.losses, "win_rate": f.win_rate,
                     "win_rate_ci": f.win_rate_ci, "length_explains": f.length_explains,
                     "length": None if f.length is None else {
                         **asdict(f.length), "systematic": f.length.systematically_longer}})
