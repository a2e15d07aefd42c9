"""Ranked-retrieval metrics of the naive retriever: Recall@k, MRR@k, nDCG@k, hits.

The naive system ranks deeper than it reads (``RANK_DEPTH``) and records the full ranked
list in its trace as ``{"type": "retrieval", "name": "semantic_search",
"result_chunk_ids": [...]}``; these metrics score that list, so one pass yields every k.
Systems without a ranked list (A-RAG reads in its own order, stuffing reads everything)
get nulls with a reason, as do tasks without retrieval gold.

Definitions (binary relevance; a chunk is relevant when it contains a gold line, i.e. it
is in ``ScoringItem.gold_chunk_ids``; duplicate ids in the list count once, at their
first rank):

    recall_at_k      |top-k ∩ gold| / |gold|
    mrr_at_k         1 / rank of the first relevant chunk within the top k, else 0
    ndcg_at_k        DCG@k / IDCG@k, DCG = Σ_{relevant rank r <= k} 1/log2(r + 1),
                     IDCG = Σ_{r=1}^{min(|gold|, k)} 1/log2(r + 1)
    hit_strict_at_k  1 if any top-k chunk contains a gold line, else 0
    hit_doc_at_k     1 if any top-k chunk comes from a gold document, else 0. Gold
                     documents: those with at least one gold line; for a task without
                     line gold, the task's own documents (so it is still computed).

With ``retrieval.scope=corpus`` hit_doc shows whether the retriever even found the right
filing. ks come from ``metrics.ranking.ks`` (default [1, 3, 5, 10]).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from omegaconf import OmegaConf

from metrics.base import Scorer, Scores, ScoringItem, register_scorer

DEFAULT_KS = (1, 3, 5, 10)
LINE_METRICS = ("recall", "mrr", "ndcg", "hit_strict")


def ranked_chunk_ids(trace: Iterable[dict[str, Any]]) -> list[str] | None:
    """The first semantic_search ranking in a prediction's trace (deduplicated), or None."""
    for entry in trace or []:
        if (isinstance(entry, dict) and entry.get("type") == "retrieval"
                and entry.get("name") == "semantic_search"
                and isinstance(entry.get("result_chunk_ids"), list)):
            return list(dict.fromkeys(entry["result_chunk_ids"]))
    return None


def chunk_doc_id(chunk_id: str) -> str:
    """``<doc_id>#L<start>-<end>`` (arag/retrieval/chunking.py) -> doc_id."""
    return chunk_id.rsplit("#L", 1)[0]


def recall_at(ranked: list[str], gold: set[str], k: int) -> float:
    return len(set(ranked[:k]) & gold) / len(gold)


def mrr_at(ranked: list[str], gold: set[str], k: int) -> float:
    for rank, cid in enumerate(ranked[:k], start=1):
        if cid in gold:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranked: list[str], gold: set[str], k: int) -> float:
    dcg = sum(1.0 / math.log2(rank + 1)
              for rank, cid in enumerate(ranked[:k], start=1) if cid in gold)
    idcg = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(gold), k) + 1))
    return dcg / idcg


def hit_at(ranked: list[str], relevant, k: int) -> float:
    return 1.0 if any(relevant(cid) for cid in ranked[:k]) else 0.0


def gold_documents(item: ScoringItem) -> set[str]:
    gold = item.task.gold_lines
    if gold is not None:
        with_lines = {d for d, lines in gold.items() if lines}
        if with_lines:
            return with_lines
    return set(item.task.doc_ids)


class RankingScorer(Scorer):
    name = "ranking"

    def __init__(self, ks: Iterable[int] = DEFAULT_KS):
        ks = sorted(set(ks))
        if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
            raise ValueError(f"metrics.ranking.ks must be positive integers (got {ks})")
        self.ks = ks
        self.line_fields = [f"{m}_at_{k}" for m in LINE_METRICS for k in ks]
        self.doc_fields = [f"hit_doc_at_{k}" for k in ks]
        self.fields = self.line_fields + self.doc_fields

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        return [self.score_one(item) for item in items]

    def score_one(self, item: ScoringItem) -> Scores:
        s = Scores()
        p = item.prediction
        if p.skipped or p.error:
            s.null(self.fields, f"skipped: {p.skip_reason}" if p.skipped else f"error: {p.error}")
            return s
        ranked = ranked_chunk_ids(p.trace)
        if ranked is None:
            s.null(self.fields, "no ranked retrieval list in the trace (only the naive "
                                "retriever records one; A-RAG and stuffing do not rank)")
            return s
        docs = gold_documents(item)
        for k in self.ks:
            s.values[f"hit_doc_at_{k}"] = hit_at(ranked, lambda c: chunk_doc_id(c) in docs, k)
        gold = item.gold_chunk_ids
        if gold is None:
            s.null(self.line_fields, "the dataset has no retrieval gold for this task")
        elif not gold:
            s.null(self.line_fields, "no gold line of this task falls in any chunk")
        else:
            for k in self.ks:
                s.values[f"recall_at_{k}"] = recall_at(ranked, gold, k)
                s.values[f"mrr_at_{k}"] = mrr_at(ranked, gold, k)
                s.values[f"ndcg_at_{k}"] = ndcg_at(ranked, gold, k)
                s.values[f"hit_strict_at_{k}"] = hit_at(ranked, gold.__contains__, k)
        return s


@register_scorer("ranking")
def _ranking(cfg: Any, **_: Any) -> Scorer:
    ks = OmegaConf.select(cfg, "metrics.ranking.ks", default=None) if cfg is not None else None
    return RankingScorer(list(ks) if ks is not None else DEFAULT_KS)
