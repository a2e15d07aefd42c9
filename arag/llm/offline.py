"""The embedded offline model: deterministic, no network, no key.

It reads the conversation exactly as a remote model would and acts on it:

* With tools offered (the A-RAG loop), it follows a fixed retrieval policy whose queries
  come only from the task and from what it has read -- never from a vocabulary of its own,
  so it knows nothing about the documents that naive RAG (which searches with the
  question) does not. Turn 1: ``semantic_search`` with the question and, when offered,
  ``keyword_search`` with the question's content words (``question_terms``). Later turns:
  ``chunk_read`` of the best unread chunks named in search results (ranked by
  reciprocal-rank fusion over all searches), ``chunks_per_read`` at a time, until it has
  read ``max_chunks_read`` chunks (None: the context budget the chunk_read tool declares,
  "at most N chunks in total") or no candidate is left; then it answers. When the
  candidates run dry it searches again with the most frequent content words of the chunks
  it has read that no query used yet (``read_terms``, at most ``FOLLOW_UP_SEARCHES``
  times). When ``chunk_summarize`` is offered, it then summarizes what it read toward the
  question in one call, before it answers. With ``system.tools=[semantic_search,
  chunk_read]`` it therefore reads exactly naive RAG's top-k, in naive's order.
* Asked for a retrieval step (``<retrieval_step>`` in the request, ``arag.retrieval.query``):
  for ``hypothetical_answer`` (HyDE) it has no knowledge to write a hypothetical passage
  from, so it writes the question back (HyDE with the offline model adds nothing to the
  query); for ``rerank`` it orders the candidates by how many of the question's content
  words their three best sentences hold (no vocabulary of its own, as for its searches),
  ties in the order given, and replies with their ids one per line; for ``chunk_context`` it writes
  "From <the document's header>, which opens: <its first 25 words>".
* Without tools, or once it stops searching, it answers with an extractive summary
  (``arag.llm.extractive``) of every ``<chunk>``/``<document>`` passage in the
  conversation, in the style and length the prompt asks for. When the prompt asks for
  citations (``<cite_format>``), each sentence taken from a ``<chunk id="...">`` cites it.

It reports token usage (≈4 characters a token) so cost and latency paths run; its
prices are zero. It is not a judge.
"""

from __future__ import annotations

import re
from typing import Any

from arag.llm.base import ChatModel, Completion, Message, ToolSpec, Usage
from arag.llm.extractive import content_words, summarize
from arag.llm.registry import register_provider

PASSAGE = re.compile(r"<(chunk|document)\b([^>]*)>\n?(.*?)</\1>", re.DOTALL)
PASSAGE_ID = re.compile(r'\bid="([^"]+)"')
ASKS_CITATIONS = "<cite_format>"
QUESTION = re.compile(r"<question>\s*(.*?)\s*</question>", re.DOTALL)
TARGET = re.compile(r"<target_words>\s*(\d+)\s*</target_words>")
STYLE = re.compile(r"<style>\s*(\w+)\s*</style>")
CHUNK_ID = re.compile(r"Chunk ID: (\S+)")
HEADER = re.compile(r"^\[COMPANY: .*\]$")
FOLLOW_UP_SEARCHES = 4  # searches with terms of what it read, when the candidates run dry
TERMS_PER_QUERY = 5
RETRIEVAL_STEP = re.compile(r"<retrieval_step>(\w+)</retrieval_step>")
CANDIDATE = re.compile(r'<candidate id="([^"]+)">\n?(.*?)</candidate>', re.DOTALL)
READ_BUDGET = re.compile(r"at most (\d+) chunks in total")


