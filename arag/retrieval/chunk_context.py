"""LLM-written chunk context (``retrieval.llm_context=true``; "contextual retrieval").

Before indexing, the run's model reads each chunk together with its whole document and
writes one or two sentences situating it ("This passage is from ACME's Q3 2024 call, the
CFO's discussion of gross margin ..."). That context is put in front of every sentence of
the chunk when it is embedded, and in front of the chunk in BM25, so a chunk that never
names the company, period or topic can still be found by them. The model only reads;
what it is shown later (the chunk text) is unchanged.

Each request carries the document as its system prompt (so a provider's prompt cache
serves it across the chunks of one document) and goes through the response cache: a
re-run writes nothing again, and the dry run prices the requests not yet cached
(``context_requests``). Contexts are part of the index key.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from arag.llm.base import ChatModel
from arag.records import Chunk, Corpus, content_hash

CONTEXT_WORDS = 60
_INSTRUCTION = (
    "<retrieval_step>chunk_context</retrieval_step>\n"
    "Here is a passage of the document above:\n<chunk>\n{chunk}\n</chunk>\n"
    f"Write one or two sentences (under {CONTEXT_WORDS} words) that situate this passage "
    "within the whole document, to improve search retrieval of it: which company, period "
    "and part of the document it is from and what it is about. Reply with the sentences "
    "only.")


def context_request(corpus: Corpus, chunk: Chunk) -> dict[str, Any]:
    """The ``complete()`` kwargs asking for one chunk's context."""
    doc = corpus.documents[chunk.doc_id]
    return {"system": f"<document>\n{doc.header}\n{doc.text}\n</document>",
            "messages": [{"role": "user", "content": _INSTRUCTION.format(chunk=chunk.body)}],
            "max_tokens": 2 * CONTEXT_WORDS, "temperature": 0.0}


def context_requests(corpus: Corpus, chunks: list[Chunk]) -> dict[str, dict[str, Any]]:
    """Every chunk's request, by chunk id (what the dry run prices)."""
    return {c.chunk_id: context_request(corpus, c) for c in chunks}


def write_contexts(model: ChatModel, corpus: Corpus, chunks: list[Chunk],
                   concurrency: int = 4) -> dict[str, str]:
    """Each chunk's context as the model writes it (one line, stripped)."""
    def one(chunk: Chunk) -> str:
        return " ".join(model.complete(**context_request(corpus, chunk)).text.split())

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return dict(zip((c.chunk_id for c in chunks), pool.map(one, chunks), strict=True))


def contexts_key(contexts: dict[str, str]) -> str:
    """What the index key takes from the contexts: another model or prompt, another index."""
    return content_hash(sorted(contexts.items()))
