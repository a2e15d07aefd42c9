"""Ranked-retrieval metrics (metrics/ranking.py) against hand-computed values: gold spans
(evidence pages, or gold lines of documents without pages), each counted once."""

from __future__ import annotations

import dataclasses
import math

import pytest

from arag.records import Prediction, Task
from arag.systems import SYSTEMS, AgenticRAG, NaiveRAG
from arag.trace import Retrieval, ToolCall
from metrics.base import SCORERS, ScorerEnv, ScoringItem
from metrics.ranking import RankingScorer

DOC, OTHER = "AAN_q3_2021", "ZZZ_q1_2020"


def cid(doc: str, a: int, b: int) -> str:
    return f"{doc}#L{a}-{b}"


def item(ranked: list[str] | None, gold: set[str] | None, *, gold_lines="default",
         system="naive", **pred_fields) -> ScoringItem:
    """A task scored as its system would be: the system class declares the ranking."""
    trace: list = []
    if ranked is not None:
        trace.append(Retrieval("semantic_search", {"query": "q", "top_k": 10}, ranked))
    pred = Prediction(id="t", source="s", system=system, model="offline", task_type="summarization",
                      question="q", doc_ids=[DOC], ground_truth="r", predicted="an answer",
                      trace=trace, **pred_fields)
    task = Task(id="t", task_type="summarization", doc_ids=(DOC,), question="q", reference="r",
                gold_lines={DOC: (5, 30)} if gold_lines == "default" else gold_lines)
    cls = SYSTEMS[system]
    return ScoringItem(pred, task, gold, "", 50, cls.retrieves,
                       ranking=cls.ranking(pred) if cls.ranks else None)


def with_pages(it: ScoringItem, line_pages: dict) -> ScoringItem:
    return dataclasses.replace(it, line_pages=line_pages)


def score(it: ScoringItem, ks=(1, 3, 5, 10)):
    return RankingScorer(ks).score([it])[0]


# gold lines 5 and 30 (no pages: each line is a gold span), in chunks A and B.
# ranking (10 deep): a non-gold, gold chunk A at rank 2, two non-gold, gold chunk B at rank 5
A, B = cid(DOC, 1, 10), cid(DOC, 25, 34)
RANKED = [cid(DOC, 11, 17), A, cid(DOC, 18, 24), cid(DOC, 40, 50), B, cid(DOC, 51, 60),
          *(cid(DOC, 61 + 10 * i, 70 + 10 * i) for i in range(4))]
GOLD = {A, B}


def test_hand_computed_values():
    v = score(item(RANKED, GOLD)).values
    assert v["recall_at_1"] == 0.0
    assert v["recall_at_3"] == 0.5
    assert v["recall_at_5"] == 1.0
    assert v["recall_at_10"] == 1.0
    assert v["mrr_at_1"] == 0.0
    assert v["mrr_at_3"] == v["mrr_at_5"] == v["mrr_at_10"] == 0.5
    # nDCG@3: DCG = 1/log2(3); IDCG = 1 + 1/log2(3)
    assert v["ndcg_at_3"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    # nDCG@5: DCG = 1/log2(3) + 1/log2(6)
    assert v["ndcg_at_5"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(6))
                                           / (1 + 1 / math.log2(3)))
    assert v["ndcg_at_5"] == pytest.approx(0.6241, abs=1e-4)
    assert v["ndcg_at_1"] == 0.0
    assert [v[f"hit_strict_at_{k}"] for k in (1, 3, 5, 10)] == [0.0, 1.0, 1.0, 1.0]
    assert [v[f"hit_doc_at_{k}"] for k in (1, 3, 5, 10)] == [1.0, 1.0, 1.0, 1.0]


def test_a_ranking_is_scored_only_at_depths_it_reaches():
    """An agent that read 5 chunks has no rank 6-10: recall@10 and nDCG@10 are null with the
    reason, not a number that sits beside a 10-deep retriever's as if comparable."""
    scores = score(item(RANKED[:5], GOLD))
    assert scores.values["recall_at_5"] == 1.0 and scores.values["ndcg_at_5"] is not None
    for field in ("recall_at_10", "ndcg_at_10", "mrr_at_10", "hit_strict_at_10",
                  "hit_doc_at_10"):
        assert scores.values[field] is None
        assert "ranked 5 chunks, fewer than 10" in scores.null_reasons[field]
    assert score(item(RANKED, GOLD)).values["recall_at_10"] == 1.0