class OfflineModel(ChatModel):
    provider = "offline"
    judges = False  # extractive: it cannot judge (also declared to register_provider)

    def __init__(self, name: str = "offline", chunks_per_read: int = 2,
                 max_chunks_read: int | None = None, search_top_k: int = 5):
        self.name = name
        self.chunks_per_read = chunks_per_read
        self.max_chunks_read = max_chunks_read
        self.search_top_k = search_top_k

    def complete(
        self,
        system: str,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        tool_choice: str = "auto",
    ) -> Completion:
        transcript = _all_text(system, messages)
        tool_names = {t.name for t in tools or []} if tool_choice != "none" else set()
        first = messages[0]["content"] if messages else ""
        step = _first(RETRIEVAL_STEP, first) if isinstance(first, str) else ""
        content = [{"type": "text", "text": _retrieval_step(step, transcript)}] if step else \
            self._next_action(messages, transcript, tool_names, tools or [])
        if content is None:
            content = [{"type": "text", "text": self._answer(transcript)}]
        out_text = str(content)
        usage = Usage(input_tokens=self.count_tokens(transcript + str(tools or "")),
                      output_tokens=self.count_tokens(out_text))
        stop = "tool_use" if content[0]["type"] == "tool_use" else "end_turn"
        return Completion(content=content, stop_reason=stop, usage=usage, model=self.name)

    # --- retrieval policy -------------------------------------------------------------
    def _next_action(self, messages: list[Message], transcript: str, tool_names: set[str],
                     tools: list[ToolSpec]) -> list[dict[str, Any]] | None:
        if not tool_names:
            return None
        calls = [b for m in messages if m["role"] == "assistant" and isinstance(m["content"], list)
                 for b in m["content"] if b.get("type") == "tool_use"]
        question = _first(QUESTION, transcript)
        action = self._retrieval_action(calls, messages, question, tool_names,
                                        self._read_budget(tools))
        if action is not None or "chunk_summarize" not in tool_names:
            return action
        # done searching and reading: condense what was read toward the question, once (the
        # chunks chunk_read returned: an id over the context budget came back unread)
        shown = set(PASSAGE_ID.findall(transcript))
        read = [cid for c in calls if c["name"] == "chunk_read" for cid in c["input"]["chunk_ids"]
                if cid in shown]
        if read and not any(c["name"] == "chunk_summarize" for c in calls):
            return _tool_uses([("chunk_summarize", {"chunk_ids": read[:10], "focus": question})],
                              len(calls))
        return None

    def _retrieval_action(self, calls: list[dict[str, Any]], messages: list[Message],
                          question: str, tool_names: set[str], budget: int
                          ) -> list[dict[str, Any]] | None:
        if not calls:
            first: list[tuple[str, dict[str, Any]]] = []
            if "semantic_search" in tool_names:
                first.append(("semantic_search", {"query": question, "top_k": self.search_top_k}))
            terms = question_terms(question)
            if "keyword_search" in tool_names and terms:
                first.append(("keyword_search", {"keywords": terms, "top_k": self.search_top_k}))
            return _tool_uses(first, len(calls)) if first else None
        read = [cid for c in calls if c["name"] == "chunk_read" for cid in c["input"]["chunk_ids"]]
        if len(read) >= budget or "chunk_read" not in tool_names:
            return None
        candidates = [c for c in _ranked_candidates(messages) if c not in read]
        if candidates:
            batch = candidates[: min(self.chunks_per_read, budget - len(read))]
            return _tool_uses([("chunk_read", {"chunk_ids": batch})], len(calls))
        follow_ups = sum(1 for c in calls if c["name"] == "semantic_search") - 1
        if "semantic_search" not in tool_names or follow_ups >= FOLLOW_UP_SEARCHES:
            return None
        used = {w for c in calls for w in _query_words(c)}
        terms = read_terms(_read_text(messages), used)
        if not terms:
            return None
        return _tool_uses([("semantic_search", {"query": " ".join(terms),
                                                "top_k": self.search_top_k})], len(calls))

    def _read_budget(self, tools: list[ToolSpec]) -> int:
        """``max_chunks_read``, or else the budget chunk_read declares (else no limit)."""
        if self.max_chunks_read is not None:
            return self.max_chunks_read
        declared = [int(m) for t in tools if t.name == "chunk_read"
                    for m in READ_BUDGET.findall(t.description)]
        return declared[0] if declared else 10**9

    def _answer(self, transcript: str) -> str:
        sentences: list[str] = []
        sources: list[str | None] = []  # the chunk each sentence comes from (None: a document)
        for kind, attributes, body in PASSAGE.findall(transcript):
            chunk_id = _first(PASSAGE_ID, attributes) if kind == "chunk" else ""
            for line in body.splitlines():
                if line.strip() and not HEADER.match(line.strip()):
                    sentences.append(line)
                    sources.append(chunk_id or None)
        target = int(_first(TARGET, transcript) or 50)
        style = _first(STYLE, transcript) or "earnings_call"
        cite = sources if ASKS_CITATIONS in transcript else None
        summary = summarize(sentences, _first(QUESTION, transcript), target, style, cite)
        return summary or "The provided context contains no information to answer from."


