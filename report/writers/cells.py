"""One formatter for every number a writer shows, and one spelling of unknown.

A value is kept apart from how it is shown: the model holds numbers (or None), and every
writer (report.md/html, the console, the MLflow description, compare.html) turns them into
text here, so the same figure reads the same everywhere."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

UNKNOWN = "unknown"  # a figure the records cannot support: never 0, never a dash


@dataclass(frozen=True)
class Style:
    """Emphasis for the medium: Markdown (report.md/html, the MLflow description) or plain
    text (the console)."""

    markdown: bool = True

    def strong(self, text: str) -> str:
        return f"**{text}**" if self.markdown else text

    def code(self, text: str) -> str:
        return f"`{text}`" if self.markdown else text


MARKDOWN, PLAIN = Style(True), Style(False)


def number(value: Any, digits: int = 3, missing: str = UNKNOWN) -> str:
    """A score or any measured figure: ``digits`` decimals; None or NaN: ``missing``."""
    if value is None or isinstance(value, float) and not math.isfinite(value):
        return missing
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def count(value: Any, missing: str = UNKNOWN) -> str:
    """A count (tokens, tasks, documents) rounded to a whole number: 1,892."""
    if value is None or isinstance(value, float) and not math.isfinite(value):
        return missing
    return f"{round(float(value)):,}"


def lacking(missing: Any, total: Any) -> str:
    """Why a figure is unknown: how many of the records lack it."""
    return f"{count(missing)} of {count(total)} records lack it"


def money(value: Any, digits: int = 5, missing: str = UNKNOWN) -> str:
    return missing if value is None else f"${value:,.{digits}f}"


def ms(value: Any, missing: str = UNKNOWN) -> str:
    return missing if value is None else f"{value:,.0f} ms"


def signed(value: Any, digits: int = 3) -> str:
    return UNKNOWN if value is None else f"{value:+.{digits}f}"


def interval(ci: Sequence[float] | None, digits: int = 3, sign: bool = False) -> str:
    if not ci:
        return UNKNOWN
    f = (lambda v: f"{v:+.{digits}f}") if sign else (lambda v: f"{v:.{digits}f}")
    return f"[{f(ci[0])}, {f(ci[1])}]"


def p_value(p: Any, floor: float | None = None) -> str:
    """A p-value; one at a permutation test's floor (1/(B+1)) reads "≤ floor"."""
    if p is None:
        return UNKNOWN
    if floor is not None and p <= floor:
        return f"≤ {floor:.2g}"
    return f"{p:.3g}"


def share(value: Any) -> str:
    return UNKNOWN if value is None else f"{value:.0%}"


def short_count(value: float) -> str:
    """A feature value in few characters: 950, 2.6k, 1.2M."""
    for size, unit in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}".rstrip("0").rstrip(".") + unit
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"


def value_range(lo: float | None, hi: float | None, unit: str = "") -> str:
    """A bin of a numeric feature as a range: "2.6k–4.5k tokens", "below 2.6k tokens"."""
    if lo is None and hi is None:
        return f"all{unit}"
    if lo is None:
        return f"below {short_count(hi or 0)}{unit}"
    if hi is None:
        return f"{short_count(lo)}{unit} and above"
    if short_count(lo) == short_count(hi):  # edges that round alike: say them whole
        return f"{count(lo)}–{count(hi)}{unit}"
    return f"{short_count(lo)}–{short_count(hi)}{unit}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table; every cell through ``cell``."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def cell(value: Any) -> str:
    """A table cell: numbers by ``number``, text with its pipes escaped, None unknown."""
    if value is None:
        return UNKNOWN
    if isinstance(value, float):
        return number(value, 3) if abs(value) >= 1e-3 or value == 0 else f"{value:.3g}"
    return str(value).replace("|", "\\|")


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A fixed-width table for the terminal: the first column left, the rest right."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                      for i, (c, w) in enumerate(zip(row, widths, strict=True)))
            for row in [list(header), *rows]]
