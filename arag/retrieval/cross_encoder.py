"""Reranking with a local cross-encoder (``retrieval.rerank=cross_encoder``).

A cross-encoder reads the question and a candidate together and scores their relevance;
it is slower than the first stage but sees both at once, so it reorders the first stage's
candidates. The model is loaded with sentence-transformers from a local folder
(``retrieval.reranker_path``, e.g. a saved ``cross-encoder/ms-marco-MiniLM-L-6-v2``): no
hub is reached at run time. Candidates are scored on their text as a reader sees it
(metadata header and sentences); ties keep the first-stage order.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

from arag.retrieval.index import Hit, SearchIndex

_LOCK = threading.Lock()  # one load per path, even when tasks run in threads


@lru_cache(maxsize=2)
def _load(path: str) -> Any:
    from sentence_transformers import CrossEncoder

    return CrossEncoder(path, device="cpu", local_files_only=True)


def cross_encoder(path: str) -> Any:
    with _LOCK:
        return _load(path)


def cross_rerank(path: str, question: str, hits: list[Hit], index: SearchIndex) -> list[Hit]:
    """``hits`` ordered by the cross-encoder's score for (question, chunk text), best first;
    each hit carries its new score."""
    if not hits:
        return []
    pairs = [(question, index.by_id[h.chunk_id].text) for h in hits]
    scores = [float(s) for s in cross_encoder(path).predict(pairs, show_progress_bar=False)]
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))
    return [Hit(hits[i].chunk_id, scores[i], hits[i].snippet) for i in order]
