"""A faithfulness check with no LLM: what a summary states must not contradict its source.

Five kinds of checkable statement are taken from the summary and checked against the source
the system used (``System.judged_context``). Each rule flags a contradiction, not a
rewording: a correct paraphrase uses words the source does not, so "the word is not in the
source" alone is never a finding (the earlier rules rejected 42% of correct summaries out of
sample, mostly paraphrases).

* ``figure``: every number, normalised and matched as ``metrics.numeric`` does ("$1.2
  billion" = "1,200 million"; years and quarter labels are not facts);
* ``entity``: every name (a capitalised word not opening a sentence, a word with inner
  capitals such as ``BestInsuranceXYZ``) and every period phrase ("second quarter", "first
  half", "year-ago"), found word for word, case ignored. Dotted abbreviations ("U.K.") are
  not checked: sources say "British" or "London";
* ``direction``: a direction word (rose/fell, beat/missed) in a summary clause is
  unsupported when the source sentences that state the clause's figures use only the
  opposite direction (a clause with no figure found in the source is not checked);
  earnings/losses against the whole source;
* ``negation``: a negation (not, no, never, n't, without) must negate the same next word in
  the source; and a word the source negates in the sentences closest to a summary sentence
  must not be stated there without one;
* ``antonym``: a word of a list of opposites ("wide"/"limited", "expensive"/"cheap") that
  the closest source sentences do not use, while they use its opposite.

``factcheck`` = supported statements / all statements (1.0: nothing unsupported; the
decision "consistent" is ``factcheck == 1``). The unsupported statements are kept
(``factcheck_unsupported``). A summary with nothing checkable is null with that reason, as
is one without a recorded context. Rules and lists were chosen on SummEdits' evaluation
splits of ectsum, sales_call and news only; the sales_call and news test splits are held
out (bench/factcheck.py, docs/validate-your-judge.md).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from arag.memory import kept_by_characters
from metrics.base import NO_CONTEXT, Metric, PerTaskScorer, Scores, ScoringItem, register_scorer
from metrics.numeric import Quantity, quantities, source_quantities
from metrics.opposites import OPPOSITES

# direction axis -> (up words, down words); a word is matched by its stem (prefix)
DIRECTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "change": (("increas", "rose", "rise", "rising", "raise", "raising", "grew", "grow",
                "gain", "up", "higher", "improv", "expand", "boost", "climb", "jump",
                "augment", "escalat", "enhanc", "strengthen", "accelerat", "surg"),
               ("decreas", "fell", "fall", "declin", "lower", "down", "reduc", "cut",
                "drop", "shrink", "shrank", "weak", "slow", "decelerat", "contract")),
    "target": (("beat", "exceed", "outperform", "above", "over"),
               ("miss", "below", "under", "short of", "underperform")),
    "result": (("earning", "profit", "income", "gain"), ("loss", "deficit")),
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
ENTITY = re.compile(r"\b[A-Z][a-z]*[A-Z][A-Za-z]*\b|\b[A-Z][a-z]+\b")
SKIP_WORDS = {"the", "a", "an", "to", "be", "is", "was", "were", "are", "been", "do", "does",
              "did", "have", "has", "had", "any", "its", "their", "it", "he", "she", "they"}


@dataclass(frozen=True)
class Statement:
    kind: str  # figure | entity | direction | negation
    text: str
    supported: bool


def sentences(text: str) -> list[str]:
    return [s for s in SENTENCE.split(text) if s.strip()]


def figure_statements(summary: str, source: str) -> list[Statement]:
    found = source_quantities(source)
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
            out.append(Statement("entity", m.group(),
                                 _has_word(index.lowered, m.group().lower())))
        for m in PERIOD.finditer(sentence):
            phrase = " ".join(m.group().lower().replace("-", " ").split())
            out.append(Statement("entity", m.group(), _has_word(index.unhyphenated, phrase)))
    return out


def _has_word(text: str, word: str) -> bool:
    """Whether ``word`` is in ``text`` with no letter a-z or digit either side (a search
    for it, not a pattern compiled for each word)."""
    if not word:
        return re.search(r"(?<![a-z0-9])(?![a-z0-9])", text) is not None
    at = text.find(word)
    while at != -1:
        end = at + len(word)
        if (at == 0 or text[at - 1] not in WORD_CHARS) and \
                (end == len(text) or text[end] not in WORD_CHARS):
            return True
        at = text.find(word, at + 1)
    return False


WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")  # what may not border a word


def _stem_pattern() -> tuple[re.Pattern[str], list[tuple[str, int]]]:
    """One pattern for every stem of ``DIRECTIONS`` in its order, a group each: a stem of
    four letters or more opens a word, a shorter one is the whole word. The first group that
    matches is the first stem that fits, as a loop over the stems would find it."""
    alternatives, directions = [], []
    for axis, (ups, downs) in DIRECTIONS.items():
        for sign, stems in ((1, ups), (-1, downs)):
            for stem in stems:
                whole = "" if len(stem) > 3 else r"\Z"
                alternatives.append(f"({re.escape(stem)}{whole})")
                directions.append((axis, sign))
    return re.compile("|".join(alternatives)), directions


STEMS, STEM_DIRECTIONS = _stem_pattern()


@lru_cache(maxsize=1 << 16)  # a source's words recur: checking a long document claim by claim
def direction_of(word: str) -> tuple[str, int] | None:
    """(axis, +1 up / -1 down) of a direction word, or None."""
    m = STEMS.match(word.lower())
    return STEM_DIRECTIONS[m.lastindex - 1] if m is not None and m.lastindex else None


@lru_cache(maxsize=1 << 14)  # the same source sentences, for each claim checked against them
def _directions(sentence: str) -> frozenset[tuple[str, int]]:
    return _directions_in(sentence, _words(sentence))


def _directions_in(sentence: str, words: list[str]) -> frozenset[tuple[str, int]]:
    """``_directions`` of a sentence whose words (``_words``) are known."""
    out = {d for w in words if (d := direction_of(w)) is not None}
    if "short of" in sentence.lower():
        out.add(("target", -1))
    return frozenset(out)


@dataclass(frozen=True)
class SourceIndex:
    """What the direction and negation checks read of a source, worked out once however many
    summaries (or an attribution's claims) are checked against it."""

    sentence_directions: tuple[frozenset[tuple[str, int]], ...]
    sentence_quantities: tuple[tuple[Quantity, ...], ...]
    everywhere: frozenset[tuple[str, int]]
    negated: frozenset[str]
    sentence_words: tuple[tuple[str, frozenset[str]], ...]  # each sentence, its words
    lowered: str  # the source in lower case, its white space single spaces
    unhyphenated: str  # the same, hyphens as spaces


CHARS_KEPT = 20_000_000  # characters of sources whose index is kept (~26 bytes each: ~0.5 GB)


def _kept(chars: int) -> Callable[[str], SourceIndex]:
    """``_index`` kept least recently used first, bounded by characters, not by count:
    ECTSum's val split is 249 documents of 4.3 M characters, and an annual report some
    600,000; a short text weighs little, so the references and claims checked between two
    documents do not push one out before the next scorer reads it."""
    return kept_by_characters(chars)(_index)


def _index(source: str) -> SourceIndex:
    found = sentences(source)
    words = [_words(s) for s in found]  # read once: for the directions and the closest
    directions = tuple(_directions_in(s, w) for s, w in zip(found, words, strict=True))
    lowered = " ".join(source.lower().split())
    return SourceIndex(directions, tuple(tuple(quantities(s)) for s in found),
                       frozenset().union(*directions), frozenset(_negated(source)),
                       tuple((s, frozenset(w)) for s, w in zip(found, words, strict=True)),
                       lowered, lowered.replace("-", " "))


source_index = _kept(CHARS_KEPT)  # the index of a source, built once while it is kept


def direction_statements(summary: str, source: str) -> list[Statement]:
    index = source_index(source)
    everywhere = index.everywhere
    out = []
    for sentence in (c for s in sentences(summary) for c in CLAUSE.split(s)):
        figures = quantities(sentence)
        near = [d for d, found in zip(index.sentence_directions, index.sentence_quantities,
                                      strict=True)
                if any(f.matches(q) for f in figures for q in found)]
        pool = frozenset().union(*near)
        for axis, sign in sorted(_directions(sentence)):
            word = "up" if sign > 0 else "down"
            if axis in TIED and not near:
                continue  # "an increase" with no figure of the source: nothing to tie it to
            found = pool if axis in TIED else everywhere
            contradicted = (axis, -sign) in found and (axis, sign) not in found
            out.append(Statement("direction", f"{axis} {word}", not contradicted))
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
    out = [Statement("negation", f"not {word}", word in negated_in_source)
           for word in sorted(_negated(summary))]
    for sentence in sentences(summary):
        stated = set(_words(sentence)) - _negated(sentence)
        for word in sorted(_negated(" ".join(closest_sentences(sentence, source))) & stated):
            out.append(Statement("negation", f"{word} (the source: not {word})", False))
    return out


def _words(text: str) -> list[str]:
    if text.isascii():  # lower case first finds the same words (not so for every letter:
        return WORD.findall(text.lower())  # "İ" lowered is two characters)
    return [w.lower() for w in WORD.findall(text)]


def closest_sentences(sentence: str, source: str, k: int = 2) -> list[str]:
    """The ``k`` source sentences sharing most content words with ``sentence``: where the
    source says what a summary sentence says, so an opposite there is a contradiction."""
    return list(_closest(sentence, source, k))


# the negation and the antonym checks ask for the same sentences, one after the other; few
# are kept, as each holds its source (a context can be a whole filing)
@lru_cache(maxsize=32)
def _closest(sentence: str, source: str, k: int) -> tuple[str, ...]:
    content = {w for w in _words(sentence) if len(w) > 3}
    ranked = heapq.nlargest(k, source_index(source).sentence_words,
                            key=lambda sw: len(content & sw[1]))  # ties: the earlier first
    return tuple(s for s, _ in ranked)


def antonym_statements(summary: str, source: str) -> list[Statement]:
    out = []
    for sentence in sentences(summary):
        words = set(_words(sentence))
        near = set(_words(" ".join(closest_sentences(sentence, source))))
        for word in sorted(w for w in words if w in OPPOSITES):
            opposites = OPPOSITES[word]
            contradicted = word not in near and opposites & near and not opposites & words
            said = f" (the source: {sorted(opposites & near)[0]})" if contradicted else ""
            out.append(Statement("antonym", word + said, not contradicted))
    return out


CHECKS = {"figure": figure_statements, "entity": entity_statements,
          "direction": direction_statements, "negation": negation_statements,
          "antonym": antonym_statements}


def statements(summary: str, source: str, kinds: tuple[str, ...] = tuple(CHECKS)
               ) -> list[Statement]:
    return [s for kind in kinds for s in CHECKS[kind](summary, source)]


# balanced accuracy [95% CI] against people on SummEdits splits the rules were not tuned on
# (bench/factcheck.py; docs/validate-your-judge.md): what a verdict deciding on factcheck quotes
MEASURED_HELD_OUT = {"sales_call test": (0.688, 0.643, 0.734), "news test": (0.616, 0.580, 0.650)}

NOTHING = ("the summary states no figure, name, period, direction, negation or word with a "
           "listed opposite to check")


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
