"""Ranked-retrieval metrics (metrics/ranking.py) against hand-computed values."""

from __future__ import annotations

import dataclasses
import math

import pytest

from arag.records import Prediction, Task
from metrics.base import SCORERS, ScoringItem
from metrics.ranking import RankingScorer, ranked_chunk_ids

DOC, OTHER = "AAN_q3_2021", "ZZZ_q1_2020"


def cid(doc: str, a: int, b: int) -> str:
    return f"{doc}#L{a}-{b}"


def item(ranked: list[str] | None, gold: set[str] | None, *, gold_lines="default",
         system="naive", **pred_fields) -> ScoringItem:
    trace = [{"type": "llm", "name": "complete"}]
    if ranked is not None:
        trace.append({"type": "retrieval", "name": "semantic_search",
                      "arguments": {"query": "q", "top_k": 10}, "result_chunk_ids": ranked})
    pred = Prediction(id="t", source="s", system=system, model="offline", task_type="summarization",
                      question="q", doc_ids=[DOC], ground_truth="r", predicted="an answer",
                      trace=trace, **pred_fields)
    task = Task(id="t", task_type="summarization", doc_ids=(DOC,), question="q", reference="r",
                gold_lines={DOC: (5, 30)} if gold_lines == "default" else gold_lines)
    values = {"prediction": pred, "task": task, "gold_chunk_ids": gold, "context_text": "",
              "target_length": 50, "system_retrieves": True, "system_kind": system}
    names = {f.name for f in dataclasses.fields(ScoringItem)}
    return ScoringItem(**{k: v for k, v in values.items() if k in names})


def score(it: ScoringItem, ks=(1, 3, 5, 10)):
    return RankingScorer(ks).score([it])[0]


# ranking: a non-gold, gold chunk A at rank 2, two non-gold, gold chunk B at rank 5
A, B = cid(DOC, 1, 10), cid(DOC, 25, 34)
RANKED = [cid(DOC, 11, 17), A, cid(DOC, 18, 24), cid(DOC, 40, 50), B, cid(DOC, 51, 60)]
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


def test_perfect_ranking_scores_one_and_gold_counted_once():
    v = score(item([A, A, B, cid(DOC, 11, 17)], GOLD)).values  # A repeated: counted once
    assert v["recall_at_3"] == 1.0 and v["mrr_at_1"] == 1.0
    assert v["ndcg_at_3"] == pytest.approx(1.0) and v["ndcg_at_1"] == 1.0
    # one gold chunk at rank 3: IDCG@k = 1, DCG = 1/log2(4) = 0.5
    v = score(item([cid(DOC, 11, 17), cid(DOC, 18, 24), A], {A})).values
    assert v["ndcg_at_3"] == pytest.approx(0.5) and v["mrr_at_3"] == pytest.approx(1 / 3)


def test_hit_doc_sees_wrong_document_hits():
    ranked = [cid(OTHER, 1, 9), cid(OTHER, 10, 20), A]  # scope=corpus: another filing first
    v = score(item(ranked, GOLD)).values
    assert [v["hit_doc_at_1"], v["hit_doc_at_3"]] == [0.0, 1.0]
    assert [v["hit_strict_at_1"], v["hit_strict_at_3"]] == [0.0, 1.0]


def test_null_with_reason_without_ranked_list_or_gold():
    s = score(item(None, GOLD, system="arag"))
    assert all(v is None for v in s.values.values()) and len(s.values) == 20
    assert "no ranked retrieval list" in s.null_reasons["recall_at_5"]

    s = score(item(RANKED, None, gold_lines=None))
    assert s.values["recall_at_5"] is None and s.values["ndcg_at_1"] is None
    assert "no retrieval gold" in s.null_reasons["mrr_at_3"]
    assert s.values["hit_doc_at_1"] == 1.0  # the task's own documents are still known

    s = score(item(RANKED, set()))
    assert s.values["recall_at_5"] is None
    assert "no gold line" in s.null_reasons["recall_at_5"]

    s = score(item(RANKED, GOLD, skipped=True, skip_reason="too long"))
    assert s.values["hit_doc_at_1"] is None and "too long" in s.null_reasons["hit_doc_at_1"]


def test_first_semantic_search_entry_is_used():
    trace = [{"type": "tool", "name": "keyword_search", "result_chunk_ids": ["x#L1-2"]},
             {"type": "retrieval", "name": "semantic_search", "result_chunk_ids": ["a", "b"]},
             {"type": "retrieval", "name": "semantic_search", "result_chunk_ids": ["c"]}]
    assert ranked_chunk_ids(trace) == ["a", "b"]
    assert ranked_chunk_ids([]) is None


def test_factory_reads_ks_from_config(make_cfg):
    scorer = SCORERS["ranking"](make_cfg())
    assert scorer.ks == [1, 3, 5, 10]
    assert "ndcg_at_10" in scorer.fields and "hit_doc_at_1" in scorer.fields
    assert RankingScorer([5, 2]).fields[:2] == ["recall_at_2", "recall_at_5"]
    with pytest.raises(ValueError, match="positive integers"):
        RankingScorer([0, 3])
