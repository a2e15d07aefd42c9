"""The offline model's extractive summary.

Algorithm (deterministic, documented in the README):

1. Candidates are the sentences (lines) of the context the model was shown, in order,
   without metadata headers; duplicates are dropped.
2. Each sentence is scored: +2.0 if it states an amount, percentage or per-share figure;
   +1.0 per key financial term it names (revenue, earnings per share, margin, guidance,
   ...), capped at 3; +0.5 per content word it shares with the question, capped at 2;
   -3.0 for boilerplate (safe harbour, operator, thanks, questions); -1.0 if it has
   fewer than 6 words or more than 60.
3. Sentences are taken highest score first (ties: earlier first) while they fit in the
   target length; one that does not fit is passed over for a shorter one; sentences
   scoring 0 or less are never added after the first. They are emitted in document order.
4. Style: ``earnings_call`` emits short lower-case bullets, one per line (the ECTSum
   reference style); other styles emit the sentences as prose. The output is cut at a
   word boundary to the target length.
5. Citations (when the caller gives each sentence's source chunk): every bullet or
   sentence is followed by ``[c:<chunk id>]`` of the chunk it was taken from; markers do
   not count towards the length.
"""

from __future__ import annotations

import re
from functools import lru_cache

from arag.citations import cite

# an amount ($5), a percentage or basis points (5%, 12 bps) or a scaled figure (3 million,
# 10 cents); only whether a sentence has one counts, so the pattern stops at the least that
# proves it (2.5x faster on 10-K sentences than matching whole figures, same answer)
NUMBER = re.compile(
    r"\$\s?\d|\d[\d,.]*\s?(?:%|percent|per cent|basis points|bps|million|billion|thousand|cents?)",
    re.IGNORECASE,
)
KEY_TERMS = (
    "revenue", "sales", "earnings per share", "eps", "net income", "net loss",
    "operating income", "operating margin", "gross margin", "margin", "guidance", "outlook",
    "expects", "expect", "forecast", "free cash flow", "cash flow", "dividend", "buyback",
    "repurchase", "ebitda", "profit", "bookings", "backlog", "same-store", "net interest",
    "full year", "full-year", "quarter", "adjusted",
)
BOILERPLATE = (
    "forward-looking", "safe harbor", "safe harbour", "operator", "thank you", "thanks",
    "question-and-answer", "questions", "good morning", "good afternoon", "welcome",
    "conference call", "replay", "non-gaap reconciliation", "press release",
)
STOPWORDS = frozenset(
    "a an the of and or to in on for from with by at as is are was were be been its it this "
    "that these those what which who summarize summarise key highlights call earnings "
    "company's companys q1 q2 q3 q4 quarter year".split()
)
# compiled once; a term absent as a substring cannot match as a word, so the (much cheaper)
# substring test runs first: the offline model scores every sentence of a whole filing
_KEY_TERM_PATTERNS = [(term, re.compile(rf"\b{re.escape(term)}\b")) for term in KEY_TERMS]
WORD = re.compile(r"[a-z0-9$%][a-z0-9$%.,'-]*", re.IGNORECASE)


def content_words(text: str) -> set[str]:
    return {w.strip(".,'").lower() for w in WORD.findall(text)} - STOPWORDS


def score_sentence(sentence: str, question_words: set[str]) -> float:
    score, words = _question_free_score(sentence)
    return score + min(2.0, 0.5 * len(words & question_words))


@lru_cache(maxsize=1 << 15)
def _question_free_score(sentence: str) -> tuple[float, frozenset[str]]:
    """A sentence's score but for the question's words, and its content words. Kept for
    the next question: stuffing's two tasks of a filing score its same ~3,000 sentences.
    Every term is a multiple of 0.5, so the sum is exact in any order."""
    lower = sentence.lower()
    n_words = len(sentence.split())
    score = 2.0 if NUMBER.search(sentence) else 0.0
    score += min(3.0, sum(1.0 for term, pattern in _KEY_TERM_PATTERNS
                          if term in lower and pattern.search(lower)))
    if any(b in lower for b in BOILERPLATE):
        score -= 3.0
    if n_words < 6 or n_words > 60:
        score -= 1.0
    return score, frozenset(content_words(sentence))


def summarize(sentences: list[str], question: str, target_words: int, style: str,
              sources: list[str | None] | None = None) -> str:
    """Pick and render the best sentences; see the module docstring. ``sources``: the chunk
    id of each sentence (None: not a chunk), to cite them."""
    seen: set[str] = set()
    unique: list[str] = []
    origin: list[str | None] = []
    for i, s in enumerate(sentences):
        s = " ".join(s.split())
        if s and s.lower() not in seen:
            seen.add(s.lower())
            unique.append(s)
            origin.append(sources[i] if sources is not None else None)
    if not unique:
        return ""
    q_words = content_words(question)
    scores = [score_sentence(s, q_words) for s in unique]
    ranked = sorted(range(len(unique)), key=lambda i: (-scores[i], i))
    chosen: list[int] = []
    words = 0
    for i in ranked:
        if chosen and scores[i] <= 0:
            break  # nothing informative left: a shorter summary beats filler
        n = len(unique[i].split())
        if chosen and words + n > target_words:
            continue  # too long for what is left; a shorter, lower-ranked one may fit
        chosen.append(i)
        words += n
    order = sorted(chosen)
    picked = [unique[i] for i in order]
    if style == "earnings_call":
        picked = [_bullet(s) for s in picked]
    lines = _cut_lines(picked, target_words)
    if sources is not None:
        lines = [f"{line} {cite([c])}" if (c := origin[i]) else line
                 for line, i in zip(lines, order, strict=False)]
    return "\n".join(lines) if style == "earnings_call" else " ".join(lines)


def _bullet(sentence: str) -> str:
    s = sentence.lower().rstrip(" .")
    s = re.sub(r"^(and|so|also|now|well|overall),?\s+", "", s)
    return s + "."


def _cut_lines(lines: list[str], target_words: int) -> list[str]:
    out: list[str] = []
    budget = target_words
    for line in lines:
        words = line.split()
        if budget <= 0:
            break
        if len(words) > budget:
            words = words[:budget]
            line = " ".join(words).rstrip(",;:") + ("." if not words[-1].endswith(".") else "")
        out.append(line)
        budget -= len(words)
    return out