def test_perfect_ranking_scores_one_and_gold_counted_once():
    v = score(item([A, A, B, cid(DOC, 11, 17)], GOLD)).values  # A repeated: counted once
    assert v["recall_at_3"] == 1.0 and v["mrr_at_1"] == 1.0
    assert v["ndcg_at_3"] == pytest.approx(1.0) and v["ndcg_at_1"] == 1.0
    # one gold line, in A, at rank 3: IDCG@k = 1, DCG = 1/log2(4) = 0.5
    v = score(item([cid(DOC, 11, 17), cid(DOC, 18, 24), A], {A}, gold_lines={DOC: (5,)})).values
    assert v["ndcg_at_3"] == pytest.approx(0.5) and v["mrr_at_3"] == pytest.approx(1 / 3)
    assert v["recall_at_3"] == 1.0


# a 40-line filing: page 1 = L1-10, page 2 = L11-25, page 3 = L26-30, page 4 = L31-40;
# evidence pages 2 and 4 (gold = every line on them), split into 3 and 2 chunks
PAGES = {DOC: (1,) * 10 + (2,) * 15 + (3,) * 5 + (4,) * 10}
PAGE_GOLD_LINES = {DOC: tuple(range(11, 26)) + tuple(range(31, 41))}
P1A, P1B = cid(DOC, 1, 5), cid(DOC, 6, 10)
P2A, P2B, P2C = cid(DOC, 11, 15), cid(DOC, 16, 20), cid(DOC, 21, 25)
P3, P4A, P4B = cid(DOC, 26, 30), cid(DOC, 31, 35), cid(DOC, 36, 40)
PAGE_GOLD = {P2A, P2B, P2C, P4A, P4B}


def paged(ranked: list[str]) -> ScoringItem:
    return with_pages(item(ranked, PAGE_GOLD, gold_lines=PAGE_GOLD_LINES), PAGES)


def test_an_evidence_page_is_one_gold_span_however_many_chunks_it_has():
    # gains by rank: 0, 1 (page 2), 0 (page 2 again), 0, 1 (page 4), 0, 0, 0
    v = score(paged([P1A, P2A, P2B, P3, P4B, P1B, P2C, P4A])).values
    # 8 chunks ranked: nothing at 10
    assert [v[f"recall_at_{k}"] for k in (1, 3, 5, 10)] == [0.0, 0.5, 1.0, None]
    assert [v[f"mrr_at_{k}"] for k in (1, 3, 5, 10)] == [0.0, 0.5, 0.5, None]
    # two spans: IDCG@k = 1 + 1/log2(3) for k >= 2; DCG@5 = 1/log2(3) + 1/log2(6)
    idcg = 1 + 1 / math.log2(3)
    assert v["ndcg_at_1"] == 0.0
    assert v["ndcg_at_3"] == pytest.approx((1 / math.log2(3)) / idcg)  # 0.3869
    assert v["ndcg_at_5"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(6)) / idcg)
    assert v["ndcg_at_5"] == pytest.approx(0.6241, abs=1e-4)
    assert [v[f"hit_strict_at_{k}"] for k in (1, 3, 5, 10)] == [0.0, 1.0, 1.0, None]
    assert [v[f"hit_doc_at_{k}"] for k in (1, 3, 5, 10)] == [1.0, 1.0, 1.0, None]

    # all three chunks of page 2 first: one span found, not three (per chunk: recall 3/5)
    v = score(paged([P2A, P2B, P2C, P4A, P1A])).values
    assert v["recall_at_3"] == 0.5 and v["mrr_at_1"] == 1.0
    assert v["ndcg_at_3"] == pytest.approx(1 / idcg)  # 0.6131
    assert v["recall_at_5"] == 1.0
    assert v["ndcg_at_5"] == pytest.approx((1 + 1 / math.log2(5)) / idcg)  # 0.8772
    # one page per rank is the ideal ranking
    v = score(paged([P4B, P2C, P1A])).values
    assert v["ndcg_at_3"] == pytest.approx(1.0) and v["recall_at_1"] == 0.5


