"""The pairwise judge in the sweep report: its section, its sentence in the key finding
(beside the absolute scores' paired difference, each saying what it shows: a preference is
"beats" only when its sign test is significant) and its verdicts in
compare.html. Every figure is recomputed from the parent run's ``pairwise.jsonl``
(``metrics.pairwise.summarize``), so a rebuilt report shows the same numbers.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metrics.pairwise import ARTIFACT, PairFigures, Summary, outcomes, summarize
from metrics.stats import ALPHA, Paired
from report import policy
from report.verdict import fmt, pair_records, table

SKIPPED_TAG = "pairwise_skipped"
FINDING_DIMENSION = "overall"  # the dimension the key finding states (else the first judged)


@dataclass
class PairwiseView:
    """What the parent run holds of its pairwise judging."""

    rows: list[dict[str, Any]]  # pairwise.jsonl
    skipped: str  # why nothing was judged ("" when it was)
    cost_usd: float  # what the pairwise judge calls were paid by this sweep's judging
    calls: int
    cached_calls: int
    cost_usd_earlier: float = 0.0  # paid by an earlier attempt of the same sweep run

    @property
    def summary(self) -> Summary | None:
        return summarize(self.rows) if self.rows else None


def read(client: Any, run: Any, folder: Path) -> PairwiseView | None:
    """The parent run's pairwise judging, or None when it had none (``judge.pairwise``
    off)."""
    skipped = run.data.tags.get(SKIPPED_TAG, "")
    rows: list[dict[str, Any]] = []
    try:
        path = Path(client.download_artifacts(run.info.run_id, ARTIFACT, str(folder)))
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    except Exception:  # noqa: BLE001 - MLflow raises several types for a missing artifact
        if not skipped:
            return None
    metrics = run.data.metrics
    return PairwiseView(rows, skipped, float(metrics.get("pairwise_judge_cost_usd_spent_total")
                                             or metrics.get("pairwise_judge_cost_usd_total") or 0.0),
                        int(metrics.get("pairwise_judge_calls") or 0),
                        int(metrics.get("pairwise_judge_cached_calls") or 0),
                        float(metrics.get("pairwise_judge_cost_usd_spent_earlier") or 0.0))


def section(view: PairwiseView) -> str:
    """The report's "Pairwise judge" section."""
    summary = view.summary
    if summary is None:
        return f"\n## Pairwise judge\n\nNot judged: {view.skipped}.\n"
    out = ["\n## Pairwise judge\n",
           f"The judge ({summary.judges[0]}) read both summaries of each task, for each pair and "
           "dimension, **in both orders**. Both orders naming the same summary decide the "
           "task; orders that disagree make it a tie and **position-inconsistent** (the judge "
           "followed where an answer stood, not what it said). A reply without its "
           "`Winner:` line is unreadable: counted, never a tie. Repeats are averaged per task. "
           "Win rates with 95% bootstrap CIs over tasks; the sign test is two-sided over the "
           "untied tasks. **First-position preference**: of the replies naming a winner, the "
           "share naming the summary shown first (0.5: no position bias). Every figure is "
           "recomputed from `pairwise.jsonl`.\n",
           _pairs_table(summary.figures())]
    for dim, ranking in summary.ranking.items():
        out.append(f"\nBradley-Terry ranking on {dim} (strengths on a log scale, centred on "
                   "0; a tie counts half a win each way; 95% bootstrap CIs over tasks):\n\n"
                   + table(["rank", "run", "strength [95% CI]"],
                           [[n, s.run, f"{s.strength:+.2f} " + (
                               f"[{s.ci_low:+.2f}, {s.ci_high:+.2f}]"
                               if s.ci_low is not None and s.ci_high is not None else "")]
                            for n, s in enumerate(ranking, start=1)]))
    if len(summary.judges) > 1:
        out.append(_panel(summary))
    out.append(f"\nPairwise judge calls: {view.calls} ({view.cached_calls} from the response "
               f"cache), ${view.cost_usd:.4f}; counted in the sweep's judge cost.\n")
    return "\n".join(out)


