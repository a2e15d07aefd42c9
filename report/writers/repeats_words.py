"""Words for what repeats show (``report/analyses/repeats.py``)."""

from __future__ import annotations

from metrics.repeats import STABLE_SHARE, Projection
from report.model import Claim
from report.writers.cells import Style, number, share
from report.writers.words import words


@words("repeats_split")
def split(c: Claim, style: Style, short: bool) -> str:
    k = "/".join(map(str, c.figures["k"]))
    return (f"Each task was answered {style.strong(f'K={k} times')} per system; every mean, CI "
            "and test is over tasks, a task's repeats averaged first; below, the variance of one "
            f"answer's {style.code(c.metric or '')} split between tasks, within a task and the "
            "judge (docs/running.md#repeats-a-system-is-a-distribution).")


@words("repeats_pair")
def pair(c: Claim, style: Style, short: bool) -> str:
    f, what = c.figures, "-".join(c.runs)
    text = (Projection(**f["projection"]).sentence(what) if f["projection"] else
            f"{what}: fewer than two tasks with repeats from both, or no spread at all, so no projection.")
    if f["judge"]:
        text += (f" The judge's own variance is {number(f['judge'], 4)} of the within-task "
                 f"{number(f['within'], 4)}: more {style.code('judge.samples')} narrow only that part.")
    if f["stable"]:
        text += (f" Stability: on {share(f['stable'][0])} of {f['stable'][1]} tasks the winner "
                 f"is the same in at least {share(STABLE_SHARE)} of the repeats.")
    return text if short or not style.markdown else f"- {text}"


@words("pass_all")
def passed(c: Claim, style: Style, short: bool) -> str:
    return "pass^k: the share of tasks whose every repeat is correct."
