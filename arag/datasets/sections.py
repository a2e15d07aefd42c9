"""The sections of a document, so a report can show which parts of it a system touched.

Detected from the text, by the kind of document:

* an earnings call (``EARNINGS_CALL``: ECTSum, the sample) splits into **prepared
  remarks** and **Q&A** at the hand-over to questions: the first line, past the opening
  fifth of the call, where a speaker or the operator opens the line for questions ("we
  will now begin the question-and-answer session", "Operator, who do we have for our first
  question?", "we'd be happy to take any questions"; not "before we move to Q&A, ..." or
  "and then we'll go to Q&A", which more remarks follow), when at least ``MIN_QA_LINES``
  lines follow it. ECTSum's transcripts keep the prepared remarks only (they end at the
  hand-over), so most of them are not split;
* a 10-K or 10-Q (FinanceBench) splits at its ``Item`` headings ("Item 1A. Risk Factors",
  "Item 7. Management's Discussion ..."): a heading is a line that starts with one; the
  last line starting with an item's number is its heading (the table of contents lists the
  items first), and lines before the first heading are the front matter.

A document of another kind, or one without a hand-over or headings, has no sections (the
section metrics are then null with the reason): one "section" covering it all would make
every system score 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from arag.records import Document

HAND_OVER = re.compile(
    r"question[- ]and[- ]answer (?:session|portion|period)"
    r"|\bfirst question\b"
    r"|\b(?:open|take|go to|move to|turn to|entertain|begin|start)\b[^.?!]{0,50}"
    r"\b(?:questions|q&a|q and a)\b"
    r"|\boperator\b[^.?!]{0,60}\bquestions?\b",
    re.IGNORECASE)
OPENING_SHARE = 0.2  # "we will take questions after the remarks" in the opening is no hand-over
MIN_QA_LINES = 5  # a transcript that ends at its hand-over has no Q&A to split off
# "Before we move to Q&A, let me ...", "... and then we'll go to Q&A": more remarks follow
NOT_YET = re.compile(r"\b(?:before|then|after)\b", re.IGNORECASE)
ITEM = re.compile(r"^\s*item\s+(\d{1,2}[a-c]?)\b[\s.:\-–—]*([^.]{0,80})", re.IGNORECASE)
FILINGS = ("10K", "10Q")


@dataclass(frozen=True)
class Section:
    name: str
    first: int  # 1-based line, inclusive
    last: int  # 1-based line, inclusive

    def overlaps(self, first: int, last: int) -> bool:
        return first <= self.last and last >= self.first


def document_sections(doc: Document) -> tuple[Section, ...]:
    """The document's sections in order (empty: it is not split; see the module doc)."""
    if doc.doc_type == "EARNINGS_CALL":
        return call_sections(doc.lines)
    if doc.doc_type in FILINGS:
        return filing_sections(doc.lines)
    return ()


def call_sections(lines: tuple[str, ...]) -> tuple[Section, ...]:
    start = int(len(lines) * OPENING_SHARE)
    hand_over = next((n for n, line in enumerate(lines[start:], start=start + 1)
                      if _may_hand_over(line) and HAND_OVER.search(line)
                      and not NOT_YET.search(line)), None)
    if hand_over is None or len(lines) - hand_over < MIN_QA_LINES:
        return ()
    return (Section("Prepared remarks", 1, hand_over), Section("Q&A", hand_over + 1, len(lines)))


def _may_hand_over(line: str) -> bool:
    """Whether ``HAND_OVER`` can match the line: each of its forms says "question", "q&a"
    or "q and a" (case folded as the pattern's IGNORECASE does). Most lines say none, and
    the pattern's bounded gaps make a search some hundred times slower than this test."""
    folded = line.casefold()
    return "question" in folded or "q&a" in folded or "q and a" in folded


def filing_sections(lines: tuple[str, ...]) -> tuple[Section, ...]:
    headings: dict[str, tuple[int, str]] = {}
    for n, line in enumerate(lines, start=1):
        m = ITEM.match(line)
        if m:
            title = m.group(2).strip(" .:-–—")
            headings[m.group(1).upper()] = (n, f"Item {m.group(1).upper()}"
                                            + (f" {title}" if title else ""))
    starts = sorted(headings.values())
    if not starts:
        return ()
    out = [Section("Front matter", 1, starts[0][0] - 1)] if starts[0][0] > 1 else []
    for (first, name), nxt in zip(starts, [*starts[1:], (len(lines) + 1, "")], strict=True):
        out.append(Section(name, first, nxt[0] - 1))
    return tuple(out)
