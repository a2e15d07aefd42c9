"""The one-shot retriever behind naive RAG: optional HyDE, a search by ``retrieval.method``
(hits under ``retrieval.min_score`` dropped), optional reranking (by the run's model or a
local cross-encoder), then neighbours or parent chunks (small-to-big) within the context
budget.

Every step is a traced call: model calls (HyDE, rerank) through the task's call log (costed,
cached), searches as ``Retrieval`` steps. The last ``Retrieval`` step is the system's
ranking (``NaiveRAG.ranking``): the ranked chunks, reordered by the reranker, widened by
neighbours, ``RANK_DEPTH`` deep at least.
"""

from __future__ import annotations

from dataclasses import dataclass

from arag.calls import CallLog
from arag.records import Task
from arag.retrieval.cross_encoder import cross_rerank
from arag.retrieval.index import Hit
from arag.retrieval.query import hyde_query, hyde_request, rerank_request, reranked
from arag.retrieval.search import rank_chunks, with_neighbors, with_parents
from arag.systems.base import SystemContext

RANK_DEPTH = 10


@dataclass
class Retrieved:
    ranking: list[str]  # best first, RANK_DEPTH deep at least (neighbours included)
    context: list[str]  # what the model gets: top_k hits and neighbours, within the budget


def retrieve(ctx: SystemContext, task: Task, calls: CallLog) -> Retrieved:
    settings, index = ctx.retrieval, ctx.index()
    query = task.question
    if settings.hyde:
        query = hyde_query(task.question, calls.complete(**hyde_request(task.question)).text)
    # rank deeper than k once, so Recall@k/MRR@k/nDCG@k come from the same pass
    depth = max(ctx.top_k, RANK_DEPTH, settings.rerank_candidates if settings.reranks else 0)
    method = settings.method
    name = "semantic_search" if method.name == "dense" else f"{method.name}_search"
    hits = calls.retrieve(name, {"query": query, "top_k": depth, "method": method.name},
                          lambda: rank_chunks(index, query, depth, ctx.scope_doc_ids(task),
                                              method))
    if settings.rerank and hits:
        pool = hits[:settings.rerank_candidates]
        reply = calls.complete(**rerank_request(task.question, pool, index)).text
        order = reranked(reply, pool) + hits[len(pool):]
        hits = calls.retrieve("rerank", {"candidates": len(pool)}, lambda: order)
    elif settings.cross_encoder_path and hits:
        pool, path = hits[:settings.rerank_candidates], settings.cross_encoder_path
        rest = hits[len(pool):]
        hits = calls.retrieve("cross_encoder_rerank", {"candidates": len(pool), "model": path},
                              lambda: cross_rerank(path, task.question, pool, index) + rest)
    ranked = [h.chunk_id for h in hits]
    if settings.parent_chunk_size:
        size = settings.parent_chunk_size
        context = with_parents(index, ranked[:ctx.top_k], size, ctx.budget)
        widened = with_parents(index, ranked, size, max(RANK_DEPTH, ctx.budget))
        calls.retrieve("parents", {"parent_chunk_size": size},
                       lambda: [Hit(cid, 0.0, "") for cid in widened])
        return Retrieved(widened, context)
    context = with_neighbors(index, ranked[:ctx.top_k], settings.neighbors, ctx.budget)
    if settings.neighbors:
        widened = with_neighbors(index, ranked, settings.neighbors, max(RANK_DEPTH, ctx.budget))
        calls.retrieve("neighbors", {"neighbors": settings.neighbors},
                       lambda: [Hit(cid, 0.0, "") for cid in widened])
        ranked = widened
    return Retrieved(ranked, context)