def test_near_page_hit_tells_the_next_page_from_a_miss():
    # evidence on page 2 only (L11-25): page 1 and page 3 are near, page 4 is not
    one_page = {DOC: tuple(range(11, 26))}

    def near(ranked: list[str]) -> list[float]:
        it = with_pages(item(ranked, {P2A, P2B, P2C}, gold_lines=one_page), PAGES)
        v = score(it).values
        return [v[f"hit_near_page_at_{k}"] for k in (1, 3, 5, 10)]

    # (None: deeper than the ranking goes)
    assert near([P4A, P3, P2A]) == [0.0, 1.0, None, None]  # page 3 is next to page 2
    assert near([P1B, P4A]) == [1.0, None, None, None]  # page 1 is the one before
    assert near([P4A, P4B, cid(OTHER, 11, 15)]) == [0.0, 0.0, None, None]  # two pages off
    v = score(with_pages(item([P4A, P3, P1A], {P2A, P2B, P2C}, gold_lines=one_page),
                         PAGES)).values
    assert v["hit_strict_at_3"] == 0.0 and v["hit_near_page_at_3"] == 1.0


def test_near_page_hit_is_null_without_pages():
    s = score(item(RANKED, GOLD))
    assert s.values["hit_near_page_at_5"] is None
    assert "not on pages" in s.null_reasons["hit_near_page_at_5"]


def test_without_pages_the_gold_lines_are_the_spans():
    # the same ranking with no pages given: 25 gold lines, 5 in each gold chunk
    it = item([P1A, P2A, P2B, P3, P4B], PAGE_GOLD, gold_lines=PAGE_GOLD_LINES)
    v = score(it).values
    assert [v["recall_at_1"], v["recall_at_3"], v["recall_at_5"]] == [0.0, 0.4, 0.6]


def test_a_chunk_with_several_gold_lines_credits_each_once():
    # gold lines 5, 7 (both in A) and 30 (in B): gains by rank 1 (B), 0, 2 (A)
    it = item([B, cid(DOC, 11, 17), A, B], GOLD, gold_lines={DOC: (5, 7, 30)})
    v = score(it).values
    assert v["recall_at_1"] == pytest.approx(1 / 3) and v["recall_at_3"] == 1.0
    assert v["mrr_at_1"] == 1.0
    # ideal: A (2 lines) then B: IDCG@1 = 2, IDCG@3 = 2 + 1/log2(3); DCG@3 = 1 + 2/log2(4)
    assert v["ndcg_at_1"] == 0.5
    assert v["ndcg_at_3"] == pytest.approx(2 / (2 + 1 / math.log2(3)))  # 0.7602


def test_ndcg_is_capped_at_one_when_overlapping_chunks_beat_the_greedy_ideal():
    # gold lines 1-6; with chunk_overlap the chunks L2-5, L1-3, L4-6 exist. Greedy ideal:
    # L2-5 (4 new lines) then 1: IDCG@2 = 4 + 1/log2(3); L1-3, L4-6 reach 3 + 3/log2(3)
    wide, left, right = cid(DOC, 2, 5), cid(DOC, 1, 3), cid(DOC, 4, 6)
    it = item([left, right], {wide, left, right}, gold_lines={DOC: (1, 2, 3, 4, 5, 6)})
    v = score(it, ks=(2,)).values
    assert v["recall_at_2"] == 1.0 and v["ndcg_at_2"] == 1.0


def test_hit_doc_sees_wrong_document_hits():
    ranked = [cid(OTHER, 1, 9), cid(OTHER, 10, 20), A]  # scope=corpus: another filing first
    v = score(item(ranked, GOLD)).values
    assert [v["hit_doc_at_1"], v["hit_doc_at_3"]] == [0.0, 1.0]
    assert [v["hit_strict_at_1"], v["hit_strict_at_3"]] == [0.0, 1.0]


def test_null_with_reason_without_ranked_list_or_gold():
    s = score(item(None, GOLD, system="stuffing"))
    assert all(v is None for v in s.values.values()) and len(s.values) == 24 + 2  # 6 metrics x 4 ks, 2 lists
    assert "does not rank" in s.null_reasons["recall_at_5"]

    s = score(item(RANKED, None, gold_lines=None))
    assert s.values["recall_at_5"] is None and s.values["ndcg_at_1"] is None
    assert "no retrieval gold" in s.null_reasons["mrr_at_3"]
    assert s.values["hit_doc_at_1"] == 1.0  # the task's own documents are still known

    s = score(item(RANKED, set()))
    assert s.values["recall_at_5"] is None
    assert "no gold line" in s.null_reasons["recall_at_5"]

    s = score(item(RANKED, GOLD, skipped=True, skip_reason="too long"))
    assert s.values["hit_doc_at_1"] is None and "too long" in s.null_reasons["hit_doc_at_1"]


