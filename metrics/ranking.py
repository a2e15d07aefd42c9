"""Ranked-retrieval metrics: Recall@k, MRR@k, nDCG@k, hits.

Every system that declares ``ranks`` gives its ranking of chunks (``System.ranking``, in
``ScoringItem.ranking``); the naive retriever ranks deeper than it reads (``RANK_DEPTH``),
so one pass yields every k. Systems that do not rank get nulls with a reason, as do tasks
without retrieval gold.

The unit of gold is the **gold span**, not the chunk (a page split into five chunks is one
piece of evidence, not five): on a paginated document (FinanceBench) a span is a page that
holds gold lines, ``(doc, page)``; on a document without pages (ECTSum, sample) it is a gold
line, ``(doc, line)``. A chunk covers a span when it contains one of the span's gold lines
(chunk ids carry their line span, ``<doc>#L<first>-<last>``). Duplicate chunk ids in the
list count once, at their first rank. With G the task's gold spans:

    recall_at_k      share of G covered by the top-k chunks
    mrr_at_k         1 / rank of the first chunk that covers any span, within the top k, else 0
    ndcg_at_k        DCG@k / IDCG@k; each span is credited once, at the first chunk that
                     covers it: DCG@k = Σ_{r <= k} new_r / log2(r + 1), new_r = the spans first
                     covered at rank r. IDCG@k: the same sum for the best ordering of the
                     chunks that cover gold (``ScoringItem.gold_chunk_ids``), taken greedily
                     (most new spans first; exact when chunks do not overlap, and the ratio
                     is capped at 1 for ``retrieval.chunk_overlap`` > 0). On paginated
                     documents a chunk lies on one page, so new_r <= 1 and
                     IDCG@k = Σ_{r=1}^{min(|G|, k)} 1/log2(r + 1).
    hit_strict_at_k  1 if a top-k chunk covers a span (is on an evidence page, holds a gold
                     line), else 0
    hit_doc_at_k     1 if a top-k chunk comes from a gold document, else 0. Gold
                     documents: those with at least one gold line; for a task without
                     line gold, the task's own documents (so it is still computed).
    hit_near_page_at_k  1 if a top-k chunk lies within ``metrics.ranking.near_page_tolerance``
                     pages (default 1: the page itself, the one before or the one after) of
                     an evidence page of the same document, else 0: a retriever that lands
                     next to the evidence is told apart from one that misses the filing.
                     Page-gold tasks only (null without pages).

Each record also carries the diagnostics behind these numbers: ``top_hit_ids``, the system's
top chunks (as many as the largest k), and ``gold_hit_ranks``, the 1-based ranks at which
the ranking holds a chunk covering gold (empty: gold nowhere in the ranking). Tasks marked
``answerable=false`` have no evidence to find: every field is null with the reason.

The pages of a document's lines come from ``ScoringItem.line_pages`` (doc_id -> page of
each line of the task's paginated gold documents, ``Document.line_pages``), filled in by
``runners.evaluate``; a document without pages is scored by gold lines.

A system is scored at k only when it ranked at least k chunks (or every chunk of the task's
documents): deeper, every ``*_at_k`` is null with the reason, so no two systems are compared
at unequal depths (an agent that read 5 chunks is not scored at 10 beside a retriever that
ranked 10).

With ``retrieval.scope=corpus`` hit_doc shows whether the retriever even found the right
filing. ks come from ``metrics.ranking.ks`` (default [1, 3, 5, 10]).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arag.config import non_negative, ranged
from metrics.base import (
    Metric,
    Scorer,
    ScorerEnv,
    Scores,
    ScoringItem,
    register_scorer,
    retrieval_unknown,
)
from metrics.retrieval import UNANSWERABLE

DEFAULT_KS = (1, 3, 5, 10)
LINE_METRICS = ("recall", "mrr", "ndcg", "hit_strict")
NEAR_PAGES = 1  # hit_near_page: evidence within this many pages, by default
DIAGNOSTICS = ("gold_hit_ranks", "top_hit_ids")
CHUNK_ID = re.compile(r"(?P<doc>.+)#L(?P<first>\d+)-(?P<last>\d+)")

Span = tuple[str, int]  # (doc_id, page) on a paginated document, else (doc_id, gold line)


def chunk_doc_id(chunk_id: str) -> str:
    """``<doc_id>#L<start>-<end>`` (arag/retrieval/chunking.py) -> doc_id."""
    return chunk_id.rsplit("#L", 1)[0]


