"""Words for results by document length (``report/analyses/length.py``): bins read as
ranges ("below 2.6k tokens", "2.6k–4.5k tokens", "4.5k tokens and above")."""

from __future__ import annotations

from report.model import Claim
from report.writers.cells import UNKNOWN, Style, interval, number, signed, value_range
from report.writers.judge_words import table
from report.writers.words import words

UNIT = " tokens"


@words("length_breakdown")
def breakdown(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    if f.get("too_few"):
        return "Too few tasks with a known document length to split them by length."
    ranges = [value_range(lo, hi, UNIT) for lo, hi in f["bins"]]
    if short or not style.markdown:
        return f"{c.metric} by document length ({' / '.join(ranges)}): " + "; ".join(
            f"{run} " + " / ".join(number(mean) for mean, _ in cells)
            for run, cells in f["cells"].items())
    intro = ((f"On {style.code(f['dataset'])}: " if f["dataset"] else "") + "Tasks by thirds of "
             "their documents' length in tokens (≈4 characters a token): " + " / ".join(
                 map(str, f["sizes"])) + " tasks; each cell: the mean over the run's answered tasks "
             "in that bin (n).\n\n" if f["first"] else "")
    return intro + style.strong(style.code(c.metric or "")) + table(
        style, short, ["run", *ranges],
        [[run, *(f"{number(mean) if mean is not None else UNKNOWN} (n={n})" for mean, n in cells)]
         for run, cells in f["cells"].items()])


@words("length_value")
def length_value(c: Claim, style: Style, short: bool) -> str:
    f, (r, w), key = c.figures, c.runs, style.code(c.metric or "")
    docs = f"{f['end']} documents ({value_range(f['range'][0], f['range'][1], UNIT)})"
    lead = (f"On {style.code(f['dataset'])}, by" if f.get("dataset") else "By") + " document length:"
    lead = style.strong(lead) + " " if f["end"] == "short" else ""
    if f["outcome"] == "only_option":
        return (f"{lead}Retrieval is the only option for {docs}: {w} skipped all {f['skipped']} "
                f"(over its context limit), so {r} answers where {w} cannot.")
    if f["outcome"] == "none_scored":
        return f"{lead}For {docs}, no task of this length was scored by both."
    numbers = (f"{key} {r} {number(f['mine'])} vs {w} {number(f['theirs'])} on {c.n_tasks} tasks"
               + (f", difference {signed(c.difference)} [95% CI {interval(c.ci, sign=True)[1:]}"
                  if c.ci else ""))
    said = {"same": f"Retrieval does not clearly add value for {docs} on {key}: {numbers}; the "
                    "two score the same",
            "unclear": f"Retrieval does not clearly add value for {docs} on {key}: {numbers}; "
                       f"{f['ahead']} is ahead, but the CI includes 0: {c.n_tasks} tasks cannot "
                       "tell the two apart",
            "adds": f"Retrieval adds value for {docs} on {key}: {numbers}, because {r}'s chosen "
                    "chunks beat reading the whole document on the same tasks",
            "not": f"Retrieval does not add value for {docs} on {key}: {numbers}, because {w}, "
                   "reading the whole document, scores better on the same tasks than the chunks "
                   "retrieval picks"}[f["outcome"]]
    also = (f"; {w} also skipped {f['skipped']} of {f['of']} (over its context limit)"
            if f["skipped"] else "")
    # the small-n rule holds for every sentence that generalises (docs/verdict.md)
    small = (f" (small n: {c.n_tasks} tasks are too few to say this of {docs} in general)"
             if f["small"] else "")
    return lead + said + also + small + "."
