"""Until the writers render claims and notes themselves: the kinds that have words here
(``attribution_words``, ``corrected_words``) as pre-rendered findings, so report.md/html,
the console, the MLflow description and ``findings.jsonl`` keep showing them."""

from __future__ import annotations

from collections.abc import Sequence

from report.findings import Finding, Table
from report.model import Claim, Note
from report.writers import attribution_words, corrected_words

WORDS = {**attribution_words.WORDS, **corrected_words.WORDS}
TABLES = corrected_words.TABLES


def as_findings(claims: Sequence[Claim], notes: Sequence[Note]) -> list[Finding]:
    """The claims and notes of a kind with words here, in order (claims, then notes)."""
    out = []
    for claim in claims:
        if claim.kind in WORDS:
            table = TABLES[claim.kind](claim) if claim.kind in TABLES else claim.table
            out.append(Finding(claim.kind, claim.section, WORDS[claim.kind](claim),
                               claim.record()["figures"] | _fields(claim), key=claim.key,
                               table=None if table is None else
                               Table(list(table.header), [list(r) for r in table.rows])))
    out += [Finding(note.kind, note.section, WORDS[note.kind](note),
                    {"runs": list(note.runs), **note.counts}, key=False, caveat=note.key)
            for note in notes if note.kind in WORDS]
    return out


def _fields(claim: Claim) -> dict[str, object]:
    record = claim.record()
    return {k: record[k] for k in ("runs", "metric", "difference", "ci", "p", "n_tasks",
                                   "rule", "decisive") if record[k] not in (None, "", [])}
