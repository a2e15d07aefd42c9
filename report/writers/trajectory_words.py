"""Words for the agent's path (report.analyses.trajectory): each agentic run's main path
problem, where gold recall stops rising over a loop-budget sweep, and the path's caveats."""

from __future__ import annotations

from report.model import Claim
from report.writers.cells import Style, number, share
from report.writers.words import Sentences, sentences

PROBLEM_WORDS = {"off_document": "reading other documents",
                 "premature": "stopping with gold it had seen unread (P)",
                 "redundant": "reading the same text again",
                 "over_search": "reading on after its last new gold"}


def _image(c: Claim, style: Style) -> str:
    plot = c.figures.get("plot")
    return f"\n\n![{plot}](plots/{plot}.png)" if plot and style.markdown else ""


def _path(c: Claim, style: Style) -> dict[str, str]:
    f = c.figures
    parts = []
    if f.get("hits_off") or f.get("reads_off"):  # none off: no words spent on it
        parts.append(f"{share(f.get('hits_off'))} of its search hits and "
                     f"{share(f.get('reads_off'))} of its reads were from other documents")
    if f.get("first_gold_median") is not None:
        parts.append(f"it first read gold at step {number(f['first_gold_median'], 0)} "
                     "(median)" + (f", never on {f['never_gold']} of {c.n_tasks} tasks"
                                   if f.get("never_gold") else ""))
    else:
        parts.append(f"it never read gold evidence on any of its {c.n_tasks} tasks")
    head = (f"main path problem {PROBLEM_WORDS[f['problem']]}" if f.get("problem")
            else "no path problem stands out")
    return {"said": f"{head}; " + "; ".join(parts), "image": _image(c, style)}


def _budget(c: Claim, style: Style) -> dict[str, str]:
    f = c.figures
    plateau = f.get("plateau")
    return {"curve": ", ".join(f"{b}: {share(v)}" for b, v in zip(f["budgets"], f["recall"],
                                                                   strict=True)),
            "where": (f"gold recall at stop stops rising at max_loops={plateau}"
                      if plateau is not None else
                      "gold recall at stop still rises at the largest budgets"),
            "image": _image(c, style)}


sentences(
    path=Sentences(
        "", short="{a}: {said}", full="{strong[a]}: {said}. By the stop it had read "
        "{recall_at_stop:.0%} of the gold evidence in "
        "{steps:,.1f} steps on average; redundant reads {redundant:.0%}, reads after the last "
        "new gold (where it read gold) {over_search:.0%}, gold seen in a hit and never read "
        "{seen_unread:,.2f} per task; mechanical P on {p_rate:.0%} and IR on {ir_rate:.0%} of "
        "tasks (n={n_tasks}).{image}", parts=_path),
    path_budget=Sentences("{system} over a loop-budget sweep: {where} ({curve})",
                          full=".{image}", parts=_budget),
    path_unlocated=Sentences(
        "{runs}: {steps} step(s), {reads} read(s) and {results} search hit(s) of its traces "
        "could not be located in the dataset by their text: counted apart, never as on or off "
        "the task's documents."),
    path_no_gold=Sentences(
        "{runs}: {tasks} of {of} task(s) have no gold evidence, so their path's gold measures "
        "are unknown (null), not 0."),
)