def _pairs_table(figures: list[PairFigures]) -> str:
    return table(
        ["pair", "dimension", "tasks", "win", "tie", "loss", "win rate [95% CI]",
         "sign test p", "position-inconsistent", "first-position preference", "unreadable",
         "not judged"],
        [[f.pair.name, f.dimension, f.n_tasks, f.wins, f.ties, f.losses, _rate(f),
          fmt(f.sign_test_p, 3), _share(f.position_inconsistency),
          _share(f.first_position_preference), f.unreadable, f.not_judged] for f in figures])


def _panel(summary: Summary) -> str:
    rows = [[judge, _share(summary.of(judge)["position_inconsistency"]),
             _share(summary.of(judge)["first_position_preference"]),
             *(f.winner or "none" for f in summary.figures(judge))] for judge in summary.judges]
    pairs = [f"preferred: {f.pair.name} ({f.dimension})" for f in summary.figures()]
    agree = "; ".join(f"{dim}: alpha {a.alpha:.2f}" + (
        f" [{a.ci_low:.2f}, {a.ci_high:.2f}]" if a.ci_low is not None else "")
        if a is not None else f"{dim}: undefined" for dim, a in summary.agreement.items())
    return ("\nEach judge's preferences (the run it prefers on more tasks) and position bias; "
            "their agreement on each task's outcome (Krippendorff's alpha, ordinal: loss < "
            f"tie < win): {agree}.\n\n"
            + table(["judge", "position-inconsistent", "first-position preference", *pairs],
                    rows))


def _rate(f: PairFigures) -> str:
    if f.win_rate is None:
        return "–"
    ci = f" [{f.win_rate_ci[0]:.2f}, {f.win_rate_ci[1]:.2f}]" if f.win_rate_ci else ""
    return f"{f.win_rate:.2f}{ci}"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def finding(view: PairwiseView | None, rows: list[dict[str, Any]],
            records: dict[str, list[dict[str, Any]]], key: str) -> str:
    """The key finding's pairwise sentences: per pair, the judge's preference on one
    dimension beside the absolute scores' paired difference on ``key``, each saying what it
    shows."""
    if view is None:
        return ""
    summary = view.summary
    if summary is None:
        return f" Pairwise judge: not judged ({view.skipped})."
    figures = summary.figures()
    dims = [f.dimension for f in figures]
    dim = FINDING_DIMENSION if FINDING_DIMENSION in dims else dims[0]
    by_run = {r["run"]: records.get(r["run_id"], []) for r in rows}
    parts = [_pair_sentence(f, _absolute(by_run, f, key), key) + length_warning(f)
             for f in figures if f.dimension == dim]
    bias = summary.of(summary.judges[0])["position_inconsistency"]
    if bias is not None:
        parts.append(f"The judge changed its verdict with the order on {bias:.0%} of the "
                     "pairs it read twice (counted as ties).")
    return " " + " ".join(parts)


def length_warning(f: PairFigures) -> str:
    """A warning when the preference may be for length (AlpacaEval 2's length control):
    the raw and length-controlled winners differ, or one run's answers are systematically
    longer; the length-controlled rate otherwise, or why it is not read."""
    lc = f.length
    if lc is None or not f.n_tasks:
        return ""
    longer = (f.pair.a if lc.a_longer > lc.b_longer else f.pair.b) \
        if lc.systematically_longer else None
    ci = f" [{lc.ci[0]:.2f}, {lc.ci[1]:.2f}]" if lc.ci is not None else ""
    said = (f" Length-controlled win rate of {f.pair.a} (ties ½): {lc.win_rate:.2f}{ci}"
            if lc.win_rate is not None else f" Length-controlled win rate: not read "
            f"({lc.why_not})")
    said += f" ({f.pair.a} longer on {lc.a_longer} tasks, {f.pair.b} on {lc.b_longer})."
    lc_winner = None if lc.win_rate is None or lc.win_rate == 0.5 else \
        f.pair.a if lc.win_rate > 0.5 else f.pair.b
    warnings = []
    if lc_winner is not None and f.winner is not None and lc_winner != f.winner:
        warnings.append(f"the raw winner is {f.winner}, the length-controlled one {lc_winner}")
    if longer is not None:
        warnings.append(f"{longer}'s answers are systematically longer (sign test "
                        f"p={lc.longer_p:.3g})")
    if warnings:
        said += (" **Warning: the pairwise judge may prefer length:** " + "; ".join(warnings)
                 + ". Compare at the same `target_length`, or read the length-controlled rate.")
    return said


