"""Inline citations of chunks: ``[c:<chunk id>]`` after the claim they back.

A summary written from chunks may cite them: ``q3 revenue rose 8% to $452 million
[c:ACME_q3_2024#L12-18].`` One marker may name several chunks (``[c:A#L1-4, c:B#L9-12]``
or ``[c:A#L1-4; B#L9-12]``) and a claim may carry several markers.

A *claim* is a line of the summary (a bullet: ``-``, ``*``, ``•`` or ``1.`` in front is
dropped) or, within a line of prose, a sentence. A marker belongs to the claim it stands
in or right after: ``Revenue rose 12%. [c:X] Margins fell [c:Y].`` is two claims, backed
by X and by Y.

``strip_citations`` removes every marker (and the space before it), so scorers see the
summary as a reader would, and numbers inside chunk ids (``#L12-18``) never count as facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MARKER = re.compile(r"\s*\[c:\s*([^\]]*?)\s*\]")
_ID_SEPARATOR = re.compile(r"\s*[,;]\s*(?:c:\s*)?")
_BULLET = re.compile(r"^\s*(?:[-*•●▪]|\d{1,2}[.)])\s+")
# a sentence ends at . ! ? before a capital, digit, $ or quote; or after a marker that
# follows one ("12%. [c:X] Margins")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9$\"'(])|(?<=\])\s+(?=[A-Z0-9$\"'(])")


@dataclass(frozen=True)
class Claim:
    """One bullet or sentence of a summary, without markers, and the chunks it cites."""

    text: str
    chunk_ids: tuple[str, ...]


def cite(chunk_ids: list[str] | tuple[str, ...]) -> str:
    """The marker citing these chunks: ``[c:A]`` or ``[c:A, c:B]``."""
    return "[" + ", ".join(f"c:{cid}" for cid in chunk_ids) + "]"


def cited_ids(text: str) -> list[str]:
    """Every chunk id the markers in ``text`` name, in order, each once."""
    ids = [cid for m in MARKER.finditer(text) for cid in _ID_SEPARATOR.split(m.group(1)) if cid]
    return list(dict.fromkeys(ids))


def strip_citations(text: str | None) -> str | None:
    """The text without citation markers (None stays None)."""
    if text is None or "[c:" not in text:
        return text
    lines = [(line, MARKER.sub("", line).rstrip()) for line in text.split("\n")]
    # a line that held only markers goes; blank lines the writer put there stay
    return "\n".join(clean for line, clean in lines if clean or not line.strip())


def claims(text: str | None) -> list[Claim]:
    """The summary's claims in order (empty lines and marker-only pieces are none)."""
    out: list[Claim] = []
    for line in (text or "").splitlines():
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        for piece in _SENTENCE_END.split(line):
            clean = (strip_citations(piece) or "").strip()
            ids = tuple(cited_ids(piece))
            if clean:
                out.append(Claim(clean, ids))
            elif ids and out:  # a marker on its own after a claim backs that claim
                out[-1] = Claim(out[-1].text, tuple(dict.fromkeys(out[-1].chunk_ids + ids)))
    return out