def _retrieval_step(step: str, transcript: str) -> str:
    question = _first(QUESTION, transcript)
    if step == "hypothetical_answer":
        return question
    if step == "chunk_context":
        return _chunk_context(transcript)
    if step == "rerank":
        q_words = content_words(question)
        candidates = CANDIDATE.findall(transcript)

        def score(body: str) -> float:  # the question's own words only: no prior of its own
            lines = [ln for ln in body.splitlines() if ln.strip() and not HEADER.match(ln.strip())]
            return sum(sorted((len(content_words(ln) & q_words) for ln in lines),
                              reverse=True)[:3])

        scores = [score(body) for _, body in candidates]
        order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
        return "\n".join(candidates[i][0] for i in order)
    return f"unknown retrieval step {step!r}"


def question_terms(question: str) -> list[str]:
    """The question's content words, in the order it names them (no stop words)."""
    keep = content_words(question)
    words = [w.strip(".,'?").lower() for w in question.split()]
    return list(dict.fromkeys(w for w in words if w in keep))


def read_terms(text: str, used: set[str], n: int = TERMS_PER_QUERY) -> list[str]:
    """The ``n`` most frequent content words of ``text`` that no query used yet (ties: first
    seen first); words without a letter (figures) are left out."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if HEADER.match(line.strip()):
            continue
        for word in (w.strip(".,'").lower() for w in line.split()):
            if word in used or len(word) < 3 or not any(ch.isalpha() for ch in word) \
                    or not content_words(word):
                continue
            counts[word] = counts.get(word, 0) + 1
    return sorted(counts, key=lambda w: -counts[w])[:n]


def _query_words(call: dict[str, Any]) -> set[str]:
    args = call["input"]
    text = " ".join([args.get("query", "")] + list(args.get("keywords", [])))
    return {w.strip(".,'?").lower() for w in text.split()}


def _read_text(messages: list[Message]) -> str:
    """The text of every chunk chunk_read returned so far."""
    return "\n".join(body for m in messages if m["role"] == "user"
                     and not isinstance(m["content"], str)
                     for b in m["content"] if b.get("type") == "tool_result"
                     for _, _, body in PASSAGE.findall(_result_text(b)))


def _result_text(block: dict[str, Any]) -> str:
    c = block.get("content")
    return c if isinstance(c, str) else "".join(x.get("text", "") for x in c or [])


def _chunk_context(transcript: str) -> str:
    """The document's header and its first sentence: a fixed stand-in for a situating note."""
    doc = re.search(r"<document>\n(.*?)\n(.*?)(?:\n|</document>)", transcript, re.DOTALL)
    if doc is None:
        return "A passage of the document."
    return f"From {doc.group(1).strip()}, which opens: {' '.join(doc.group(2).split()[:25])}"


def _all_text(system: str, messages: list[Message]) -> str:
    parts = [system]
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            parts.append(content)
            continue
        for b in content:
            if b.get("type") == "text":
                parts.append(b["text"])
            elif b.get("type") == "tool_result":
                parts.append(_result_text(b))
    return "\n".join(parts)


def _ranked_candidates(messages: list[Message]) -> list[str]:
    """Reciprocal-rank fusion over every search result list seen so far."""
    scores: dict[str, float] = {}
    for m in messages:
        if m["role"] != "user" or isinstance(m["content"], str):
            continue
        for b in m["content"]:
            if b.get("type") != "tool_result" or b.get("is_error"):
                continue
            text = b["content"] if isinstance(b["content"], str) else str(b["content"])
            if "<chunk" in text:  # a chunk_read result, not a search list
                continue
            for rank, cid in enumerate(CHUNK_ID.findall(text)):
                scores[cid] = scores.get(cid, 0.0) + 1.0 / (60 + rank)
    return sorted(scores, key=lambda c: -scores[c])


def _tool_uses(calls: list[tuple[str, dict[str, Any]]], offset: int) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": f"toolu_offline_{offset + i:03d}", "name": name,
             "input": args} for i, (name, args) in enumerate(calls)]


def _first(pattern: re.Pattern[str], text: str) -> str:
    found = pattern.findall(text)
    return found[0] if found else ""


@register_provider("offline", judges=False)
def _offline(cfg: Any) -> ChatModel:
    o = cfg.offline
    return OfflineModel(cfg.name, o.chunks_per_read, o.max_chunks_read, o.search_top_k)