def test_naive_ranking_is_its_last_retrieval_deduplicated():
    def ranking(trace):
        pred = Prediction(id="t", source="s", system="naive", model="m", task_type="qa",
                          question="q", doc_ids=[], ground_truth="", trace=trace)
        return NaiveRAG.ranking(pred)

    # the search, then the reranked list: the final order is the ranking
    trace = [ToolCall("keyword_search", {}, ["x#L1-2"], False, None, 0.0, 0.0),
             Retrieval("semantic_search", {}, ["a", "b", "c"]),
             Retrieval("rerank", {}, ["c", "a", "c", "b"])]
    assert ranking(trace) == ["c", "a", "b"]
    assert ranking([]) is None


def test_arag_ranks_the_chunks_in_the_order_it_first_read_them():
    read = [A, cid(DOC, 11, 17), A, B]  # A read again later counts once, at rank 1
    pred = Prediction(id="t", source="s", system="arag", model="m", task_type="qa",
                      question="q", doc_ids=[DOC], ground_truth="", retrieved_chunk_ids=read)
    assert AgenticRAG.ranks and AgenticRAG.ranking(pred) == [A, cid(DOC, 11, 17), B]
    it = dataclasses.replace(item(None, GOLD, system="arag"), ranking=AgenticRAG.ranking(pred))
    v = score(it).values
    assert v["mrr_at_3"] == 1.0 and v["recall_at_3"] == 1.0 and v["recall_at_1"] == 0.5


def test_factory_reads_ks_from_config(make_cfg):
    cfg = make_cfg()
    scorer = SCORERS["ranking"].from_config(cfg.metrics.ranking, ScorerEnv())
    assert scorer.ks == [1, 3, 5, 10]
    assert "ndcg_at_10" in scorer.fields and "hit_doc_at_1" in scorer.fields
    assert RankingScorer([5, 2]).fields[:2] == ["recall_at_2", "recall_at_5"]
    with pytest.raises(ValueError, match="positive integers"):
        RankingScorer([0, 3])


def test_a_ranking_of_every_chunk_of_a_short_document_is_complete_at_any_depth():
    from arag.records import Chunk

    chunks = {c: Chunk(c, DOC, 1, 1, "", ("text",)) for c in RANKED[:6]}
    it = dataclasses.replace(item(RANKED[:6], GOLD), chunks=chunks)
    assert score(it).values["recall_at_10"] == 1.0  # nothing left to rank below 6


def test_each_record_names_its_top_hits_and_the_ranks_that_hold_gold():
    v = score(item(RANKED + [A], GOLD), ks=(1, 3)).values
    assert v["top_hit_ids"] == RANKED[:3]  # as many as the largest k
    assert v["gold_hit_ranks"] == [2, 5]  # A again at rank 7 counts once, at its first rank
    missed = score(item([cid(DOC, 11, 17)], GOLD)).values
    assert missed["gold_hit_ranks"] == [] and missed["top_hit_ids"] == [cid(DOC, 11, 17)]
    no_gold = score(item(RANKED, None, gold_lines=None))
    assert no_gold.values["gold_hit_ranks"] is None and no_gold.values["top_hit_ids"]


def test_unanswerable_tasks_are_not_scored_for_retrieval():
    from metrics.retrieval import RetrievalScorer

    it = item(RANKED, GOLD)
    it.task = dataclasses.replace(it.task, answerable=False)
    for scores in (score(it), RetrievalScorer().score([it])[0]):
        assert all(v is None for v in scores.values.values())
        assert "answerable=false" in scores.null_reasons["recall_at_1" if "recall_at_1" in
                                                         scores.values else "retrieval_recall"]


def test_near_page_tolerance_comes_from_config(make_cfg):
    one_page = {DOC: tuple(range(11, 26))}  # evidence on page 2; P4A is two pages off
    it = with_pages(item([P4A], {P2A, P2B, P2C}, gold_lines=one_page), PAGES)
    assert score(it).values["hit_near_page_at_1"] == 0.0
    cfg = make_cfg("metrics.ranking.near_page_tolerance=2")
    wider = SCORERS["ranking"].from_config(cfg.metrics.ranking, ScorerEnv())
    assert wider.score([it])[0].values["hit_near_page_at_1"] == 1.0
    exact = RankingScorer(near_page_tolerance=0).score([with_pages(
        item([P3], {P2A}, gold_lines=one_page), PAGES)])[0]
    assert exact.values["hit_near_page_at_1"] == 0.0  # page 3 is not page 2
    with pytest.raises(ValueError, match="near_page_tolerance"):
        RankingScorer(near_page_tolerance=-1)
