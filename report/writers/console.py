"""The sweep's verdict in the terminal, rendered from the report's model.

``report.console=summary`` (the default) fits a screen: at most ``MAX_LINES`` lines of at
most ``WIDTH`` characters from the answer to the report's address: the answer, the caveats
grouped by kind across runs, the headline table, the most important findings, and where to
look. ``report.console=full`` prints everything the report's key finding and analyses say."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from report.model import Claim, Note
from report.writers.cells import PLAIN, text_table
from report.writers.markdown import FAMILY_KINDS, HEADLINE_COLUMNS, headline_cells, key_finding
from report.writers.words import grouped, say

WIDTH = 120
MAX_LINES = 30
MOST_FINDINGS = 5


def important(claims: Sequence[Claim], answered: Sequence[Claim]) -> list[Claim]:
    """The key claims not already stated by the answer, most authoritative and decisive
    first."""
    shown = {id(c) for c in answered}
    keyed = [c for c in claims if c.key and id(c) not in shown and c.kind != "plot"]
    # a claim that measured nothing (an interaction that could not be tested) is not one
    measured = [c for c in keyed if not (c.p is None and c.difference is None and c.kind in
                                         ("interaction", "untestable"))]
    return sorted(measured, key=lambda c: (-int(c.decisive), -int(c.authority)))


def _wrap(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent or "  ",
                         break_long_words=True, break_on_hyphens=False) or [""]


def _split_address(line: str) -> list[str]:
    """An address line that is too wide breaks before its URL (never cut: it must work)."""
    if len(line) <= WIDTH or ", then " not in line:
        return [line]
    head, url = line.split(", then ", 1)
    return [f"{head}, then", f"         {url}"]


def headline_lines(headline: Sequence[dict[str, Any]], key: str) -> list[str]:
    """The headline table as the terminal shows it: every writer's columns and cells."""
    return text_table(HEADLINE_COLUMNS(key), [headline_cells(r, key) for r in headline])


def summary(answer: str, notes: Sequence[Note], headline: Sequence[dict[str, Any]], key: str,
            claims: Sequence[Claim], answered: Sequence[Claim], extra: Sequence[str],
            addresses: Sequence[str]) -> list[str]:
    """The verdict in at most ``MAX_LINES`` lines of at most ``WIDTH`` characters."""
    head = _wrap(answer)
    table = [line[:WIDTH] for line in headline_lines(headline, key)]
    tail = ["", *(part for a in addresses for part in _split_address(a))]
    budget = MAX_LINES - len(head) - 1 - len(table) - 1 - len(tail)
    caveats = [f"! {say(n, PLAIN, short=True)}" for n in grouped(notes)]
    found = [f"- {say(c, PLAIN, short=True)}" for c in important(claims, answered)]
    lines_extra = [e for e in extra if e]
    body: list[str] = []
    for group, limit in ((caveats, max(2, budget // 2)), (lines_extra, 3),
                         (found, MOST_FINDINGS)):
        for item in group[:limit]:
            wrapped = _wrap(item)[:2]
            if len(wrapped) == 2 and len(_wrap(item)) > 2:
                wrapped[1] = wrapped[1][:WIDTH - 1] + "…"
            if len(body) + len(wrapped) > budget - 1:
                break
            body += wrapped
        if len(group) > limit or len(body) >= budget - 1:
            left = len(group) - limit
            if left > 0 and len(body) < budget:
                body.append(f"  ({left} more in report.html)")
        if group and len(body) < budget:
            body.append("")
    body = body[:budget]
    while body and body[-1] == "":
        body.pop()
    return [*head, "", *body, *([""] if body else []), *table, *tail][:MAX_LINES]


def full(answer: str, notes: Sequence[Note], headline: Sequence[dict[str, Any]], key: str,
         keys: Sequence[str], claims: Sequence[Claim], extra: Sequence[str],
         addresses: Sequence[str]) -> list[str]:
    """Everything: the answer, every caveat, the table, the key finding and every claim,
    each paragraph wrapped to ``WIDTH`` (the table and the addresses are never cut)."""
    prose = [answer, "", *(f"! {say(n, PLAIN)}" for n in grouped(notes))]
    finding = key_finding(claims, keys, headline, PLAIN).strip().splitlines()
    more = [*(f"- {say(c, PLAIN)}" for c in claims if c.kind not in FAMILY_KINDS | {"plot"}),
            "", *(e for e in extra if e)]
    return [*_paragraphs(prose), "", *headline_lines(headline, key), "",
            *_paragraphs([*finding, "", *more]), "",
            *(part for a in addresses for part in _split_address(a))]


def _paragraphs(lines: Sequence[str]) -> list[str]:
    """Each line wrapped to ``WIDTH``, a list item's continuation under its text."""
    return [part for line in lines for part in
            (_wrap(line, "  " if line[:2] in ("- ", "! ") else "") if line.strip() else [""])]
