"""Structured findings: what an analysis found, once, for every writer to render.

An analysis of a sweep (slices by document feature, attribution of missed facts, the
sequential stop, the judge corrected by people's labels, ...) returns an ``Analysis``: its
``Finding``s (what was compared, on which tasks, the figures, how sure), the rows it logs as
JSON-lines artifacts on the parent run, parent metrics, and the plots it draws. The writers
render findings the same way everywhere: report.md and report.html (``markdown``), the
console (``console_lines``) and the parent run's MLflow description (``description``). A new
analysis is a function registered in ``report/analyses.py`` and needs no new sentence
builder in ``report/verdict.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Row = dict[str, Any]


@dataclass(frozen=True)
class Table:
    """A small table a finding shows under its sentence (report.md/html only)."""

    header: list[str]
    rows: list[list[Any]]


@dataclass(frozen=True)
class Finding:
    """One thing an analysis found.

    ``text`` is one Markdown sentence or short paragraph that claims only what ``figures``
    show; ``figures`` holds every number it states, so each is traceable (they are also
    written, with ``kind`` and ``section``, to the parent's ``findings.jsonl``)."""

    kind: str  # what sort of analysis found it: "slice", "interaction", "attribution", ...
    section: str  # the report section it belongs in ("Where each system wins", ...)
    text: str  # Markdown: what it found, in words as strong as its numbers
    figures: Mapping[str, Any] = field(default_factory=dict)
    key: bool = False  # part of the key finding: console and MLflow description too
    caveat: bool = False  # a limit on what the report may claim: said with the caveats
    table: Table | None = None

    def record(self) -> Row:
        """The finding as a row of ``findings.jsonl``."""
        return {"kind": self.kind, "section": self.section, "text": self.text,
                "key": self.key, "caveat": self.caveat, "figures": dict(self.figures)}


Plot = Callable[[Path], "Path | None"]  # draws into a folder; the file made, or None


from report.model import Analysis  # noqa: E402,F401 - re-exported


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-3 and value != 0 else f"{value:.3f}"
    return str(value).replace("|", "\\|")


def _table(t: Table) -> str:
    lines = ["| " + " | ".join(t.header) + " |", "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    return "\n".join(lines)


def markdown(findings: Sequence[Finding]) -> str:
    """The findings as report sections, in the order the analyses gave them: one heading
    per section, each finding's sentence, then its table."""
    sections: dict[str, list[Finding]] = {}
    for f in findings:
        sections.setdefault(f.section, []).append(f)
    out: list[str] = []
    for title, group in sections.items():
        out.append(f"\n## {title}\n")
        for f in group:
            out.append(f.text.strip() + "\n")
            if f.table is not None and f.table.rows:
                out.append(_table(f.table) + "\n")
    return "\n".join(out)


_CODE_SPAN = re.compile(r"(`+[^`]*`+)")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def inert(markdown_text: str) -> str:
    """Markdown in which no text from the data (a run label, a labeller's name, an answer)
    can become HTML: outside code spans (which show ``<`` as it is) every ``<`` that could
    open a tag or comment is written ``&lt;``; a ``<`` before a space or a digit (p < 0.05)
    is left as it reads."""
    parts = _CODE_SPAN.split(markdown_text)
    return "".join(part if k % 2 else _TAG_START.sub("&lt;", part)
                   for k, part in enumerate(parts))


def console_lines(findings: Sequence[Finding]) -> list[str]:
    """The key findings and caveats as terminal lines (no Markdown marks)."""
    return [re.sub(r"\*\*|`", "", f.text.strip()) for f in findings if f.key or f.caveat]


def description(findings: Sequence[Finding]) -> str:
    """The key findings and caveats for the parent run's MLflow description."""
    return "\n\n".join(f.text.strip() for f in findings if f.key or f.caveat)
