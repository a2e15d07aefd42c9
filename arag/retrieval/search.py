"""Ranking chunks by ``retrieval.method``, and widening hits with their neighbours.

* ``dense``: the FAISS index, a chunk scored by its best-matching sentence
  (``SearchIndex.semantic_search``);
* ``bm25``: BM25 over chunk texts (``arag.retrieval.bm25``);
* ``hybrid``: weighted reciprocal-rank fusion of both lists,
  ``score(c) = w / (fusion_k + rank_dense(c)) + (1 - w) / (fusion_k + rank_bm25(c))``
  (ranks from 1; a chunk missing from a list gets nothing from it) with
  ``w = retrieval.dense_weight``. Ties go to the chunk that comes first in the index, so
  the fused order is deterministic.

``retrieval.min_score`` drops hits scoring below it (on the method's own scale: cosine of
the best sentence, BM25 score, or fused score), so a weak match is left out rather than
padding the context.

``with_neighbors`` adds the ±N chunks around each hit (same document, nearest first, no
chunk twice) and stops at the context budget, so neighbours count against it like hits.
``with_parents`` is small-to-big retrieval: chunks stay small for matching, and a hit
brings in the other chunks of its parent (``retrieval.parent_chunk_size`` words of
consecutive chunks of one document), within the same budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from arag.config import option_value
from arag.retrieval.bm25 import bm25_for
from arag.retrieval.index import Hit, SearchIndex

FUSION_POOL = 50  # each list fused is at least this deep, so fusion sees past the top few


@dataclass(frozen=True)
class Method:
    """How chunks are ranked (the ``retrieval.method`` part of ``RetrievalConfig``)."""

    name: str = "dense"  # dense | bm25 | hybrid
    fusion_k: int = 60
    dense_weight: float = 0.5
    min_score: float | None = None  # hits below this score are dropped


def rank_chunks(index: SearchIndex, query: str, top_k: int, doc_ids: list[str] | None,
                method: Method = Method()) -> list[Hit]:
    """The ``top_k`` best chunks for ``query`` within ``doc_ids`` (None: every document),
    none scoring below ``method.min_score``."""
    hits = _ranked(index, query, top_k, doc_ids, method)
    if method.min_score is None:
        return hits
    return [h for h in hits if h.score >= method.min_score]


def _ranked(index: SearchIndex, query: str, top_k: int, doc_ids: list[str] | None,
            method: Method) -> list[Hit]:
    if method.name == "dense":
        return index.semantic_search(query, top_k, doc_ids)
    if method.name == "bm25":
        return bm25_hits(index, query, top_k, doc_ids)
    if method.name == "hybrid":
        depth = max(top_k, FUSION_POOL)
        return fuse([index.semantic_search(query, depth, doc_ids),
                     bm25_hits(index, query, depth, doc_ids)],
                    [method.dense_weight, 1.0 - method.dense_weight], method.fusion_k,
                    index)[:top_k]
    raise ValueError(f"retrieval.method={method.name!r}: use dense, bm25 or hybrid")


def bm25_hits(index: SearchIndex, query: str, top_k: int, doc_ids: list[str] | None
              ) -> list[Hit]:
    bm25 = bm25_for(index)
    return [Hit(index.chunks[pos].chunk_id, score, bm25.best_line(pos, query))
            for pos, score in bm25.search(query, top_k, doc_ids)]


def fuse(lists: list[list[Hit]], weights: list[float], fusion_k: int,
         index: SearchIndex) -> list[Hit]:
    """Weighted reciprocal-rank fusion; a hit keeps the snippet of the first list naming it."""
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for hits, weight in zip(lists, weights, strict=True):
        for rank, hit in enumerate(hits, start=1):
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weight / (fusion_k + rank)
            first.setdefault(hit.chunk_id, hit)
    position = index.positions
    ranked = sorted(scores, key=lambda cid: (-scores[cid], position.get(cid, len(position))))
    return [Hit(cid, scores[cid], first[cid].snippet) for cid in ranked]


def with_neighbors(index: SearchIndex, chunk_ids: list[str], neighbors: int, budget: int
                   ) -> list[str]:
    """Each hit, then its neighbours within ``neighbors`` chunks of the same document
    (nearest first, the earlier one first at equal distance), until ``budget`` chunks; each
    hit's group is returned in document order, groups in the order of their hits."""
    position = index.positions
    taken: set[str] = set()
    out: list[str] = []
    for cid in chunk_ids:
        if len(taken) >= budget:
            break
        if cid in taken or cid not in position:
            continue
        pos, doc = position[cid], index.by_id[cid].doc_id
        group = [pos]
        for step in range(1, neighbors + 1):
            group += [p for p in (pos - step, pos + step) if 0 <= p < len(index.chunks)
                      and index.chunks[p].doc_id == doc]
        chosen = []
        for p in group:
            chunk_id = index.chunks[p].chunk_id
            if chunk_id not in taken and len(taken) < budget:
                taken.add(chunk_id)
                chosen.append(p)
        out += [index.chunks[p].chunk_id for p in sorted(chosen)]
    return out


def parent_groups(index: SearchIndex, parent_chunk_size: int) -> dict[str, list[str]]:
    """chunk id -> the chunks of its parent: consecutive chunks of one document (index
    order) grouped while their words fit ``parent_chunk_size`` (a chunk longer than that is
    a parent of its own)."""
    groups: dict[str, list[str]] = {}
    current: list[str] = []
    words, doc = 0, None
    for chunk in index.chunks:
        size = sum(len(line.split()) for line in chunk.lines)
        if current and (chunk.doc_id != doc or words + size > parent_chunk_size):
            current, words = [], 0
        current.append(chunk.chunk_id)
        groups[chunk.chunk_id] = current
        words, doc = words + size, chunk.doc_id
    return groups


def with_parents(index: SearchIndex, chunk_ids: list[str], parent_chunk_size: int,
                 budget: int) -> list[str]:
    """Small-to-big: each hit's whole parent (its chunks in document order), parents in
    the order of their hits, until ``budget`` chunks."""
    groups = parent_groups(index, parent_chunk_size)
    out: list[str] = []
    for cid in chunk_ids:
        for member in groups.get(cid, []):
            if len(out) >= budget:
                return out
            if member not in out:
                out.append(member)
    return out


@dataclass(frozen=True)
class RetrievalSettings:
    """What a retrieving system does beyond chunking (``RetrievalConfig``'s query side)."""

    method: Method = Method()
    neighbors: int = 0
    rerank: bool = False
    rerank_candidates: int = 20
    hyde: bool = False
    context_budget: int | None = None  # None: the system's top_k
    cross_encoder_path: str | None = None  # rerank with this local CrossEncoder
    parent_chunk_size: int | None = None  # small-to-big: a hit brings in its parent

    @property
    def reranks(self) -> bool:
        return self.rerank or self.cross_encoder_path is not None

    @classmethod
    def from_config(cls, cfg) -> RetrievalSettings:
        rerank = option_value(cfg.rerank)
        return cls(Method(option_value(cfg.method), cfg.fusion_k, cfg.dense_weight,
                          cfg.min_score), cfg.neighbors,
                   rerank == "model", cfg.rerank_candidates, bool(cfg.hyde),
                   cfg.context_budget,
                   cfg.reranker_path if rerank == "cross_encoder" else None,
                   cfg.parent_chunk_size)