def _pair_sentence(f: PairFigures, absolute: Paired | None, key: str) -> str:
    if not f.n_tasks:
        return f"Pairwise judge ({f.dimension}), {f.pair.name}: no task judged."
    ci = f" [{f.win_rate_ci[0]:.2f}, {f.win_rate_ci[1]:.2f}]" if f.win_rate_ci else ""
    p = f", sign test p={f.sign_test_p:.3g}" if f.sign_test_p is not None else ""
    said = (f"Pairwise judge ({f.dimension}), {f.pair.name}: {_preference(f)}; {f.pair.a} "
            f"wins {f.wins} of {f.n_tasks} tasks (win rate, ties ½: {f.win_rate:.2f}{ci}; {f.ties} "
            f"ties, {f.losses} losses{p})")
    if absolute is None:
        return f"{said}; the absolute scores (`{key}`) have no pair to compare."
    low, high = sorted(policy.advantage(x, key) for x in (absolute.ci_low, absolute.ci_high))
    shown = (f"`{key}`, {f.pair.a} minus {f.pair.b} by its direction: "
             f"{policy.advantage(absolute.mean_diff, key):+.3f}, 95% CI [{low:+.3f}, "
             f"{high:+.3f}]")
    unsettled = ", a difference its CI does not tell from 0" if low <= 0 <= high else ""
    return f"{said}. The absolute scores, a separate measure: {shown}{unsettled}."


def _preference(f: PairFigures) -> str:
    """The judge's preference in words as strong as its sign test: "beats" only below
    ``ALPHA``."""
    if f.winner is None:
        return "no preference (as many wins as losses)"
    other = f.pair.b if f.winner == f.pair.a else f.pair.a
    if f.length_explains:
        return (f"{f.winner} preferred over {other}, but the preference is explained by "
                "length (at equal length its CI includes 0.5)")
    if f.sign_test_p is not None and f.sign_test_p < ALPHA:
        return f"{f.winner} beats {other}"
    return f"{f.winner} ahead of {other}, not significant"


def _absolute(by_run: dict[str, list[dict[str, Any]]], f: PairFigures, key: str
              ) -> Paired | None:
    """The paired difference (first run minus second) on ``key`` over the tasks both
    scored (None below two), paired as every comparison is (``verdict.pair_records``)."""
    return pair_records(by_run.get(f.pair.a, []), by_run.get(f.pair.b, []), key)[3]


def per_task(view: PairwiseView | None) -> dict[str, str]:
    """compare.html: per task, the primary judge's winner of each pair and dimension with
    both replies (folded)."""
    summary = view.summary if view is not None else None
    if view is None or summary is None:
        return {}
    out: dict[str, list[str]] = {}
    for o in outcomes(view.rows):
        if o.judge != summary.judges[0] or o.status == "not_judged":
            continue
        shown = {"unreadable": "unreadable reply", "inconsistent":
                 "tie (position-inconsistent)"}.get(o.status, o.winner or "")
        why = "".join(f"<div class='out'><b>{html.escape(r['first'])} shown first:</b> "
                      f"{html.escape(r.get('reply') or '')}</div>" for r in o.rows)
        repeat = f", repeat {o.repeat}" if o.repeat else ""
        out.setdefault(o.task_id, []).append(
            f"<details class='pairwise'><summary>judge, {html.escape(o.pair.name)} "
            f"({html.escape(o.dimension)}{repeat}): <b>{html.escape(shown)}</b></summary>"
            f"{why}</details>")
    return {task: "".join(parts) for task, parts in out.items()}
