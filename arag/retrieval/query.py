"""Model calls around a search: HyDE (a hypothetical answer searched for instead of the bare
question) and reranking (the model orders the first-stage candidates).

Each is one request to the run's model, made by the system through its call log, so it is
timed, costed, traced and served by the response cache like any other call. Requests are
marked ``<retrieval_step>hypothetical_answer|rerank</retrieval_step>``; the offline model
answers them with documented deterministic stand-ins (``arag/llm/offline.py``).
"""

from __future__ import annotations

import re
from typing import Any

from arag.retrieval.index import Hit, SearchIndex

HYDE_SYSTEM = (
    "You help a search engine find passages in a financial document. Write a short passage "
    "(two or three sentences, under 80 words) that could appear in the document and would "
    "answer the request. Use the document's likely wording and plausible figures. Reply "
    "with the passage only.")
RERANK_SYSTEM = (
    "You rank passages of a financial document by how useful each is for answering the "
    "request. Reply with the passage ids, most useful first, one per line, and nothing else.")
RERANK_WORDS = 150  # words of each candidate shown to the reranker
TOKEN = re.compile(r"[^\s,;\"'<>()\[\]]+")


def hyde_request(question: str) -> dict[str, Any]:
    return {"system": HYDE_SYSTEM, "max_tokens": 200, "temperature": 0.0,
            "messages": [{"role": "user", "content": (
                "<retrieval_step>hypothetical_answer</retrieval_step>\n"
                f"<question>{question}</question>")}]}


def hyde_query(question: str, passage: str) -> str:
    """What is searched: the question and the hypothetical passage (the passage alone can
    drift from what was asked). A passage that only repeats the question adds nothing, so
    the question is searched alone (the offline model's HyDE stand-in does that)."""
    passage = passage.strip()
    return question if passage == question.strip() else f"{question}\n{passage}"


def rerank_request(question: str, hits: list[Hit], index: SearchIndex) -> dict[str, Any]:
    candidates = "\n".join(
        f'<candidate id="{h.chunk_id}">\n{_words(index.by_id[h.chunk_id].text)}\n</candidate>'
        for h in hits)
    return {"system": RERANK_SYSTEM, "max_tokens": 40 * len(hits) + 50, "temperature": 0.0,
            "messages": [{"role": "user", "content": (
                "<retrieval_step>rerank</retrieval_step>\n"
                f"<question>{question}</question>\n<candidates>\n{candidates}\n</candidates>")}]}


def reranked(reply: str, hits: list[Hit]) -> list[Hit]:
    """The candidates in the order the reply names them; ids it does not name keep their
    first-stage order after those it does (a reply naming none changes nothing)."""
    by_id = {h.chunk_id: h for h in hits}
    named = [t.rstrip(".:") for t in TOKEN.findall(reply)]
    order = list(dict.fromkeys(t for t in named if t in by_id))
    order += [h.chunk_id for h in hits if h.chunk_id not in order]
    return [by_id[cid] for cid in order]


def _words(text: str) -> str:
    words = text.split()
    return text if len(words) <= RERANK_WORDS else " ".join(words[:RERANK_WORDS]) + " ..."
