"""BERTScore: bert_score's own scores, one model per process, references embedded once."""

from __future__ import annotations

import pytest
import torch

from arag.records import Prediction, Task
from arag.retrieval import packaged_minilm_path
from metrics.base import ScoringItem
from metrics.bertscore import BertScoreModel, bertscore_model
from metrics.text import BertScoreScorer

REFS = ["q3 revenue rose 8.1 percent to $452.1 million.\nq3 adjusted eps $1.11.",
        "sees fy revenue $1.80 billion to $1.85 billion.",
        "q2 net loss per share $0.12; quarterly dividend of $0.25 per share.",
        "compname reports q4 earnings per share of $2.05."]
SYSTEM_A = ["revenue rose 8 percent to $452 million and adjusted eps was $1.11",
            "we expect full year revenue of $1.80 billion to $1.85 billion",
            "net loss was $0.12 per share",
            "fourth quarter earnings were $2.05 a share, up from $1.90 a year ago, on higher volume"]
SYSTEM_B = ["third quarter revenue grew to $452.1 million",
            "guidance: revenue between $1.80 and $1.85 billion for the year",
            "the board declared a dividend of $0.25 per share",
            "compname reported earnings of $2.05 per share"]


@pytest.fixture(scope="module")
def plain():
    from bert_score import BERTScorer

    return BERTScorer(model_type=packaged_minilm_path(), num_layers=6, device="cpu")


def test_scores_are_bert_scores_bit_for_bit_where_it_pads_nothing(plain):
    # texts of one token length: bert_score's batches then hold no padding either, so every
    # step (tokens, layer, normalisation, greedy matching, [CLS]/[SEP] weights) must agree
    cands = [f"revenue rose {w} percent in the quarter" for w in ("five", "six", "seven", "nine")]
    refs = [f"{w} percent revenue growth in this quarter" for w in ("four", "six", "eight", "ten")]
    lengths = {len(plain._tokenizer.encode(t)) for t in cands + refs}
    assert len(lengths) == 1, lengths
    ours = BertScoreModel(packaged_minilm_path(), 6)
    p, r, f = plain.score(cands, refs, batch_size=3)
    assert ours.score(cands, refs, batch_size=3) == (p.tolist(), r.tolist(), f.tolist())


def test_scores_match_bert_score_on_mixed_lengths_and_do_not_depend_on_what_came_before(plain):
    ours = bertscore_model(packaged_minilm_path(), 6)
    assert bertscore_model(packaged_minilm_path(), 6) is ours, "one model per process"
    a = ours.score(SYSTEM_A, REFS, batch_size=64)
    for got, want in zip(a, plain.score(SYSTEM_A, REFS), strict=True):
        # bert_score pads each batch, which moves its own last bits with the other texts
        assert torch.tensor(got) == pytest.approx(want, abs=1e-6)
    embedded = ours.texts_embedded
    b = ours.score(SYSTEM_B, REFS, batch_size=64)
    assert ours.texts_embedded - embedded == len(SYSTEM_B), "references were embedded again"
    assert b == BertScoreModel(packaged_minilm_path(), 6).score(SYSTEM_B, REFS, batch_size=64)
    assert ours.score(SYSTEM_A, REFS, batch_size=2) == a  # nor on the pair batches' size


def _prediction(i: int, predicted: str | None, error: str | None = None) -> Prediction:
    return Prediction(id=f"t{i}", source="s", system="naive", model="m",
                      task_type="summarization", question="q", doc_ids=["d"],
                      ground_truth=REFS[i], predicted=predicted, error=error)


def test_scorer_scores_answered_tasks_and_nulls_the_rest():
    tasks = [Task(id=f"t{i}", task_type="summarization", doc_ids=("d",), question="q",
                  reference=REFS[i]) for i in range(3)]
    preds = [_prediction(0, SYSTEM_A[0]), _prediction(1, None, "boom"),
             _prediction(2, SYSTEM_A[2])]
    items = [ScoringItem(p, t, None, "", 50, True) for p, t in zip(preds, tasks, strict=True)]
    scores = BertScoreScorer(None, 6).score(items)
    direct = bertscore_model(packaged_minilm_path(), 6).score(
        [SYSTEM_A[0], SYSTEM_A[2]], [REFS[0], REFS[2]], 32)
    assert [scores[0].values["bertscore_f1"], scores[2].values["bertscore_f1"]] == direct[2]
    assert scores[1].values["bertscore_f1"] is None
    assert "boom" in scores[1].null_reasons["bertscore_f1"]
