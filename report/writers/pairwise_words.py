"""Words for the pairwise judge (``report/analyses/pairwise.py``; the method:
docs/judging.md#pairwise-which-summary-is-better)."""

from __future__ import annotations

from typing import Any

from metrics.stats import ALPHA
from report.model import Claim
from report.writers.cells import Style, interval, money, number, p_value, share
from report.writers.judge_words import table
from report.writers.words import words

METHOD = "docs/judging.md#pairwise-which-summary-is-better"


def _rate(rate: float | None, ci: Any) -> str:
    return number(rate, 2) + (f" {interval(ci, 2)}" if ci else "") if rate is not None else number(None)


@words("pairwise_skipped")
def skipped(c: Claim, style: Style, short: bool) -> str:
    return f"Pairwise judge: not judged ({c.figures['why']})."


def length_warning(c: Claim, style: Style) -> str:
    """The length-controlled rate (AlpacaEval 2), and a warning where the preference may be
    for length: the raw and length-controlled winners differ, or one run's answers are
    systematically longer."""
    lc, f, (a, b) = c.figures["length"], c.figures, c.runs
    if lc is None or not c.n_tasks:
        return ""
    said = (f" Length-controlled win rate of {a} (ties ½): {_rate(lc['win_rate'], lc['ci'])}"
            if lc["win_rate"] is not None else f" Length-controlled win rate: not read "
            f"({lc['why_not']})") + f" ({a} longer on {lc['a_longer']} tasks, {b} on {lc['b_longer']})."
    lc_winner = None if lc["win_rate"] in (None, 0.5) else a if lc["win_rate"] > 0.5 else b
    warnings = []
    if lc_winner is not None and f["winner"] is not None and lc_winner != f["winner"]:
        warnings.append(f"the raw winner is {f['winner']}, the length-controlled one {lc_winner}")
    if lc["systematic"]:
        longer = a if lc["a_longer"] > lc["b_longer"] else b
        warnings.append(f"{longer}'s answers are systematically longer (sign test "
                        f"p={p_value(lc['longer_p'])})")
    if warnings:
        said += (f" {style.strong('Warning: the pairwise judge may prefer length:')} "
                 + "; ".join(warnings) + f". Compare at the same {style.code('target_length')}, "
                 "or read the length-controlled rate.")
    return said


def _preference(c: Claim) -> str:
    """The preference in words as strong as its sign test: "beats" only below ``ALPHA``."""
    f = c.figures
    if f["winner"] is None:
        return "no preference (as many wins as losses)"
    other = c.runs[1] if f["winner"] == c.runs[0] else c.runs[0]
    if f["length_explains"]:
        return (f"{f['winner']} preferred over {other}, but the preference is explained by "
                "length (at equal length its CI includes 0.5)")
    if c.p is not None and c.p < ALPHA:
        return f"{f['winner']} beats {other}"
    return f"{f['winner']} ahead of {other}, not significant"


@words("pairwise_preference")
def preference(c: Claim, style: Style, short: bool) -> str:
    f, (a, b), key = c.figures, c.runs, style.code(c.metric or "")
    head = f"Pairwise judge ({f['dimension']}), {f['name']}: "
    if not c.n_tasks:
        return head + "no task judged."
    p = f", sign test p={p_value(c.p)}" if c.p is not None else ""
    said = (head + f"{_preference(c)}; {a} wins {f['wins']} of {c.n_tasks} tasks (win rate, ties "
            f"½: {_rate(f['win_rate'], f['win_rate_ci'])}; {f['ties']} ties, {f['losses']} losses{p})")
    if short:
        return said
    if c.ci is None:
        return f"{said}; the absolute scores ({key}) have no pair to compare." + length_warning(c, style)
    low, high = c.ci
    unsettled = ", a difference its CI does not tell from 0" if low <= 0 <= high else ""
    return (f"{said}. The absolute scores, a separate measure: {key}, {a} minus {b} by its "
            f"direction: {c.difference:+.3f}, 95% CI {interval(c.ci, sign=True)}{unsettled}."
            + length_warning(c, style))


@words("pairwise_position")
def position(c: Claim, style: Style, short: bool) -> str:
    return (f"The judge changed its verdict with the order on {share(c.figures['share'])} of the "
            "pairs it read twice (counted as ties).")


@words("pairwise_pairs")
def pairs(c: Claim, style: Style, short: bool) -> str:
    return (f"The judge ({c.figures['judge']}) read both answers of each task in both orders "
            f"({METHOD})." + table(
                style, short, ["pair", "dimension", "tasks", "win", "tie", "loss",
                               "win rate [95% CI]", "sign test p", "position-inconsistent",
                               "first-position preference", "unreadable", "not judged"],
                [[*r[:6], _rate(r[6], r[7]), p_value(r[8]), share(r[9]), share(r[10]), *r[11:]]
                 for r in c.figures["rows"]]))


@words("pairwise_ranking")
def ranking(c: Claim, style: Style, short: bool) -> str:
    return (f"Bradley-Terry ranking on {c.figures['dimension']} (log-scale strengths centred on "
            "0; a tie counts half a win each way; 95% bootstrap CIs over tasks)." + table(
                style, short, ["rank", "run", "strength [95% CI]"],
                [[k, run, f"{s:+.2f}" + (f" {interval((lo, hi), 2, sign=True)}"
                                         if lo is not None and hi is not None else "")]
                 for k, (run, s, lo, hi) in enumerate(c.figures["ranking"], start=1)]))


@words("pairwise_panel")
def panel(c: Claim, style: Style, short: bool) -> str:
    agree = "; ".join(f"{d}: alpha {number(a[0], 2)}" + (f" {interval(a[1:], 2)}" if a[1] is not None
                                                         else "") if a else f"{d}: undefined"
                      for d, a in c.figures["agreement"].items())
    return ("Each judge's preferences (the run it prefers on more tasks) and position bias; "
            f"their agreement on each task's outcome (Krippendorff's alpha, ordinal): {agree}."
            + table(style, short, ["judge", "position-inconsistent", "first-position preference",
                                   *(f"preferred: {p}" for p in c.figures["pairs"])],
                    [[j, share(i), share(p), *(w or "none" for w in winners)]
                     for j, (i, p, winners) in c.figures["judges"].items()]))


@words("pairwise_calls")
def calls(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    return (f"Pairwise judge calls: {f['calls']} ({f['cached']} from the response cache), "
            f"{money(f['cost'], 4)}; counted in the sweep's judge cost.")
