"""G-Eval: scores parsed exactly as the judge wrote them, failures visible, criteria cached."""

from __future__ import annotations

import pytest

from arag.llm.base import ChatModel, Completion, Usage
from arag.records import Prediction, Task
from metrics import ScoringItem, aggregate
from metrics.geval import GEvalScorer, parse_codes, parse_score

REF = "q3 revenue rose 8.1 percent to $452.2 million.\nsees fy revenue $1.8 billion."
CONTEXT = "Third quarter revenue rose 8.1 percent to $452.2 million. We expect $1.8 billion."


@pytest.mark.parametrize("reply,score", [
    ("Reasoning...\nFinal score: 4", 4),
    ("Final Score: 4/5", 4),
    ("**Final score:** 2", 2),
    ("Final score: 3\n\nNote: the summary omits guidance.", 3),
    ("Steps... Final score: 2 ... on reflection, Final score: 5", 5),
    ("Overall I rate it 4 out of 5.", 4),
    ("Score: 1", 1),
    ("The summary is mostly fine.", None),
    ("Final score: 7", None),
    ("", None),
])
def test_score_formats_judges_produce(reply, score):
    assert parse_score(reply) == score


def test_codes_outside_the_taxonomy_are_dropped():
    assert parse_codes("Codes: H, O") == (["H", "O"], [])
    assert parse_codes("Codes: none") == ([], [])
    assert parse_codes("Codes: H, X, IR, hallucination") == (["H", "IR"], ["X", "HALLUCINATION"])


class RuleJudge(ChatModel):
    """Replies by what the prompt asks; counts calls; optionally unparseable for some tasks."""

    provider = "fake"
    name = "rule-judge"

    def __init__(self, scores: dict[str, dict[str, str]], codes: str = "Codes: H"):
        self.scores = scores  # predicted text -> dimension -> reply
        self.codes = codes
        self.calls: list[str] = []

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto"):
        prompt = messages[-1]["content"]
        self.calls.append(prompt)
        if "Write the evaluation steps" in prompt:
            text = "1. Read the context.\n2. Check every figure.\n3. Score."
        elif "Assign the error codes" in prompt:
            text = self.codes
        else:
            predicted = prompt.split("Predicted summary:\n", 1)[1].split("\n\nFollow", 1)[0]
            dim = "faithfulness" if "Faithfulness (1-5)" in prompt else "coverage"
            text = self.scores[predicted][dim]
        return Completion([{"type": "text", "text": text}], "end_turn", Usage(10, 5), self.name)


def _item(predicted: str) -> ScoringItem:
    task = Task(predicted[:8], "summarization", ("D",), "Summarize Q3.", REF)
    pred = Prediction(id=task.id, source="s", system="naive", model="m",
                      task_type="summarization", question=task.question, doc_ids=["D"],
                      ground_truth=REF, predicted=predicted)
    return ScoringItem(pred, task, None, CONTEXT, 50, True)


PERFECT = "q3 revenue rose 8.1 percent to $452.2 million.\nsees fy revenue $1.8 billion."
HALLUCINATED = "q3 revenue rose 9.5 percent to $470 million."
UNPARSEABLE = "revenue was up."
OMITTED = "q3 revenue rose 8.1 percent to $452.2 million."  # the guidance bullet is missing


@pytest.fixture
def judge():
    return RuleJudge({
        PERFECT: {"faithfulness": "All figures match.\nFinal score: 5",
                  "coverage": "**Final Score:** 5/5"},
        HALLUCINATED: {"faithfulness": "9.5 percent is not in the context.\nFinal score: 1",
                       "coverage": "Misses guidance.\nFinal score: 2"},
        UNPARSEABLE: {"faithfulness": "I cannot decide.", "coverage": "Final score: 3"},
        OMITTED: {"faithfulness": "Accurate.\nFinal score: 5",
                  "coverage": "The fy guidance is omitted.\nFinal score: 2"},
    })


def test_scores_equal_what_the_judge_wrote_and_failures_stay_visible(judge, tmp_path):
    scorer = GEvalScorer(judge, "fake/rule", tmp_path, concurrency=2)
    perfect, bad, unparseable = scorer.score([_item(PERFECT), _item(HALLUCINATED),
                                              _item(UNPARSEABLE)])
    assert perfect.values["geval_faithfulness"] == 5 and perfect.values["geval_coverage"] == 5
    assert perfect.values["error_codes"] == []
    assert bad.values["geval_faithfulness"] == 1 and bad.values["error_codes"] == ["H"]
    assert bad.values["geval_faithfulness_reasoning"].startswith("9.5 percent is not")
    assert unparseable.values["geval_faithfulness"] is None
    assert unparseable.values["geval_faithfulness_parse_failed"] is True
    assert unparseable.values["geval_faithfulness_reasoning"] == "I cannot decide."
    assert "Final score" in unparseable.null_reasons["geval_faithfulness"]
    assert unparseable.values["geval_coverage"] == 3
    records = [{**s.values, "error": None, "skipped": False}
               for s in (perfect, bad, unparseable)]
    m = aggregate(records)
    assert m["geval_faithfulness_parse_failures"] == 1
    assert m["geval_faithfulness_mean"] == 3.0  # (5 + 1) / 2: the failure is not a score
    assert m["error_rate_H"] == 0.5 and m["geval_coverage_share_ge4"] == pytest.approx(1 / 3)


