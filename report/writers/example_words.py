"""Words for the examples chosen from the numbers (``report/analyses/examples.py``), with
text from a dataset or a model quoted so that it can never become Markdown of its own."""

from __future__ import annotations

import re
from typing import Any

from report.model import Claim
from report.writers.cells import Style, number
from report.writers.words import words


def _longest_run(text: str, char: str) -> int:
    return max((len(m) for m in re.findall(f"{re.escape(char)}+", text)), default=0)


def fenced(text: Any) -> str:
    """A fenced block no text can close: its fence is longer than any backtick run inside."""
    body = str(text)
    fence = "`" * max(3, _longest_run(body, "`") + 1)
    return f"{fence}\n{body}\n{fence}"


def code(text: Any) -> str:
    """An inline code span no text can end early, on one line (a newline could start a block)."""
    body = " ".join(str(text).split())
    ticks = "`" * (_longest_run(body, "`") + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


@words("example")
def example(c: Claim, style: Style, short: bool) -> str:
    f, key = c.figures, c.metric or ""
    if f["kind"] == "none":
        return "Not enough scored common tasks to choose examples."
    scores = ", ".join(f"{run} {number(s)}" for run, s in f["scores"].items())
    title, note = {
        "agent_wins": (f"{c.runs[0]} beats every other run",
                       f"{style.code(key)}: {scores} (margin {number(f['margin'])})."),
        "closed_wins": (f"{c.runs[0]}, without retrieval, wins", f"{style.code(key)}: {scores}."),
        "failure": ("A failure", f"Worst {style.code(key)} on the common tasks: "
                                 f"{number(f['scores'].get(c.runs[0]))}.")}[f["kind"]]
    if f.get("dataset"):
        title += f" ({f['dataset']})"
    if short or not style.markdown:
        return f"{title}: {f['task']}. {note}"
    if f.get("reasoning"):
        note += "\n\nJudge's reasoning:\n\n> " + "\n> ".join(str(f["reasoning"]).splitlines())
    reference = (f"\n\n{fenced(f['reference'])}" if f.get("reference") else
                 f"none: {f.get('no_reference') or 'the task has none'}")
    return (f"### {title}: {code(f['task'])}\n\n{note}\n\n**Question:** {code(f.get('question'))}"
            f"\n\n**Reference:** {reference}\n\n**Predicted ({f.get('system')}):**\n\n"
            f"{fenced(f.get('predicted'))}")
