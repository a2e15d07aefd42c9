"""Why an answer falls short: each gold fact blamed on retrieval or on generation, each
answer claim checked against what the system read (after RAGChecker's split).

Gold facts of a task: each gold line (an ECTSum key sentence); on a paginated document
(FinanceBench's filings) each evidence page's gold lines as one passage; with no gold
location, each sentence of the reference. Each gets one status:

* ``covered``: the answer reflects it (``reflected``: its figures, else its words);
* ``retrieved_unused``: it is in the context the system read, not in the answer;
* ``not_retrieved``: it is in none of the context the system read;
* ``unknown``: the record does not say what was read (a predictions file with neither
  ``contexts`` nor ``retrieved_chunk_ids``): counted, never guessed.

"The context read" is ``System.judged_context``: the whole document for stuffing, the
chunks an agent *read* (``chunk_read``, not the hits it only saw), naive's top-k, a
pipeline's own context texts. A gold line is in it when its text is (whitespace and case
ignored); a reference sentence when the context reflects it.

Answer claims are the answer's sentences that state something checkable (a figure, a name,
a period, a direction, a negation: ``metrics.factcheck``); each is ``supported`` (every
statement found in the context read), ``from_memory`` (what the context lacks is in the
reference: the model knew it) or ``unsupported`` (a hallucination). With a judge, when
``factual_consistency`` ran before this scorer (it is listed first), its claims and
verdicts are used instead (no second judge call): verified -> supported, otherwise
from_memory or unsupported as above. The same factual-consistency request lists the gold
facts (``gold_question``) and the judge's "Fact <n>: reflected / not reflected" lines decide
which the answer reflects; a fact it gives no line for is text-matched, and
``attribution_unjudged`` says so. Each fact and claim names its ``method``;
``attribution_method`` is ``judge``, ``text_match`` or ``mixed``. Where the judge decided,
the no-LLM status is kept beside (``text_match_status``) and the run logs how often the two
agree (``attribution_agreement_facts`` / ``_claims``, with ``_n``).

Rates are per task, over the facts (claims) with a known status; docs/judging.md maps them
onto RAGChecker's names (``claim_recall``, ``context_utilization``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from arag.memory import kept_by_characters
from metrics.base import (
    Metric,
    Scorer,
    Scores,
    ScoringItem,
    answered,
    register_scorer,
)
from metrics.factcheck import sentences, statements
from metrics.numeric import NUMBER, Quantity, quantities

COVERED, UNUSED, NOT_RETRIEVED, UNKNOWN = "covered", "retrieved_unused", "not_retrieved", "unknown"
SUPPORTED, UNSUPPORTED, FROM_MEMORY = "supported", "unsupported", "from_memory"
TEXT_MATCH, JUDGE, MIXED = "text_match", "judge", "mixed"
GOLD_ASKED = "factual_consistency_gold_facts"  # how many gold facts its request listed
FACT_RATES = {COVERED: "attribution_covered_rate", NOT_RETRIEVED: "attribution_not_retrieved_rate",
              UNUSED: "attribution_retrieved_unused_rate"}
CLAIM_RATES = {UNSUPPORTED: "attribution_unsupported_rate",
               FROM_MEMORY: "attribution_from_memory_rate"}
CONTEXT_NOT_RECORDED = ("the record does not say what context the system read (no contexts, "
                        "no retrieved_chunk_ids): its gold facts are unknown")
NO_GOLD = "the task has no gold facts (no gold lines and no reference)"
NO_CLAIMS = "the answer states nothing checkable (no figure, name, period, direction or negation)"
REFLECTED = re.compile(r"^[\s*\-\d.)]*fact\s*(?P<n>\d+)\s*:\s*\**\s*"
                       r"(?P<verdict>not\s+reflected|reflected)\b", re.IGNORECASE | re.MULTILINE)
WORD = re.compile(r"[a-z][a-z'-]{3,}")
# words that say nothing of which fact it is: function words, periods, units, report verbs
STOP = {"that", "this", "with", "from", "have", "were", "which", "will", "would", "their",
        "there", "these", "those", "about", "also", "been", "into", "than", "then", "they",
        "what", "when", "where", "while", "year", "quarter", "company", "compname", "qtrly",
        "quarterly", "first", "second", "third", "fourth", "fiscal", "full", "period",
        "million", "billion", "thousand", "trillion", "percent", "basis", "points", "cents",
        "compared", "versus", "prior", "last", "over", "same", "approximately", "results",
        "reported", "well", "we're", "year-over-year"}
# the reference's words for the transcript's (Reuters: "revenue" for "net sales", "eps")
SAME_WORD = {"eps": ("earni", "share"), "revenue": ("sales",), "revenues": ("sales",)}
STEM = 5  # letters a word is compared on: "increased" = "increase", "shares" = "share"
# a figure-less fact: at least this many of its content words, and this share of them, in
# one sentence (chosen on ECTSum val's hand labels, tests/fixtures/ectsum_val_restated.jsonl)
WORDS_NEEDED, WORD_SHARE_NEEDED = 3, 0.25
CLAUSE = re.compile(r"(?<=[.!?;])\s+|\n+")  # lower-case bullets too ("... $1.96. q1 revenue")
@dataclass(frozen=True)
class Fact:
    text: str
    status: str
    in_context: bool | None  # None: the context read is unknown
    chunk_id: str | None  # the chunk holding its gold line (a read one first)
    method: str = TEXT_MATCH  # who decided whether the answer reflects it
    text_match_status: str | None = None  # judged: what the no-LLM path says beside it


@dataclass(frozen=True)
class Claim:
    text: str
    status: str
    chunk_id: str | None  # the read chunk that supports it, where one alone does
    method: str = TEXT_MATCH
    text_match_status: str | None = None  # judged: the no-LLM status of its text, if checkable


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


# an answer, or a context, read for each of its task's gold facts, and a gold fact for each
# system: kept by characters (a context can be a whole filing); its own cache, so the
# documents' figures (source_quantities) stay kept
TEXTS_KEPT = 20_000_000  # as the documents' own caches (metrics.numeric, metrics.factcheck)


@kept_by_characters(TEXTS_KEPT)
def _content_words(text: str) -> frozenset[str]:
    """The stems of the words that say which fact a text states (``STOP`` words left out,
    the reference's abbreviations read as the transcript's words)."""
    out: set[str] = set()
    for word in WORD.findall(text.lower()):
        if word not in STOP:
            out.update(SAME_WORD.get(word, (word[:STEM],)))
    return frozenset(out)


@kept_by_characters(TEXTS_KEPT)
def _quantities(text: str) -> tuple[Quantity, ...]:
    return tuple(quantities(text))


@kept_by_characters(TEXTS_KEPT)
def _figures(text: str) -> tuple[tuple[Quantity, bool], ...]:
    """Each figure of a fact and whether it is specific: written with a decimal or with three
    or more digits ("$1.96", "$404 million", "10.2%"; not "9%" or "$4 billion"). A number
    inside a name ("COVID-19") or a lone digit without a unit ("segment 3") is not one."""
    out = []
    for m in NUMBER.finditer(text):
        if m.start() >= 2 and text[m.start() - 1] == "-" and text[m.start() - 2].isalpha():
            continue
        start = m.start() - 1 if m.start() and text[m.start() - 1].isalpha() else m.start()
        found = quantities(text[start:m.end()])  # as metrics.numeric reads it (q3, years)
        raw = m.group("num").replace(",", "")
        if found and not (found[-1].kind == "count" and len(raw) == 1):  # "segment 3"
            out.append((found[-1], "." in raw or len(raw.lstrip("0")) >= 3))
    return tuple(out)


@kept_by_characters(TEXTS_KEPT)
def _clauses(text: str) -> tuple[tuple[frozenset[str], tuple[Quantity, ...]], ...]:
    """Each sentence or bullet of a text: its content words and its figures."""
    return tuple((_content_words(c), tuple(quantities(c)))
                 for c in CLAUSE.split(text) if c.strip())


def reflected(fact: str, text: str) -> bool:
    """Whether one sentence (or bullet) of ``text`` states ``fact`` (docs/judging.md, "the
    per-fact match rule"). A fact with figures: the sentence holds one of them with a word
    of the fact beside it when the figure is specific, two words when it is not, or two of
    its figures; a fact without figures: a quarter of its content words, at least three."""
    figures, words = _figures(fact), _content_words(fact)
    for clause_words, clause_figures in _clauses(text):
        shared = len(words & clause_words)
        if figures:
            hits = [specific for q, specific in figures
                    if any(q.matches(h) for h in clause_figures)]
            if len(hits) >= 2 or (hits and shared >= (1 if any(hits) else 2)):
                return True
        elif shared >= max(WORDS_NEEDED, WORD_SHARE_NEEDED * len(words)):
            return True
    return False


def context_read(item: ScoringItem) -> str | None:
    """The text the system read, or None when its record does not say. A predictions file
    with no context is judged elsewhere against the whole documents; here it is unknown."""
    p = item.prediction
    if "context_chunk_ids" in p.not_recorded and not p.contexts:
        return None
    return item.context_text


def gold_locations(item: ScoringItem) -> list[tuple[str, str, list[str]]]:
    """(text, doc id, chunk ids holding it) of each gold fact with a location: a gold line,
    or the gold lines of one page of a paginated document."""
    out = []
    for doc_id, lines in (item.task.gold_lines or {}).items():
        chunks = _doc_chunks(item.chunks).get(doc_id, [])
        texts = {n: next((c.lines[n - c.line_start] for c in chunks if c.covers(n)), None)
                 for n in sorted(set(lines))}
        pages = item.line_pages.get(doc_id)
        groups: dict[Any, list[int]] = {}
        for n in texts:
            groups.setdefault(pages[n - 1] if pages else n, []).append(n)
        for group in groups.values():
            text = "\n".join(t for n in group if (t := texts[n]))
            holders = [c.chunk_id for c in chunks if any(c.covers(n) for n in group)]
            if text.strip():
                out.append((text, doc_id, holders))
    return out


_indexed: tuple[Any, dict[str, list[Any]]] = (None, {})  # the run's chunks, by document


def _doc_chunks(chunks: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The run's chunks by document, in line order: indexed once for the run's tasks (every
    item of a run holds the same mapping), not searched through for each task."""
    global _indexed
    held, by_doc = _indexed
    if held is not chunks:
        by_doc = {}
        for chunk in sorted(chunks.values(), key=lambda c: c.line_start):
            by_doc.setdefault(chunk.doc_id, []).append(chunk)
        _indexed = (chunks, by_doc)
    return by_doc


def fact_sources(item: ScoringItem) -> list[tuple[str, list[str] | None]]:
    """Each gold fact's text and the chunks holding it (None: a reference sentence, which
    has no location), in a fixed order: the judge's numbered list follows it. A gold line
    the task's reference does not restate is not a fact the answer is held to
    (``unrestated``): ECTSum's key sentences are silver labels, and a summary as good as the
    reference need not state what the reference leaves out."""
    located = gold_locations(item)
    if located:
        return [(text, holders) for text, doc_id, holders in located
                if not unrestated(item, text, doc_id)]
    return [(s, None) for s in sentences(item.task.reference) if _content_words(s) or quantities(s)]


def unrestated(item: ScoringItem, text: str, doc_id: str) -> bool:
    """A single gold line (not a page's passage) of a task with a reference that no
    sentence of the reference states (``reflected``)."""
    return bool(item.task.reference.strip()) and not item.line_pages.get(doc_id) \
        and not reflected(text, item.task.reference)


def unrestated_count(item: ScoringItem) -> int:
    """How many of the task's gold lines its reference does not restate (not facts)."""
    return sum(unrestated(item, text, doc_id) for text, doc_id, _ in gold_locations(item))


def gold_question(item: ScoringItem) -> str | None:
    """The gold-fact question ``factual_consistency`` appends to its request when
    attribution follows it (None: the task has no gold facts): one call per task decides
    "reflected" for every fact."""
    facts = fact_sources(item)
    if not facts:
        return None
    listed = "\n".join(f"{n}. {' / '.join(text.split(chr(10)))}"
                       for n, (text, _) in enumerate(facts, 1))
    return ("Then check which of these gold facts the predicted summary reflects (it states "
            "the same figures or the same finding; the wording may differ):\n" + listed +
            "\nAfter the claim lines (or 'Claims: none'), add one line per gold fact, exactly "
            "'Fact <n>: reflected' or 'Fact <n>: not reflected'.")


def parse_reflected(reply: str, n_facts: int) -> dict[int, bool]:
    """Fact number (from 1) -> whether the judge's reply says the answer reflects it; a
    fact the reply does not answer is absent."""
    return {int(m.group("n")): m.group("verdict").lower().startswith("reflected")
            for m in REFLECTED.finditer(reply) if 1 <= int(m.group("n")) <= n_facts}


def gold_facts(item: ScoringItem, answer: str, context: str | None,
               judged: dict[int, bool] | None = None) -> list[Fact]:
    """Each gold fact with its status; ``judged``: fact number -> reflected, as the judge
    said (those facts' ``method`` is ``judge``, their no-LLM status kept beside)."""
    read = set(item.prediction.context_chunk_ids)
    norm_context = _norm(context) if context is not None else None
    out = []
    for n, (text, holders) in enumerate(fact_sources(item), 1):
        if holders is not None:
            in_context = None if norm_context is None else _in_context(text, norm_context)
            chunk = next((c for c in holders if c in read), holders[0] if holders else None)
        else:  # no gold location: the reference sentence, matched against the context
            in_context, chunk = None if context is None else reflected(text, context), None
        by_text = _fact_status(reflected(text, answer), in_context)
        if judged is not None and n in judged:
            out.append(Fact(text, _fact_status(judged[n], in_context), in_context, chunk, JUDGE,
                            by_text))
        else:
            out.append(Fact(text, by_text, in_context, chunk, TEXT_MATCH, None))
    return out


def _in_context(fact: str, norm_context: str) -> bool:
    """A gold line is read when its text is; a page passage when any of its lines is."""
    return any(_norm(line) in norm_context for line in fact.split("\n") if line.strip())


def _fact_status(in_answer: bool, in_context: bool | None) -> str:
    if in_answer:
        return COVERED
    if in_context is None:
        return UNKNOWN
    return UNUSED if in_context else NOT_RETRIEVED


def claim_status(item: ScoringItem, claim: str, context: str) -> str | None:
    """A claim's status on the no-LLM path, or None when it states nothing checkable."""
    found = statements(claim, context)
    if not found:
        return None
    missing = [st for st in found if not st.supported]
    if not missing:
        return SUPPORTED
    # the same statement (kind and text) the reference supports: the checks against the
    # reference need not make as many statements, nor in the same order, as against the
    # context (a direction with no figure of the source beside it is not checked at all)
    in_reference = {(st.kind, st.text) for st in (statements(claim, item.task.reference)
                                                  if item.task.reference else [])
                    if st.supported}
    known = all((st.kind, st.text) in in_reference for st in missing)
    return FROM_MEMORY if known else UNSUPPORTED


def text_claims(item: ScoringItem, answer: str, context: str) -> list[Claim]:
    """Each checkable sentence of the answer, checked against the context read, then the
    reference."""
    out = []
    for sentence in sentences(answer):
        status = claim_status(item, sentence, context)
        if status is not None:
            chunk = _supporting_chunk(item, sentence) if status == SUPPORTED else None
            out.append(Claim(sentence, status, chunk))
    return out


def judged_claims(item: ScoringItem, verdicts: list[dict[str, str]]) -> list[Claim]:
    """The factual-consistency judge's claims: verified -> supported; the others
    from_memory when the reference states their figures, else unsupported. Each keeps the
    no-LLM status of its text beside (``claim_status``), where the context is known."""
    reference = quantities(item.task.reference)
    out = []
    for c in verdicts:
        by_text = (claim_status(item, c["claim"], item.context_text)
                   if item.context_text is not None else None)
        if c["verdict"] == "verified":
            out.append(Claim(c["claim"], SUPPORTED, None, JUDGE, by_text))
            continue
        figures = quantities(c["claim"])
        known = bool(figures) and all(any(f.matches(r) for r in reference) for f in figures)
        out.append(Claim(c["claim"], FROM_MEMORY if known else UNSUPPORTED, None, JUDGE,
                         by_text))
    return out


def _supporting_chunk(item: ScoringItem, sentence: str) -> str | None:
    for cid in dict.fromkeys(item.prediction.context_chunk_ids):
        chunk = item.chunks.get(cid)
        if chunk is not None and all(st.supported for st in statements(sentence, chunk.text)):
            return cid
    return None


@register_scorer("attribution")
class AttributionScorer(Scorer):
    reads = ("factual_consistency",)  # its judged claims, when it ran first
    metrics = [Metric("attribution_covered_rate", "gold facts covered", histogram=False),
               Metric("attribution_not_retrieved_rate", "gold facts not retrieved",
                      histogram=False, higher_is_better=False),
               Metric("attribution_retrieved_unused_rate", "gold facts retrieved, unused",
                      histogram=False, higher_is_better=False),
               Metric("attribution_unsupported_rate", "claims unsupported", histogram=False,
                      higher_is_better=False),
               Metric("attribution_from_memory_rate", "claims from memory", histogram=False,
                      higher_is_better=False),
               Metric("claim_recall", "claim recall (RAGChecker)", histogram=False),
               Metric("context_utilization", "context utilization (RAGChecker)",
                      histogram=False)]

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        self.rows = []
        out = []
        for item in items:
            s = self.score_one(item)
            self.rows += artifact_rows(item.prediction.id, item.prediction.system,
                                       item.prediction.repeat, s.values)
            out.append(s)
        return out

    def score_one(self, item: ScoringItem) -> Scores:
        s = Scores()
        why = answered(item)
        if why:
            s.null(self.fields, why)
            s.values.update(attribution_facts=None, attribution_claims=None,
                            attribution_method=None, attribution_unjudged=None,
                            attribution_unrestated=None)
            return s
        answer = item.prediction.predicted or ""
        context = context_read(item)
        judged, unjudged = judged_facts(item)
        facts = gold_facts(item, answer, context, judged)
        verdicts = item.earlier.get("factual_consistency_claims")
        if verdicts is not None:
            claims = judged_claims(item, verdicts)
        elif item.context_text is not None:
            claims = text_claims(item, answer, item.context_text)
        else:
            claims = []
        methods = {f.method for f in facts} | {c.method for c in claims}
        method = JUDGE if methods == {JUDGE} else TEXT_MATCH if JUDGE not in methods else MIXED
        s.values.update(attribution_facts=[asdict(f) for f in facts],
                        attribution_claims=[asdict(c) for c in claims],
                        attribution_method=method, attribution_unjudged=unjudged,
                        attribution_unrestated=unrestated_count(item))
        self._fact_rates(s, facts, context is None, s.values["attribution_unrestated"])
        self._claim_rates(s, claims, item)
        return s

    def aggregate(self, answered: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> dict[str, float]:
        """How often the no-LLM path agrees with the judge, where the judge decided:
        ``attribution_agreement_<facts|claims>`` and its ``_n`` (absent when none was)."""
        out: dict[str, float] = {}
        for kind, (same, n) in agreement(records).items():
            if n:
                out[f"attribution_agreement_{kind}"] = same / n
                out[f"attribution_agreement_{kind}_n"] = float(n)
        return out

    def _fact_rates(self, s: Scores, facts: list[Fact], unknown_context: bool,
                    unrestated: int) -> None:
        names = [*FACT_RATES.values(), "claim_recall", "context_utilization"]
        if not facts:
            s.null(names, NO_GOLD if not unrestated else
                   f"the reference restates none of the task's {unrestated} gold lines")
            return
        if unknown_context:
            s.null(names, CONTEXT_NOT_RECORDED)
            return
        for status, name in FACT_RATES.items():
            s.values[name] = sum(f.status == status for f in facts) / len(facts)
        in_context = [f for f in facts if f.in_context]
        s.values["claim_recall"] = len(in_context) / len(facts)
        if in_context:
            s.values["context_utilization"] = (sum(f.status == COVERED for f in in_context)
                                               / len(in_context))
        else:
            s.null(["context_utilization"], "no gold fact is in the context read")

    def _claim_rates(self, s: Scores, claims: list[Claim], item: ScoringItem) -> None:
        names = list(CLAIM_RATES.values())
        if item.context_text is None and not claims:
            s.null(names, "the record carries no context to check the answer's claims against")
        elif not claims:
            s.null(names, NO_CLAIMS)
        else:
            for status, name in CLAIM_RATES.items():
                s.values[name] = sum(c.status == status for c in claims) / len(claims)

    def artifacts(self) -> dict[str, Any]:
        """``attribution.jsonl``: one row per task, repeat and gold fact or answer claim."""
        return {"attribution.jsonl": "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                             for r in self.rows)} if self.rows else {}


def judged_facts(item: ScoringItem) -> tuple[dict[int, bool] | None, str | None]:
    """Fact number -> reflected, from the factual-consistency reply that asked about the
    gold facts (None: it did not ask), and why some facts are left to text matching."""
    asked = item.earlier.get(GOLD_ASKED)
    reply = item.earlier.get("factual_consistency_reply")
    if not asked or reply is None:
        return None, None
    judged = parse_reflected(reply, asked)
    if len(judged) == asked:
        return judged, None
    return judged, (f"the judge's reply answers {len(judged)} of the {asked} gold facts it was "
                    "asked about (no 'Fact <n>: reflected' or 'not reflected' line for the "
                    "rest): those are text-matched")


def agreement(records: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """``facts`` and ``claims``: (how many the no-LLM path gives the judge's status, how many
    the judge decided and the no-LLM path could check), over ``records``."""
    out = {}
    for kind in ("facts", "claims"):
        pairs = [(x["status"], x["text_match_status"]) for r in records
                 for x in r.get(f"attribution_{kind}") or []
                 if x.get("method") == JUDGE and x.get("text_match_status") is not None]
        out[kind] = (sum(a == b for a, b in pairs), len(pairs))
    return out


def artifact_rows(task_id: str, system: str, repeat: int | None, values: dict[str, Any]
                  ) -> list[dict[str, Any]]:
    """The rows of ``attribution.jsonl`` for one record's attribution fields."""
    method = values.get("attribution_method")
    rows = [{"task_id": task_id, "system": system, "repeat": repeat or 0, "kind": "gold",
             "text": f["text"], "status": f["status"], "chunk_id": f["chunk_id"],
             "method": f.get("method", TEXT_MATCH)} for f in values.get("attribution_facts") or []]
    rows += [{"task_id": task_id, "system": system, "repeat": repeat or 0, "kind": "claim",
              "text": c["text"], "status": c["status"], "chunk_id": c["chunk_id"],
              "method": c.get("method", method)} for c in values.get("attribution_claims") or []]
    return rows