class GoldSpans:
    """A task's gold spans, and which of them a chunk covers."""

    def __init__(self, gold_lines: Mapping[str, Sequence[int]],
                 line_pages: Mapping[str, Sequence[int] | None] | None = None):
        line_pages = line_pages or {}
        # doc_id -> gold line -> the span it belongs to
        self.span_of_line: dict[str, dict[int, Span]] = {}
        for doc_id, lines in gold_lines.items():
            pages = line_pages.get(doc_id)
            self.span_of_line[doc_id] = {
                line: (doc_id, pages[line - 1] if pages is not None else line)
                for line in lines}
        self.spans: set[Span] = {s for by_line in self.span_of_line.values()
                                 for s in by_line.values()}

    def covered_by(self, chunk_id: str) -> set[Span]:
        """The gold spans the chunk holds a gold line of (none for an unparsable id)."""
        m = CHUNK_ID.fullmatch(chunk_id)
        by_line = self.span_of_line.get(m["doc"]) if m else None
        if m is None or not by_line:
            return set()
        first, last = int(m["first"]), int(m["last"])
        return {span for line, span in by_line.items() if first <= line <= last}


class GoldPages:
    """A task's evidence pages (paginated gold documents only), and whether a chunk lies
    within ``tolerance`` pages of one."""

    def __init__(self, gold_lines: Mapping[str, Sequence[int]],
                 line_pages: Mapping[str, Sequence[int] | None], tolerance: int = NEAR_PAGES):
        self.tolerance = tolerance
        self.line_pages = {d: p for d, p in line_pages.items() if p is not None}
        self.pages = {doc_id: {self.line_pages[doc_id][line - 1] for line in lines}
                      for doc_id, lines in gold_lines.items()
                      if doc_id in self.line_pages and lines}

    def near(self, chunk_id: str) -> bool:
        m = CHUNK_ID.fullmatch(chunk_id)
        if m is None or m["doc"] not in self.pages:
            return False
        pages, first = self.line_pages[m["doc"]], int(m["first"])
        if not 1 <= first <= len(pages):
            return False
        page = pages[first - 1]  # a chunk lies on one page
        return any(abs(page - p) <= self.tolerance for p in self.pages[m["doc"]])


def newly_covered(covers: Iterable[set[Span]]) -> list[int]:
    """How many spans each rank covers for the first time (its gain)."""
    seen: set[Span] = set()
    gains: list[int] = []
    for spans in covers:
        gains.append(len(spans - seen))
        seen |= spans
    return gains


def ideal_gains(covers: Iterable[set[Span]], depth: int) -> list[int]:
    """Gains of the best ordering of the given chunks (greedy: most new spans first)."""
    pool = [set(c) for c in covers if c]
    seen: set[Span] = set()
    gains: list[int] = []
    while pool and len(gains) < depth:
        best = max(pool, key=lambda c: len(c - seen))
        if not best - seen:
            break
        gains.append(len(best - seen))
        seen |= best
        pool.remove(best)
    return gains


def dcg(gains: Sequence[int], k: int) -> float:
    return sum(g / math.log2(rank + 1) for rank, g in enumerate(gains[:k], start=1))


def recall_at(gains: Sequence[int], n_gold: int, k: int) -> float:
    return sum(gains[:k]) / n_gold


def mrr_at(gains: Sequence[int], k: int) -> float:
    # the first chunk that covers any span covers it first: its gain is the first non-zero
    for rank, g in enumerate(gains[:k], start=1):
        if g:
            return 1.0 / rank
    return 0.0


def ndcg_at(gains: Sequence[int], ideal: Sequence[int], k: int) -> float:
    return min(1.0, dcg(gains, k) / dcg(ideal, k))


def hit_at(ranked: list[str], relevant: Callable[[str], Any], k: int) -> float:
    return 1.0 if any(relevant(cid) for cid in ranked[:k]) else 0.0


def _ranks_all(item: ScoringItem) -> bool:
    """Whether the ranking holds every chunk of the task's documents (a short filing has
    fewer than k chunks: ranking all of them is complete at any depth)."""
    docs = set(item.task.doc_ids)
    own = {cid for cid, chunk in item.chunks.items() if chunk.doc_id in docs}
    return bool(own) and own <= set(item.ranking or [])


def gold_documents(item: ScoringItem) -> set[str]:
    gold = item.task.gold_lines
    if gold is not None:
        with_lines = {d for d, lines in gold.items() if lines}
        if with_lines:
            return with_lines
    return set(item.task.doc_ids)


def gold_hit_ranks(ranked: list[str], gold: GoldSpans) -> list[int]:
    """The 1-based ranks at which the ranking holds a chunk covering gold (each chunk at
    its first rank)."""
    seen: set[str] = set()
    ranks = []
    for rank, chunk_id in enumerate(ranked, start=1):
        if chunk_id not in seen and gold.covered_by(chunk_id):
            ranks.append(rank)
        seen.add(chunk_id)
    return ranks