def test_faithfulness_is_judged_against_the_context_the_system_used(judge, tmp_path):
    GEvalScorer(judge, "fake/rule", tmp_path, concurrency=1).score([_item(PERFECT)])
    faith = next(c for c in judge.calls if "Faithfulness (1-5)" in c and "Source context" in c)
    assert CONTEXT in faith and "Predicted summary:\n" + PERFECT in faith
    cover = next(c for c in judge.calls if "Coverage (1-5)" in c and "Predicted summary" in c)
    assert "Reference summary:\n" + REF in cover and CONTEXT not in cover


def test_criteria_are_generated_once_and_cached_on_disk(judge, tmp_path):
    GEvalScorer(judge, "fake/rule", tmp_path).score([_item(PERFECT)])
    steps_calls = sum("Write the evaluation steps" in c for c in judge.calls)
    assert steps_calls == 2 and len(list((tmp_path / "geval").glob("criteria_*.json"))) == 2
    GEvalScorer(judge, "fake/rule", tmp_path).score([_item(PERFECT)])
    assert sum("Write the evaluation steps" in c for c in judge.calls) == 2
    GEvalScorer(judge, "fake/rule", tmp_path, regenerate_criteria=True).score([_item(PERFECT)])
    assert sum("Write the evaluation steps" in c for c in judge.calls) == 4


def test_without_a_judge_every_judge_metric_is_null_with_the_reason(tmp_path):
    (s,) = GEvalScorer(None, "none/none", tmp_path).score([_item(PERFECT)])
    assert s.values["geval_faithfulness"] is None and s.values["error_codes"] is None
    assert s.null_reasons["geval_coverage"] == "no judge configured (judge=none)"


def test_qa_contain_match_and_three_point_verdicts(tmp_path):
    from metrics.qa import QAScorer, contain_match, parse_verdict

    assert contain_match("$1,577 million", "Capex was $1.577 billion in FY2018.")
    assert not contain_match("$1,577 million", "Capex was $1.2 billion.")
    assert contain_match("Yes, it is capital intensive.", "yes, it is capital intensive")
    assert parse_verdict("...\nVerdict: partially correct") == 0.5
    assert parse_verdict("**Verdict:** Correct") == 1.0
    assert parse_verdict("I think it's fine") is None

    class Judge(RuleJudge):
        def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                     tool_choice="auto"):
            ok = "$1.577 billion" in messages[-1]["content"]
            text = "Verdict: correct" if ok else "Hmm."
            return Completion([{"type": "text", "text": text}], "end_turn", Usage(1, 1), "j")

    def qa_item(predicted):
        task = Task("q", "qa", ("D",), "What was FY2018 capex?", "$1,577 million")
        pred = Prediction(id="q", source="s", system="naive", model="m", task_type="qa",
                          question=task.question, doc_ids=["D"], ground_truth=task.reference,
                          predicted=predicted)
        return ScoringItem(pred, task, None, "", 80, True)

    right, unparsed = QAScorer(Judge({}), "").score([qa_item("It was $1.577 billion."),
                                                     qa_item("About $2 billion.")])
    assert right.values["qa_contain_match"] == 1.0 and right.values["qa_judge_correct"] == 1.0
    assert unparsed.values["qa_contain_match"] == 0.0
    assert unparsed.values["qa_judge_score"] is None and unparsed.values["qa_judge_parse_failed"]
    (summary,) = QAScorer(None, "no judge").score([_item(PERFECT)])
    assert summary.null_reasons["qa_contain_match"] == "not a QA task"


def test_omitted_guidance_lowers_coverage_and_is_coded_as_omission(judge, tmp_path):
    judge.codes = "Codes: O"
    (s,) = GEvalScorer(judge, "fake/rule", tmp_path).score([_item(OMITTED)])
    assert s.values["geval_faithfulness"] == 5 and s.values["geval_coverage"] <= 3
    assert s.values["error_codes"] == ["O"]
    taxonomy = next(c for c in judge.calls if "Assign the error codes" in c)
    assert "The fy guidance is omitted." in taxonomy  # the judge sees the G-Eval reasoning
