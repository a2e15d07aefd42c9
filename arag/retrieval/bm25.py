"""BM25 over chunk texts (the ``bm25s`` library), for ``retrieval.method=bm25`` and ``hybrid``.

Tokens: lower-cased words (hyphenated words and tickers kept whole, a possessive ``'s``
dropped) and figures kept as written (``8.1%``, ``452.2``, ``1,200``), so an exact figure
or ticker in a query matches it in a chunk. English stopwords are removed and words are
Snowball-stemmed (``PyStemmer``), the usual BM25 setup; ``bench/retrieval.py --tokenizers``
compares the variants (on the first 40 ECTSum val calls the plain tokenizer ranked slightly
better, within noise; figures in ``bench/README.md``).

The BM25 index is built in memory from the chunks of a ``SearchIndex`` the first time a run
asks for it (about a second for the ECTSum val corpus); with
``retrieval.contextual_headers=true`` each chunk is indexed with its metadata header.
"""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from arag.records import Chunk

# a figure (digits with . or , inside, an optional %), or a word that may hold - & '
TOKEN = re.compile(r"\d+(?:[.,]\d+)*%?|[a-z][a-z0-9&'-]*[a-z0-9%]|[a-z]")


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer  # PyStemmer

    return Stemmer.Stemmer("english")


@dataclass(frozen=True)
class Tokenizer:
    """Text -> BM25 terms; the same for chunks and queries."""

    stem: bool = True
    stopwords: bool = True

    def __call__(self, text: str) -> list[str]:
        words = [w.removesuffix("'s") for w in TOKEN.findall(text.lower())]
        if self.stopwords:
            stop = _stopwords()
            words = [w for w in words if w not in stop]
        if self.stem:
            stem = _stemmer().stemWord
            words = [w if w[0].isdigit() else stem(w) for w in words]
        return words


DEFAULT_TOKENIZER = Tokenizer()


class Bm25Index:
    """BM25 scores of every chunk for a query, ranked within a set of documents."""

    def __init__(self, chunks: list[Chunk], texts: list[str],
                 tokenizer: Tokenizer = DEFAULT_TOKENIZER):
        import bm25s

        self.tokenizer = tokenizer
        self.chunks = chunks
        self._bm25 = bm25s.BM25()
        self._bm25.index([tokenizer(t) for t in texts], show_progress=False)
        positions: dict[str, list[int]] = {}
        for pos, chunk in enumerate(chunks):
            positions.setdefault(chunk.doc_id, []).append(pos)
        self._doc_positions = {d: np.array(p, dtype="int64") for d, p in positions.items()}

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every chunk (zeros when no query term is in the index)."""
        terms = self.tokenizer(query)
        if not terms:
            return np.zeros(len(self.chunks), dtype="float32")
        return np.asarray(self._bm25.get_scores(terms), dtype="float32")

    def search(self, query: str, top_k: int, doc_ids: list[str] | None = None
               ) -> list[tuple[int, float]]:
        """``(chunk position, score)`` best first (ties: earlier chunk first); chunks that
        share no term with the query are left out."""
        scores = self.scores(query)
        if doc_ids is None:
            scope = np.arange(len(self.chunks), dtype="int64")
        else:
            parts = [self._doc_positions[d] for d in dict.fromkeys(doc_ids)
                     if d in self._doc_positions]
            scope = np.concatenate(parts) if parts else np.zeros(0, dtype="int64")
        scoped = scores[scope]
        order = np.lexsort((scope, -scoped))  # by score descending, then position
        return [(int(scope[i]), float(scoped[i])) for i in order[:top_k] if scoped[i] > 0]

    def best_line(self, pos: int, query: str) -> str:
        """The chunk's line sharing the most terms with the query (a hit's snippet)."""
        terms = set(self.tokenizer(query))
        lines = self.chunks[pos].lines
        return max(lines, key=lambda line: len(terms & set(self.tokenizer(line))))


_BUILT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def bm25_for(index) -> Bm25Index:
    """The BM25 index of a ``SearchIndex``'s chunks (with their headers when the index was
    built with ``contextual_headers``), built on first use and kept with the index."""
    with _LOCK:
        if index not in _BUILT:
            contexts = index.chunk_contexts or {}
            texts = [" ".join(filter(None, (contexts.get(c.chunk_id), c.text if
                                            index.contextual_headers else c.body)))
                     for c in index.chunks]
            _BUILT[index] = Bm25Index(index.chunks, texts)
        return _BUILT[index]
