"""Judge-free metrics: exact values from the libraries, nulls with reasons, aggregates."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf
from rouge_score import rouge_scorer

from arag.records import Prediction, Task
from metrics import ScorerEnv, ScoringItem, aggregate, build_scorers
from metrics.retrieval import LengthScorer, RetrievalScorer, precision_recall

REF = "q3 revenue rose 8.1 percent to $452.2 million.\nq3 adjusted eps $1.12."


def _item(predicted="q3 revenue rose 8.1 percent to $452.2 million.", gold=frozenset({"a", "b"}),
          read=("a", "c"), retrieves=True, **pred_fields):
    task = Task("t1", "summarization", ("D",), "Summarize.", REF)
    pred = Prediction(id="t1", source="s", system="x", model="m", task_type="summarization",
                      question="Summarize.", doc_ids=["D"], ground_truth=REF, predicted=predicted,
                      retrieved_chunk_ids=list(read), **pred_fields)
    return ScoringItem(pred, task, set(gold) if gold is not None else None, "ctx", 50, retrieves)


def test_rouge_matches_rouge_score_with_stemming():
    cfg = OmegaConf.create({"metrics": {"scorers": ["rouge"], "rouge": {"use_stemmer": True}}})
    (scorer,) = build_scorers(cfg.metrics, ScorerEnv())
    item = _item()
    got = scorer.score([item])[0].values
    want = rouge_scorer.RougeScorer(["rouge2"], use_stemmer=True).score(REF, item.prediction.predicted)
    assert got["rouge2_f1"] == pytest.approx(want["rouge2"].fmeasure)
    assert 0 < got["rouge1_f1"] < 1


def test_bertscore_on_the_local_minilm_ranks_paraphrase_over_unrelated():
    cfg = OmegaConf.create({"metrics": {"scorers": ["bertscore"], "bertscore": {
        "model_path": None, "num_layers": 6, "batch_size": 8}}})
    (scorer,) = build_scorers(cfg.metrics, ScorerEnv())
    same, close, far = scorer.score([_item(predicted=REF),
                                     _item(predicted="revenue grew 8.1% to $452.2 million"),
                                     _item(predicted="the weather was sunny in paris")])
    assert same.values["bertscore_f1"] == pytest.approx(1.0, abs=1e-4)
    assert close.values["bertscore_f1"] > far.values["bertscore_f1"] + 0.2


def test_retrieval_precision_recall_and_nulls_with_reasons():
    assert precision_recall(["a", "c"], {"a", "b"}) == (0.5, 0.5)
    assert precision_recall(["a", "b", "a"], {"a", "b"}) == (1.0, 1.0)
    scorer = RetrievalScorer()
    read_all, missed, stuffing, no_gold, skipped = scorer.score([
        _item(read=("a", "b")), _item(read=("a",)), _item(retrieves=False), _item(gold=None),
        _item(skipped=True, skip_reason="too long"),
    ])
    assert read_all.values["retrieval_recall"] == 1.0
    assert missed.values["retrieval_recall"] == 0.5
    assert stuffing.values["retrieval_recall"] is None
    assert "does not retrieve" in stuffing.null_reasons["retrieval_recall"]
    assert no_gold.values["retrieval_precision"] is None and "no retrieval gold" in \
        no_gold.null_reasons["retrieval_precision"]
    assert "too long" in skipped.null_reasons["retrieval_recall"]


def test_length_ratio_against_target():
    (s,) = LengthScorer().score([_item(predicted="one two three four five")])
    assert s.values == {"word_count": 5.0, "length_ratio": 0.1}


def test_aggregate_means_ignore_nulls_and_count_errors_and_skips():
    records = [
        {"id": "a", "rouge2_f1": 0.2, "latency_ms": 100.0, "cost_usd": 0.01, "error": None,
         "skipped": False, "retrieval_recall": None},
        {"id": "b", "rouge2_f1": 0.4, "latency_ms": 300.0, "cost_usd": 0.03, "error": None,
         "skipped": False, "retrieval_recall": 1.0},
        {"id": "c", "rouge2_f1": None, "latency_ms": 5.0, "cost_usd": 0.0, "error": "boom",
         "skipped": False},
        {"id": "d", "rouge2_f1": None, "latency_ms": 0.0, "cost_usd": 0.0, "error": None,
         "skipped": True},
    ]
    m = aggregate(records)
    assert m["n_tasks"] == 4 and m["n_errors"] == 1 and m["n_skipped"] == 1
    assert m["rouge2_f1_mean"] == pytest.approx(0.3)
    assert m["retrieval_recall_mean"] == 1.0
    assert m["latency_ms_p50"] == pytest.approx(200.0)
    assert m["cost_usd_total"] == pytest.approx(0.04)
    assert m["rouge2_f1_ci_low"] <= 0.3 <= m["rouge2_f1_ci_high"]
    assert m["rouge2_f1_ci_low"] >= 0.2 and m["rouge2_f1_ci_high"] <= 0.4


@pytest.mark.parametrize("a,b,same", [
    ("$1.2 billion", "1,200 million", True),
    ("2.5%", "2.5 percent", True),
    ("98 cents", "$0.98", True),
    ("$452 million", "$452.2 million", True),   # rounded as written
    ("$452.2 million", "$452 million", True),
    ("8.1 percent", "8.4 percent", False),
    ("$1.2 billion", "1.2 percent", False),
    ("50 basis points", "50 bps", True),
])
def test_numbers_normalise_units_and_formats(a, b, same):
    from metrics.numeric import quantities

    (qa,), (qb,) = quantities(a), quantities(b)
    assert qa.matches(qb) is same


def test_numeric_precision_and_recall():
    from metrics.numeric import NumericScorer, quantities

    assert quantities("in q3 2024 and fy2025 revenue rose") == []
    item = _item(predicted="revenue rose 8.1% to $452.2 million; eps was $9.99.")
    item.context_text = "Revenue rose 8.1 percent to $452.2 million."
    (s,) = NumericScorer().score([item])
    assert s.values["numeric_precision"] == pytest.approx(2 / 3)  # $9.99 is not in the source
    assert s.values["numeric_recall"] == pytest.approx(2 / 3)  # the reference's $1.12 is missing


def test_round_numbers_do_not_match_far_off_values():
    from metrics.numeric import quantities

    (gold,) = quantities("$1,577 million")
    assert not gold.matches(quantities("$2 billion")[0])
    assert gold.matches(quantities("$1.58 billion")[0])
    assert quantities("8 percent")[0].matches(quantities("8.1%")[0])


def test_one_value_has_no_confidence_interval_and_cost_per_coverage_point_is_exact():
    one = aggregate([{"id": "a", "rouge2_f1": 0.3, "cost_usd": 0.02}])
    assert one["rouge2_f1_mean"] == 0.3
    assert "rouge2_f1_ci_low" not in one and "rouge2_f1_ci_high" not in one
    judged = aggregate([{"id": "a", "geval_coverage": 4.0, "cost_usd": 0.02},
                        {"id": "b", "geval_coverage": 2.0, "cost_usd": 0.04}])
    assert judged["cost_per_coverage_point"] == pytest.approx(0.03 / 3.0)
    assert judged["geval_coverage_share_ge4"] == 0.5


def test_every_score_gets_a_histogram(tmp_path):
    from report.plots import histogram_fields, run_plots

    records = [{"id": "a", "rouge1_f1": 0.4, "rouge2_f1": 0.2, "rougeL_f1": 0.3,
                "bertscore_p": 0.8, "retrieval_precision": 0.5, "retrieval_recall": None,
                "numeric_recall": 1.0, "qa_contain_match": 1.0, "geval_coverage_reasoning": "x",
                "geval_coverage_parse_failed": False, "cost_usd": 0.0, "loops": 3}]
    assert histogram_fields(records) == ["bertscore_p", "numeric_recall", "qa_contain_match",
                                         "retrieval_precision", "rouge1_f1", "rouge2_f1",
                                         "rougeL_f1"]
    assert [p.name for p in run_plots(records, tmp_path)] == ["score_histograms.png"]


def test_task_means_average_repeats_per_task_and_skip_unknowns():
    from metrics.aggregate import task_means

    records = [{"id": "a", "repeat": 0, "x": 1.0}, {"id": "b", "repeat": 0, "x": None},
               {"id": "a", "repeat": 1, "x": 0.0}, {"id": "c", "repeat": 0, "x": float("nan")},
               {"id": "b", "repeat": 1, "x": 4}, {"id": "d", "x": True}]
    assert task_means(records, "x") == {"a": 0.5, "b": 4.0}
