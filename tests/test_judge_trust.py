"""Trusting the judge: the plan's taxonomy in the request, independent samples paid once,
a panel's agreement and factual consistency."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arag.llm.base import ChatModel, Completion, Usage
from arag.llm.cache import CachedModel, MeteredModel, response_key
from arag.llm.pricing import Prices
from arag.records import Prediction, Task
from metrics import ScoringItem, aggregate
from metrics.consistency import FactualConsistencyScorer, parse_claims
from metrics.geval import GEvalScorer, panel_aggregates
from metrics.stats import krippendorff_alpha

REF = "q3 revenue rose 8.1 percent to $452.2 million.\nsees fy revenue $1.8 billion."
CONTEXT = "Third quarter revenue rose 8.1 percent to $452.2 million. We expect $1.8 billion."


class CountingJudge(ChatModel):
    """Scores by a rule; every call of the same request may answer differently (``drift``
    adds the call's ordinal), as a sampled LLM judge does."""

    provider = "fake"

    def __init__(self, name: str, base: dict[str, int], drift: bool = True):
        self.name = name
        self.model_id = name
        self.base = base  # predicted text -> score
        self.drift = drift
        self.prompts: list[str] = []

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto"):
        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        if "Write the evaluation steps" in prompt:
            text = "1. Check every figure.\n2. Score."
        elif "Assign the error codes" in prompt:
            text = "Codes: P, O"
        elif "numerical claim" in prompt:
            text = ("Claim: revenue rose 8.1 percent | Verdict: verified\n"
                    "Claim: revenue $470 million | Verdict: contradicted")
        else:
            predicted = prompt.split("Predicted summary:\n", 1)[1].split("\n\nFollow", 1)[0]
            shift = (len(self.prompts) % 2) if self.drift else 0
            text = f"Reasoning of {self.name}.\nFinal score: {min(5, self.base[predicted] + shift)}"
        return Completion([{"type": "text", "text": text}], "end_turn", Usage(100, 20), self.name)


def item(predicted: str, agentic: bool = True, budget_spent: bool = False) -> ScoringItem:
    task = Task(predicted or "empty", "summarization", ("D",), "Summarize Q3.", REF)
    pred = Prediction(id=task.id, source="s", system="arag", model="m",
                      task_type="summarization", question=task.question, doc_ids=["D"],
                      ground_truth=REF, predicted=predicted, max_loops_reached=budget_spent)
    return ScoringItem(pred, task, None, CONTEXT, 50, True, agentic=agentic)


GRADE = "You will grade one predicted summary"
SUMMARIES = {f"summary number {k}": 1 + k % 5 for k in range(8)}


def test_the_taxonomy_request_defines_p_and_ic_as_the_plan_does(tmp_path):
    judge = CountingJudge("j", {"weak one": 1}, drift=False)
    (s,) = GEvalScorer(judge, "fake/j", tmp_path).score([item("weak one")])
    request = next(p for p in judge.prompts if "Assign the error codes" in p)
    assert "P: premature termination" in request and "IC: incoherence" in request
    assert "internally contradictory" in request and "period or entity mix-up" not in request
    assert s.values["error_codes"] == ["P", "O"]


def test_samples_are_cached_apart_scored_by_their_mean_and_spread(tmp_path):
    inner = CountingJudge("j", SUMMARIES)
    judge = MeteredModel(CachedModel(inner, tmp_path, "read_write"), Prices(1.0, 5.0))
    items = [item(text) for text in SUMMARIES]
    first = GEvalScorer(judge, "fake/j", tmp_path, samples=3).score(items)
    scoring_calls = [p for p in inner.prompts if p.startswith(GRADE)]
    assert len(scoring_calls) == 3 * 2 * len(items)  # samples x dimensions x items
    for s in first:
        samples = s.values["geval_coverage_samples"]
        assert len(samples) == 3 and s.values["geval_coverage"] == pytest.approx(np.mean(samples))
        assert s.values["geval_coverage_judge_sd"] == pytest.approx(np.std(samples, ddof=1))
    spent = judge.cost_usd
    again = GEvalScorer(judge, "fake/j", tmp_path, samples=3).score(items)
    assert len([p for p in inner.prompts if p.startswith(GRADE)]) == len(scoring_calls)
    assert judge.cost_usd == spent  # every sample came from the response cache
    assert [s.values["geval_coverage_samples"] for s in again] == \
        [s.values["geval_coverage_samples"] for s in first]
    m = aggregate([{**s.values, "error": None, "skipped": False} for s in first])
    assert m["geval_coverage_judge_sd_mean"] > 0


def test_sample_zero_keeps_the_plain_request_key():
    request = {"system": "s", "messages": [{"role": "user", "content": "x"}]}
    assert response_key("p", "m", **request) == response_key("p", "m", **request, sample=0)
    assert response_key("p", "m", **request) != response_key("p", "m", **request, sample=1)


def test_a_panel_scores_the_same_items_and_its_agreement_is_logged(tmp_path):
    primary = CountingJudge("primary", SUMMARIES, drift=False)
    second = CountingJudge("second", {k: max(1, v - (v == 5)) for k, v in SUMMARIES.items()},
                           drift=False)
    scorer = GEvalScorer(primary, "fake/primary", tmp_path, panel={"second": second})
    scores = scorer.score([item(text) for text in SUMMARIES] + [item("")])
    assert scores[-1].values["geval_panel"] is None  # unanswered: no judge asked
    view = scores[0].values["geval_panel"]["second"]
    assert view["coverage"] == SUMMARIES["summary number 0"]
    assert view["coverage_reasoning"].startswith("Reasoning of second")
    prompts = [p for p in second.prompts if p.startswith(GRADE)]
    assert prompts and sorted(prompts) == sorted(p for p in primary.prompts
                                                 if p.startswith(GRADE))
    records = [{**s.values, "error": None, "skipped": False} for s in scores[:-1]]
    m = scorer.aggregate(records, records)
    ratings = np.array([[r["geval_coverage"] for r in records],
                        [r["geval_panel"]["second"]["coverage"] for r in records]], dtype=float)
    assert m["judge_agreement_coverage"] == pytest.approx(krippendorff_alpha(ratings))
    assert 0 < m["judge_agreement_coverage"] < 1
    assert m["judge_agreement_coverage_ci_low"] <= m["judge_agreement_coverage"] \
        <= m["judge_agreement_coverage_ci_high"]
    assert m["panel_second_geval_coverage_parse_failures"] == 0


def test_panel_parse_failures_stay_null_and_are_counted():
    records = [{"geval_coverage": 4.0, "geval_faithfulness": 4.0,
                "geval_panel": {"b": {"coverage": None, "coverage_parse_failed": True,
                                      "faithfulness": 3.0, "faithfulness_parse_failed": False}}}]
    m = panel_aggregates(records, ["b"])
    assert m["panel_b_geval_coverage_parse_failures"] == 1
    assert "judge_agreement_coverage" not in m  # one item: alpha is undefined, not made up


def test_factual_consistency_is_the_verified_share_of_the_judges_claims(tmp_path):
    judge = CountingJudge("j", {})
    (s, skipped) = FactualConsistencyScorer(judge, "").score([item("q3 revenue $470 million"),
                                                              item("")])
    assert s.values["factual_consistency"] == 0.5
    assert s.values["factual_consistency_claims"][1] == {"claim": "revenue $470 million",
                                                         "verdict": "contradicted"}
    assert CONTEXT in next(p for p in judge.prompts if "numerical claim" in p)
    assert skipped.values["factual_consistency"] is None
    assert skipped.null_reasons["factual_consistency"] == "empty prediction"
    (none,) = FactualConsistencyScorer(None, "no judge configured (judge=none)").score(
        [item("text")])
    assert none.null_reasons["factual_consistency"] == "no judge configured (judge=none)"


@pytest.mark.parametrize("reply,parsed", [
    ("1. Claim: eps $1.41 | Verdict: Verified", [{"claim": "eps $1.41", "verdict": "verified"}]),
    ("- Claim: margin 30% | Verdict: **unsupported**",
     [{"claim": "margin 30%", "verdict": "unsupported"}]),
    ("Claims: none", []),
    ("The summary looks accurate.", None),
])
def test_claim_replies_are_read_or_failures(reply, parsed):
    assert parse_claims(reply) == parsed


def test_rouge_lsum_splits_sentences_on_newlines():
    from rouge_score import rouge_scorer

    from metrics.text import RougeScorer

    predicted = "eps rose to $1.41.\nrevenue rose 8.1 percent to $452.2 million."
    (s,) = RougeScorer().score([item(predicted)])
    expected = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=True).score(REF, predicted)
    assert s.values["rougeLsum_f1"] == pytest.approx(expected["rougeLsum"].fmeasure)
    assert not math.isclose(s.values["rougeLsum_f1"], s.values["rougeL_f1"])


