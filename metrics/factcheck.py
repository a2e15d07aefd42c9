"""A faithfulness check with no LLM: what a summary states must be found in its source.

Four kinds of checkable statement are taken from the summary, each supported or not by the
source the system used (``System.judged_context``):

* ``figure``: every number, normalised and matched as ``metrics.numeric`` does ("$1.2
  billion" = "1,200 million"; years and quarter labels are not facts);
* ``entity``: every name (a capitalised word not opening a sentence, a word with inner
  capitals or dots such as ``BestInsuranceXYZ`` or ``U.K.``) and every period phrase
  ("second quarter", "first half", "year-ago"), found word for word, case ignored;
* ``direction``: every direction word in a sentence that states a figure (rose/fell,
  increase/decrease, up/down, higher/lower, above/below, beat/missed, raised/lowered,
  including/excluding, earnings/losses, beginning/end): the source must use a word of the
  same direction (any inflection or synonym of the list) in a sentence that has one of the
  summary sentence's figures, or anywhere when the figure is not in the source;
* ``negation``: a negation (not, no, never, n't, without) must negate the same next word in
  the source, within three words.

``factcheck`` = supported statements / all statements (1.0: nothing unsupported; the
decision "consistent" is ``factcheck == 1``). The unsupported statements are kept
(``factcheck_unsupported``). A summary with nothing checkable is null with that reason, as
is one without a recorded context. Rules and lists were chosen on SummEdits' ectsum
evaluation split and its sales_call and news domains (bench/factcheck.py, bench/README.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from metrics.base import NO_CONTEXT, Metric, PerTaskScorer, Scores, ScoringItem, register_scorer
from metrics.numeric import SOURCES_KEPT, Quantity, quantities, source_quantities

# direction axis -> (up words, down words); a word is matched by its stem (prefix)
DIRECTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "change": (("increas", "rose", "rise", "rising", "raise", "raising", "grew", "grow",
                "gain", "up", "higher", "improv", "expand", "boost", "climb", "jump",
                "augment", "escalat", "enhanc", "strengthen", "accelerat", "surg"),
               ("decreas", "fell", "fall", "declin", "lower", "down", "reduc", "cut",
                "drop", "shrink", "shrank", "weak", "slow", "decelerat", "contract")),
    "target": (("beat", "exceed", "outperform", "above", "over"),
               ("miss", "below", "under", "short of", "underperform")),
    "scope": (("includ",), ("exclud",)),
    "result": (("earning", "profit", "income", "gain"), ("loss", "deficit")),
    "when": (("beginning", "start"), ("end",)),
}
# axes whose word must be found beside the figure it qualifies; the others anywhere in the
# source ("including a buyback" is rarely in the sentence that has the dividend's figure)
TIED = ("change", "target")
PERIOD = re.compile(r"\b(?:first|second|third|fourth|1st|2nd|3rd|4th)\s+(?:quarter|half)\b|"
                    r"\byear[- ](?:ago|earlier|over[- ]year)\b|\b(?:Q[1-4]|H[12]|FY\s?\d{2,4})\b",
                    re.IGNORECASE)
CLAUSE = re.compile(r",|;|\s(?:but|while|whereas)\s")
NEGATION = re.compile(r"\b(?:not|no|never|without)\b|n't\b", re.IGNORECASE)
WORD = re.compile(r"[A-Za-z][A-Za-z.&'-]*[A-Za-z]|[A-Za-z]")
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])|\n+")
ENTITY = re.compile(r"\b[A-Z][a-z]*[A-Z][A-Za-z]*\b|\b(?:[A-Z]\.){2,}|\b[A-Z][a-z]+\b")
SKIP_WORDS = {"the", "a", "an", "to", "be", "is", "was", "were", "are", "been", "do", "does",
              "did", "have", "has", "had", "any", "its", "their", "it", "he", "she", "they"}


@dataclass(frozen=True)
class Statement:
    kind: str  # figure | entity | direction | negation
    text: str
    supported: bool


def sentences(text: str) -> list[str]:
    return [s for s in SENTENCE.split(text) if s.strip()]


@dataclass(frozen=True)
class Source:
    """What the checks look up in a source, computed once per source text: a sweep checks
    each system's summary of a task against the same document (``source_index``)."""

    quantities: tuple[Quantity, ...]
    lowered: str  # case and whitespace folded, for names
    lowered_unhyphenated: str  # and hyphens as spaces, for period phrases
    sentence_quantities: tuple[tuple[Quantity, ...], ...]
    sentence_directions: tuple[frozenset[tuple[str, int]], ...]
    directions: frozenset[tuple[str, int]]  # of every sentence
    negated: frozenset[str]


