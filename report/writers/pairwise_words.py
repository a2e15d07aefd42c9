"""Words for the pairwise judge (``report/analyses/pairwise.py``; docs/judging.md)."""

from __future__ import annotations

from typing import Any

from metrics.stats import ALPHA
from report.model import Claim
from report.writers.cells import Style, interval, money, number, p_value, share
from report.writers.judge_words import estimate, table
from report.writers.words import words

METHOD = "docs/judging.md#pairwise-which-summary-is-better"


def _rate(rate: float | None, ci: Any) -> str:
    return estimate(rate, *(ci or (None, None)), digits=2)


def length_warning(c: Claim, style: Style) -> str:
    """The length-controlled rate (AlpacaEval 2), and a warning where the preference may be for
    length: the raw and length-controlled winners differ, or one run's answers are longer."""
    lc, winner, (a, b) = c.figures["length"], c.figures["winner"], c.runs
    if lc is None or not c.n_tasks:
        return ""
    rate = lc["win_rate"]
    said = (f" Length-controlled win rate of {a} (ties ½): {_rate(rate, lc['ci'])}" if rate is not None
            else f" Length-controlled win rate: not read ({lc['why_not']})") + \
        f" ({a} longer on {lc['a_longer']} tasks, {b} on {lc['b_longer']})."
    lc_winner = None if rate in (None, 0.5) else a if rate > 0.5 else b
    warnings = [f"the raw winner is {winner}, the length-controlled one {lc_winner}"] \
        if None not in (lc_winner, winner) and lc_winner != winner else []
    if lc["systematic"]:
        warnings.append(f"{a if lc['a_longer'] > lc['b_longer'] else b}'s answers are "
                        f"systematically longer (sign test p={p_value(lc['longer_p'])})")
    return said + (f" {style.strong('Warning: the pairwise judge may prefer length:')} "
                   + "; ".join(warnings) + f". Compare at the same {style.code('target_length')}, "
                   "or read the length-controlled rate." if warnings else "")


def _preference(c: Claim) -> str:
    """The preference in words as strong as its sign test: "beats" only below ``ALPHA``."""
    winner = c.figures["winner"]
    if winner is None:
        return "no preference (as many wins as losses)"
    other = c.runs[1] if winner == c.runs[0] else c.runs[0]
    if c.figures["length_explains"]:
        return (f"{winner} preferred over {other}, but the preference is explained by length (at "
                "equal length its CI includes 0.5)")
    return f"{winner} beats {other}" if c.p is not None and c.p < ALPHA else \
        f"{winner} ahead of {other}, not significant"


@words("pairwise_preference")
def preference(c: Claim, style: Style, short: bool) -> str:
    f, (a, b), key = c.figures, c.runs, style.code(c.metric or "")
    head = f"Pairwise judge ({f['dimension']}), {f['name']}: "
    if not c.n_tasks:
        return head + "no task judged."
    p = f", sign test p={p_value(c.p)}" if c.p is not None else ""
    said = (head + f"{_preference(c)}; {a} wins {f['wins']} of {c.n_tasks} tasks (win rate, ties "
            f"½: {_rate(f['win_rate'], f['win_rate_ci'])}; {f['ties']} ties, {f['losses']} losses{p})")
    if c.ci is None:
        return f"{said}; the absolute scores ({key}) have no pair to compare." + length_warning(c, style)
    unsettled = ", a difference its CI does not tell from 0" if c.ci[0] <= 0 <= c.ci[1] else ""
    return (f"{said}. The absolute scores, a separate measure: {key}, {a} minus {b} by its "
            f"direction: {c.difference:+.3f}, 95% CI {interval(c.ci, sign=True)}{unsettled}."
            + length_warning(c, style))


@words("pairwise_skipped", "pairwise_position")
def pairwise_line(c: Claim, style: Style, short: bool) -> str:
    if c.kind == "pairwise_skipped":
        return f"Pairwise judge: not judged ({c.figures['why']})."
    return (f"The judge changed its verdict with the order on {share(c.figures['share'])} of the "
            "pairs it read twice (counted as ties).")


@words("pairwise_judge")
def section(c: Claim, style: Style, short: bool) -> str:
    """The section: every pair's figures, each dimension's Bradley-Terry ranking, a panel's
    judges and their agreement, and what the judging cost."""
    f = c.figures
    parts = [f"The judge ({f['judge']}) read both answers of each task in both orders ({METHOD})."
             + table(style, short, ["pair", "dimension", "tasks", "win", "tie", "loss",
                                    "win rate [95% CI]", "sign test p", "position-inconsistent",
                                    "first-position preference", "unreadable", "not judged"],
                     [[*r[:6], _rate(r[6], r[7]), p_value(r[8]), share(r[9]), share(r[10]),
                       *r[11:]] for r in f["rows"]])]
    parts += [f"Bradley-Terry ranking on {d} (log-scale strengths centred on 0; a tie counts half "
              "a win each way; 95% bootstrap CIs over tasks)." + table(
                  style, short, ["rank", "run", "strength [95% CI]"],
                  [[k, run, f"{s:+.2f}" + (f" {interval((lo, hi), 2, sign=True)}"
                                           if lo is not None and hi is not None else "")]
                   for k, (run, s, lo, hi) in enumerate(ranking, start=1)])
              for d, ranking in f["ranking"].items()]
    if len(f["judges"]) > 1:
        agree = "; ".join(f"{d}: alpha {number(a[0], 2)}" + (
            f" {interval(a[1:], 2)}" if a[1] is not None else "") if a else f"{d}: undefined"
            for d, a in f["agreement"].items())
        parts.append("Each judge's preferences (the run it prefers on more tasks) and position "
                     f"bias; their agreement on each task's outcome (Krippendorff's alpha): {agree}."
                     + table(style, short, ["judge", "position-inconsistent",
                                            "first-position preference",
                                            *(f"preferred: {p}" for p in f["pairs"])],
                             [[j, share(i), share(p), *(w or "none" for w in winners)]
                              for j, (i, p, winners) in f["judges"].items()]))
    parts.append(f"Pairwise judge calls: {f['calls']} ({f['cached']} from the response cache), "
                 f"{money(f['cost'], 4)}; counted in the sweep's judge cost.")
    return ("\n\n" if style.markdown else " ").join(parts)
