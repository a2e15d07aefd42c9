"""Section coverage: which sections of its documents a retrieving system drew on.

A document's sections come from ``arag.datasets.sections`` (an earnings call's prepared
remarks and Q&A, a filing's Item headings). Per answered task of a system that retrieves:

* ``section_coverage``: the share of the task's documents' sections that at least one
  chunk the system used (``retrieved_chunk_ids``) overlaps;
* ``sections_touched``: every section, in document order, with whether it was touched
  (the comparison page draws it as a strip).

Null with the reason for systems that read whole documents or none, and for tasks whose
documents have no sections detected.
"""

from __future__ import annotations

from typing import Any

from metrics.base import Metric, Scorer, Scores, ScoringItem, answered, register_scorer
from metrics.ranking import CHUNK_ID

NO_SECTIONS = ("no sections detected in the task's documents (earnings calls split at the "
               "hand-over to questions, 10-K/10-Q filings at their Item headings)")


def _span(item: ScoringItem, chunk_id: str) -> tuple[str, int, int] | None:
    chunk = item.chunks.get(chunk_id)
    if chunk is not None:
        return chunk.doc_id, chunk.line_start, chunk.line_end
    m = CHUNK_ID.fullmatch(chunk_id)
    return (m["doc"], int(m["first"]), int(m["last"])) if m else None


def touched_sections(item: ScoringItem) -> list[dict[str, Any]]:
    """Every section of the task's documents, with whether a used chunk overlaps it."""
    spans = [s for s in (_span(item, c) for c in item.prediction.retrieved_chunk_ids) if s]
    return [{"doc_id": doc_id, "section": sec.name, "first_line": sec.first,
             "last_line": sec.last,
             "touched": any(d == doc_id and sec.overlaps(a, b) for d, a, b in spans)}
            for doc_id, sections in item.sections.items() for sec in sections]


@register_scorer("section_coverage")
class SectionCoverageScorer(Scorer):
    metrics = [Metric("section_coverage", "sections touched", report=True)]

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        return [self._one(item) for item in items]

    def _one(self, item: ScoringItem) -> Scores:
        s = Scores()
        why = answered(item)
        if why is None and not item.retrieves:
            why = ("this system does not retrieve (it reads whole documents, the gold, or "
                   "nothing)")
        if why is None and not any(item.sections.values()):
            why = NO_SECTIONS
        if why is not None:
            s.null(["section_coverage"], why)
            s.values["sections_touched"] = None
            return s
        sections = touched_sections(item)
        s.values["sections_touched"] = sections
        s.values["section_coverage"] = sum(x["touched"] for x in sections) / len(sections)
        return s