@lru_cache(maxsize=SOURCES_KEPT)
def source_index(source: str) -> Source:
    parts = sentences(source)
    lowered = " ".join(source.lower().split())
    each = tuple(frozenset(_directions(s)) for s in parts)
    return Source(quantities=source_quantities(source), lowered=lowered,
                  lowered_unhyphenated=lowered.replace("-", " "),
                  sentence_quantities=tuple(tuple(quantities(s)) for s in parts),
                  sentence_directions=each, directions=frozenset().union(*each),
                  negated=frozenset(_negated(source)))


def figure_statements(summary: str, source: str) -> list[Statement]:
    found = source_index(source).quantities
    return [Statement("figure", f"{q.value:g} ({q.kind})", any(q.matches(h) for h in found))
            for q in quantities(summary)]


def entity_statements(summary: str, source: str) -> list[Statement]:
    index = source_index(source)
    out = []
    for sentence in sentences(summary):
        first = WORD.search(sentence)
        for m in ENTITY.finditer(sentence):
            if first is not None and m.start() == first.start() and m.group().isalpha() \
                    and m.group()[1:].islower():
                continue  # an ordinary word opening the sentence
            out.append(Statement("entity", m.group(), _has_word(index.lowered,
                                                                 m.group().lower())))
        for m in PERIOD.finditer(sentence):
            phrase = " ".join(m.group().lower().replace("-", " ").split())
            out.append(Statement("entity", m.group(),
                                 _has_word(index.lowered_unhyphenated, phrase)))
    return out


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])", text) is not None


@lru_cache(maxsize=65536)  # a transcript's words repeat: each is looked up once
def direction_of(word: str) -> tuple[str, int] | None:
    """(axis, +1 up / -1 down) of a direction word, or None."""
    w = word.lower()
    for axis, (ups, downs) in DIRECTIONS.items():
        for sign, stems in ((1, ups), (-1, downs)):
            if any(w == s or (len(s) > 3 and w.startswith(s)) for s in stems):
                return axis, sign
    return None


def _directions(sentence: str) -> set[tuple[str, int]]:
    words = [w.lower() for w in WORD.findall(sentence)]
    out = {d for w in words if (d := direction_of(w)) is not None}
    if "short of" in sentence.lower():
        out.add(("target", -1))
    return out


def direction_statements(summary: str, source: str) -> list[Statement]:
    index = source_index(source)
    everywhere = index.directions
    out = []
    for sentence in (c for s in sentences(summary) for c in CLAUSE.split(s)):
        figures = quantities(sentence)
        near = [d for d, found in zip(index.sentence_directions, index.sentence_quantities,
                                      strict=True)
                if any(f.matches(q) for f in figures for q in found)]
        pool = frozenset().union(*near) if near else everywhere
        for axis, sign in sorted(_directions(sentence)):
            word = "up" if sign > 0 else "down"
            found = pool if axis in TIED else everywhere
            out.append(Statement("direction", f"{axis} {word}", (axis, sign) in found))
    return out


def _negated(text: str) -> set[str]:
    """The content word each negation in ``text`` negates (the next non-auxiliary word)."""
    out = set()
    for m in NEGATION.finditer(text):
        following = WORD.findall(text[m.end():m.end() + 60])
        words = [w.lower() for w in following[:4] if w.lower() not in SKIP_WORDS]
        if words:
            out.add(words[0])
    return out


def negation_statements(summary: str, source: str) -> list[Statement]:
    negated_in_source = source_index(source).negated
    return [Statement("negation", f"not {word}", word in negated_in_source)
            for word in sorted(_negated(summary))]


CHECKS = {"figure": figure_statements, "entity": entity_statements,
          "direction": direction_statements, "negation": negation_statements}


def statements(summary: str, source: str, kinds: tuple[str, ...] = tuple(CHECKS)
               ) -> list[Statement]:
    return [s for kind in kinds for s in CHECKS[kind](summary, source)]


NOTHING = "the summary states no figure, name, period, direction or negation to check"


@register_scorer("factcheck")
class FactCheckScorer(PerTaskScorer):
    metrics = [Metric("factcheck", "fact check", report=True)]

    def score_one(self, item: ScoringItem) -> Scores:
        s = Scores()
        if item.context_text is None:
            s.null(["factcheck"], NO_CONTEXT)
            s.values["factcheck_unsupported"] = None
            return s
        found = statements(item.prediction.predicted or "", item.context_text)
        if not found:
            s.null(["factcheck"], NOTHING)
            s.values["factcheck_unsupported"] = []
            return s
        s.values["factcheck"] = sum(st.supported for st in found) / len(found)
        s.values["factcheck_unsupported"] = [f"{st.kind}: {st.text}" for st in found
                                             if not st.supported]
        return s