@dataclass
class RankingOptions:
    # Recall/MRR/nDCG/hit @k of every system that ranks chunks
    ks: list[int] = ranged(factory=lambda: list(DEFAULT_KS), low=1,
                           must="a list of ranks of at least 1 each")
    # hit_near_page: a top chunk within this many pages of the evidence
    near_page_tolerance: int = non_negative(NEAR_PAGES, "pages")


@register_scorer("ranking")
class RankingScorer(Scorer):
    Options = RankingOptions

    @classmethod
    def from_config(cls, options: Any, env: ScorerEnv) -> Scorer:
        return cls(list(options.ks), int(options.near_page_tolerance))

    def __init__(self, ks: Iterable[int] = DEFAULT_KS, near_page_tolerance: int = NEAR_PAGES):
        ks = sorted(set(ks))
        if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
            raise ValueError(f"metrics.ranking.ks must be positive integers (got {ks})")
        if near_page_tolerance < 0:
            raise ValueError("metrics.ranking.near_page_tolerance must be 0 (the evidence page "
                             f"only) or more pages (got {near_page_tolerance})")
        self.near_page_tolerance = near_page_tolerance
        self.ks = ks
        self.line_fields = [f"{m}_at_{k}" for m in LINE_METRICS for k in ks]
        self.doc_fields = [f"hit_doc_at_{k}" for k in ks]
        self.page_fields = [f"hit_near_page_at_{k}" for k in ks]
        self.metrics = [Metric(f, f.replace("_at_", "@"))
                        for f in self.line_fields + self.doc_fields + self.page_fields]

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        return [self.score_one(item) for item in items]

    def score_one(self, item: ScoringItem) -> Scores:
        """Every field at every k; a k deeper than the system ranked is null with the reason
        (an agent that read 5 chunks has no rank 6 to 10: scoring it at 10 beside a
        retriever ranked 10 deep would not compare like with like)."""
        s = self._score_all_depths(item)
        depth = len(dict.fromkeys(item.ranking or []))
        for k in self.ks:
            shallow = [f for f in self.fields if f.endswith(f"_at_{k}")
                       and s.values.get(f) is not None]
            if item.ranking is not None and k > depth and shallow and not _ranks_all(item):
                s.null(shallow, f"the system ranked {depth} chunks, fewer than {k}: it is "
                                f"scored only at depths it ranked")
        return s

    def _score_all_depths(self, item: ScoringItem) -> Scores:
        s = Scores()
        p = item.prediction
        why = (f"skipped: {p.skip_reason}" if p.skipped else f"error: {p.error}" if p.error
               else None if item.task.answerable else UNANSWERABLE) or retrieval_unknown(item)
        if item.ranking is None and why is None:
            why = "this system does not rank chunks (its class declares ranks=False)"
        if why is not None:
            s.null([*self.fields, *DIAGNOSTICS], why)
            return s
        ranked = item.ranking or []
        s.values["top_hit_ids"] = list(dict.fromkeys(ranked))[:max(self.ks)]
        docs = gold_documents(item)
        for k in self.ks:
            s.values[f"hit_doc_at_{k}"] = hit_at(ranked, lambda c: chunk_doc_id(c) in docs, k)
        if item.gold_chunk_ids is None or item.task.gold_lines is None:
            s.null(self.line_fields + self.page_fields + ["gold_hit_ranks"],
                   "the dataset has no retrieval gold for this task")
            return s
        self._near_pages(s, ranked, GoldPages(item.task.gold_lines, item.line_pages,
                                              self.near_page_tolerance))
        gold = GoldSpans(item.task.gold_lines, item.line_pages)
        s.values["gold_hit_ranks"] = gold_hit_ranks(ranked, gold)
        ideal = ideal_gains((gold.covered_by(c) for c in sorted(item.gold_chunk_ids)),
                            max(self.ks))
        if not ideal:
            s.null(self.line_fields, "no gold line of this task falls in any chunk")
            return s
        gains = newly_covered(gold.covered_by(c) for c in ranked)
        for k in self.ks:
            s.values[f"recall_at_{k}"] = recall_at(gains, len(gold.spans), k)
            s.values[f"mrr_at_{k}"] = mrr_at(gains, k)
            s.values[f"ndcg_at_{k}"] = ndcg_at(gains, ideal, k)
            s.values[f"hit_strict_at_{k}"] = hit_at(ranked, gold.covered_by, k)
        return s

    def _near_pages(self, s: Scores, ranked: list[str], pages: GoldPages) -> None:
        if not pages.pages:
            s.null(self.page_fields, "the task's gold is not on pages (its documents have no "
                                     "pages, e.g. earnings-call transcripts)")
            return
        for k in self.ks:
            s.values[f"hit_near_page_at_{k}"] = hit_at(ranked, pages.near, k)
