"""Words for the agent's path (report.analyses.trajectory): each agentic run's main path
problem, where gold recall stops rising over a loop-budget sweep, and the path's caveats."""

from __future__ import annotations

from typing import Any

from report.model import Claim, Note
from report.writers.cells import Style, number, share
from report.writers.words import words

PROBLEM_WORDS = {"off_document": "reading other documents",
                 "premature": "stopping with gold it had seen unread (P)",
                 "redundant": "reading the same text again",
                 "over_search": "reading on after its last new gold"}


def _image(c: Claim, style: Style, short: bool) -> str:
    plot = c.figures.get("plot")
    return f"\n\n![{plot}](plots/{plot}.png)" if plot and style.markdown and not short else ""


@words("path")
def path(c: Claim, style: Style, short: bool) -> str:
    f: dict[str, Any] = dict(c.figures)
    run = style.strong(c.runs[0]) if not short else c.runs[0]
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
    head = (f"{run}: main path problem {PROBLEM_WORDS[f['problem']]}" if f.get("problem")
            else f"{run}: no path problem stands out")
    text = f"{head}; " + "; ".join(parts)
    if short:
        return text
    text += (f". By the stop it had read {share(f.get('recall_at_stop'))} of the gold "
             f"evidence in {number(f.get('steps'), 1)} steps on average; redundant reads "
             f"{share(f.get('redundant'))}, reads after the last new gold (where it read gold) "
             f"{share(f.get('over_search'))}, gold seen in a hit and never read "
             f"{number(f.get('seen_unread'), 2)} per task; mechanical P on "
             f"{share(f.get('p_rate'))} and IR on {share(f.get('ir_rate'))} of tasks "
             f"(n={c.n_tasks}).")
    return text + _image(c, style, short)


@words("path_budget")
def path_budget(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    curve = ", ".join(f"{b}: {share(v)}" for b, v in zip(f["budgets"], f["recall"], strict=True))
    plateau = f.get("plateau")
    where = (f"gold recall at stop stops rising at max_loops={plateau}" if plateau is not None
             else "gold recall at stop still rises at the largest budgets")
    text = f"{f['system']} over a loop-budget sweep: {where} ({curve})"
    return text + ("" if short else ".") + _image(c, style, short)


@words("path_unlocated")
def path_unlocated(n: Note, style: Style, short: bool) -> str:
    k = n.counts
    return (f"{', '.join(n.runs)}: {k['steps']} step(s), {k['reads']} read(s) and "
            f"{k['results']} search hit(s) of its traces could not be located in the dataset "
            "by their text: counted apart, never as on or off the task's documents.")


@words("path_no_gold")
def path_no_gold(n: Note, style: Style, short: bool) -> str:
    k = n.counts
    return (f"{', '.join(n.runs)}: {k['tasks']} of {k['of']} task(s) have no gold evidence, so "
            "their path's gold measures are unknown (null), not 0.")
