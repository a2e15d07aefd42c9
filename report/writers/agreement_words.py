"""Words for people's labels against the judge (``report.human_agreement``) and the judge's
validation (``report.meta_eval``); how to read them: docs/validate-your-judge.md."""

from __future__ import annotations

from typing import Any

from report.model import Claim
from report.writers.cells import Style, interval
from report.writers.judge_words import table
from report.writers.words import words

FIVE_POINT = "1-5"


def _kind(scale: str) -> str:
    return "quadratic-weighted kappa" if scale == FIVE_POINT else "Cohen's kappa"


def _ci(value: Any, low: float | None = None, high: float | None = None) -> str:
    return f"{value:.2f}" + (f" {interval((low, high), 2)}" if low is not None and high is not None
                             else "")


def _kappa(k: list[float | None] | None) -> str:
    return "undefined (one value throughout)" if k is None else _ci(*k)


def _percent(ba: list[float | None] | None) -> str:
    if ba is None:
        return "unknown"
    value, low, high = ba
    return f"{100 * value:.1f}" + (f" [{100 * low:.1f}, {100 * high:.1f}]"
                                   if low is not None and high is not None else "")


@words("people_judge")
def people_judge(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    if short:
        return f"people's labels ({f['sources']}) against the judge: see report.html"
    rows = [[style.code(d), scale if threshold is None else f"{scale} (judge yes at ≥ {threshold:g})",
             n, f"{_kind(scale)} {_kappa(k)}", "unknown" if rho is None else _ci(*rho),
             _percent(ba), "undefined" if k is None else
             (f"{style.strong('low')} (< {f['low']})" if low else "ok"), unmatched]
            for d, scale, threshold, n, k, rho, ba, low, unmatched in f["rows"]]
    text = (f"People's labels ({f['sources']}) against the judge's scores of the same answers, "
            f"95% bootstrap CIs over label pairs; a kappa below {f['low']} (Landis & Koch: fair "
            f"or worse) is flagged {style.strong('low')}: that dimension's judge scores are not "
            "to be trusted alone. Not compared: labels whose answer has no judge score "
            "(docs/validate-your-judge.md#read-the-agreement)." + table(
                style, short, ["dimension", "scale", "n", "judge vs people: kappa [95% CI]",
                               "Spearman [95% CI]", "balanced accuracy % [95% CI]", "agreement",
                               "not compared"], rows))
    if f["mixed"]:
        text += ("\n\nLeft out, labelled on both scales (1-5 and yes/no): "
                 + ", ".join(style.code(d) for d in f["mixed"]) + ". Fix: one scale per dimension.")
    if f["left_out"]:
        text += "\n\nLabels left out:\n\n" + "\n".join(f"- {why}" for why in f["left_out"])
    return text


@words("people_labellers")
def labellers(c: Claim, style: Style, short: bool) -> str:
    rows = c.figures["rows"]
    head = "### Between labellers\n\n" if style.markdown and not short else "Between labellers: "
    if not rows:
        return head + ("No answer was labelled by two people on the same dimension, so how far "
                       "people agree with each other is not measured here.")
    return head + "Kappa between each two labellers on the answers both labelled." + table(
        style, short, ["dimension", "labellers", "n (both labelled)", "kappa [95% CI]"],
        [[style.code(d), f"{a}, {b}", n, _kappa(k)] for d, a, b, n, k in rows])


@words("people_agreement")
def people_agreement(c: Claim, style: Style, short: bool) -> str:
    dims = c.figures["dimensions"]
    parts = [f"{style.code(d)} {_kind(scale)} {_kappa(k)} (n={n})"
             + (f" — {style.strong('low')}" if low else "") for d, scale, n, k, low in dims]
    low = [d for d, *_, is_low in dims if is_low]
    warning = (f" Agreement is low on {', '.join(style.code(d) for d in low)}: its judge scores "
               "are not to be trusted alone." if low else "")
    return (f"{style.strong('Judge checked against your labels:')} {'; '.join(parts)}, 95% CIs "
            f"in brackets (labels: {c.figures['sources']}).{warning}")