def test_panel_options_compose_like_the_judge_group(make_cfg):
    from runners.judges import panel_configs
    from runners.validation import ConfigError, validate_config

    cfg = make_cfg("judge=claude-haiku-4-5", "judge.panel=[claude-sonnet-4-6]",
                   "judge.base_url=http://127.0.0.1:9", "judge.samples=3", "judge.batch=true")
    (sonnet,) = panel_configs(cfg).values()
    assert (sonnet.name, sonnet.model_id, sonnet.price_output) == (
        "claude-sonnet-4-6", "claude-sonnet-4-6", 15.0)  # its own model file and prices
    assert sonnet.base_url == "http://127.0.0.1:9" and sonnet.samples == 3 and sonnet.batch
    for overrides, message in [
        (["judge=claude-haiku-4-5", "judge.panel=[gpt-judge]"], "'gpt-judge' is not a judge"),
        (["judge=claude-haiku-4-5", "judge.panel=[offline]"], "'offline' is not a judge"),
        (["judge=claude-haiku-4-5", "judge.panel=[claude-haiku-4-5]"], "primary judge itself"),
        (["judge.panel=[claude-sonnet-4-6]"], "needs a primary judge"),
        (["judge=claude-haiku-4-5", "judge.samples=0"], "judge.samples=0 is invalid"),
    ]:
        with pytest.raises(ConfigError, match=message) as raised:
            validate_config(make_cfg(*overrides))
        assert "Fix:" in str(raised.value)
