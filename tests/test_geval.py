"""G-Eval: scores parsed exactly as the judge wrote them, failures visible, criteria cached."""

from __future__ import annotations

import json

import pytest

from arag.llm.base import ChatModel, Completion, ModelError, Usage
from arag.llm.cache import CachedModel, MeteredModel
from arag.llm.pricing import Prices
from arag.records import Prediction, Task
from metrics import ScoringItem, aggregate
from metrics.geval import GEvalScorer, parse_codes, parse_score
from metrics.qa import QAScorer

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


@pytest.mark.parametrize("reply", [
    "Final score: 3.5",
    "Final Score: 4.5/5",
    "Final score: 2-3",
    "Final score: 3 or 4",
    "Final score: 4/10",
    "Score: 4 out of 10",
    "The summary covers 4 out of 5 key facts.",
    "I rate it 3.5 out of 5.",
    "I rate it 4 out of 5 key facts.",
    "Final score: 3.5\nOverall I rate it 4 out of 5.",  # the final score decides, unreadable
])
def test_scores_the_judge_did_not_write_are_parse_failures(reply):
    assert parse_score(reply) is None


@pytest.mark.parametrize("reply,score", [
    ("Final score: 4.0", 4),
    ("Final score: **4**", 4),
    ("Rating: 3/5", 3),
    ("I would give this summary a 4/5.", 4),
    ("Final score: 4\n- 3 figures are wrong", 4),  # a list below is not a range
])
def test_whole_scores_on_a_scale_of_5_are_read(reply, score):
    assert parse_score(reply) == score


def test_codes_outside_the_taxonomy_are_dropped():
    assert parse_codes("Codes: H, O") == (["H", "O"], [])
    assert parse_codes("Codes: none") == ([], [])
    assert parse_codes("Codes: H, X, IR, hallucination") == (["H", "IR"], ["X", "HALLUCINATION"])


@pytest.mark.parametrize("reply,parsed", [
    ("Codes: N/A", ([], [])),
    ("Codes: n/a", ([], [])),
    ("Codes: None of the above apply", ([], [])),
    ("Codes: no errors apply.", ([], [])),
    ("Codes: H (hallucination), O", (["H", "O"], [])),
    ("Error codes: H: hallucination; N - numeric", (["H", "N"], [])),
    ("Codes: **H**, **O**.", (["H", "O"], [])),
    ("The figures are off.\nCodes: H, N", (["H", "N"], [])),
    ("Codes:\nH, O", (["H", "O"], [])),
    ("Codes: none, H", None),  # says none and names a code: unreadable
    ("The summary has several problems.\nMostly wrong numbers.", None),  # no list at all
])
def test_no_codes_and_glosses_are_not_read_as_codes(reply, parsed):
    assert parse_codes(reply) == parsed


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


@pytest.mark.parametrize("codes_reply,reason", [
    ("The summary has several problems.\nMostly wrong numbers.", "no readable 'Codes:'"),
    ("I cannot determine.", "only codes outside the taxonomy"),
])
def test_a_taxonomy_reply_without_codes_is_null_not_no_errors(judge, tmp_path, codes_reply,
                                                               reason):
    judge.codes = codes_reply
    (s,) = GEvalScorer(judge, "fake/rule", tmp_path).score([_item(HALLUCINATED)])
    assert s.values["error_codes"] is None and reason in s.null_reasons["error_codes"]
    assert s.values["error_codes_reply"] == codes_reply
    record = {**s.values, "error": None, "skipped": False}
    assert "error_rate_H" not in aggregate([record])  # not counted as assessed, error-free


class StepsJudge(RuleJudge):
    """Writes new evaluation steps at every call for them: version N at the N-th call."""

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto"):
        prompt = messages[-1]["content"]
        if "Write the evaluation steps" not in prompt:
            return super().complete(system, messages, tools, max_tokens, temperature,
                                    tool_choice)
        self.calls.append(prompt)
        version = sum("Write the evaluation steps" in c for c in self.calls)
        return Completion([{"type": "text", "text": f"1. Steps, version {version}."}],
                          "end_turn", Usage(10, 5), self.name)


def test_regenerate_criteria_asks_the_judge_past_the_response_cache(judge, tmp_path):
    inner = StepsJudge(judge.scores)
    cached = CachedModel(inner, tmp_path, "read_write")
    metered = MeteredModel(cached, Prices())  # as runners.job.make_judge wraps it

    def steps_calls() -> int:
        return sum("Write the evaluation steps" in c for c in inner.calls)

    first = GEvalScorer(metered, "fake/rule", tmp_path)
    first.score([_item(PERFECT)])
    assert steps_calls() == 2 and first.criteria.used["coverage"]["steps"].endswith("2.")
    (tmp_path / "geval").joinpath(first.criteria.path("coverage").name).unlink()
    again = GEvalScorer(metered, "fake/rule", tmp_path)  # lost file: the cached reply is fine
    again.score([_item(PERFECT)])
    assert steps_calls() == 2 and again.criteria.used["coverage"]["steps"].endswith("2.")
    fresh = GEvalScorer(metered, "fake/rule", tmp_path, regenerate_criteria=True)
    fresh.score([_item(PERFECT)])
    fresh.score([_item(OMITTED)])  # regenerated once: one set of steps for the whole run
    assert steps_calls() == 4
    assert fresh.criteria.used["coverage"]["steps"] == "1. Steps, version 4."
    assert json.loads(fresh.criteria.path("coverage").read_text())["steps"].endswith("4.")
    later = GEvalScorer(metered, "fake/rule", tmp_path)
    later.criteria.path("coverage").unlink()  # the new reply replaced the cached one
    later.score([_item(PERFECT)])
    assert steps_calls() == 4 and later.criteria.used["coverage"]["steps"].endswith("4.")
    assert cached.hits > 0  # scoring calls outside the block still read the cache


class BrokenBatchJudge(RuleJudge):
    def complete_batch(self, requests):
        self.calls.append(f"batch of {len(requests)}")
        raise ModelError("rule-judge: gave up after 3 attempts; last error: HTTP 500")


def test_a_failed_message_batch_nulls_every_item_with_the_reason(judge, tmp_path):
    broken = BrokenBatchJudge(judge.scores)
    perfect, bad = GEvalScorer(broken, "fake/rule", tmp_path, batch=True).score(
        [_item(PERFECT), _item(HALLUCINATED)])
    assert "batch of 4" in broken.calls
    for s in (perfect, bad):
        for dim in ("faithfulness", "coverage"):
            assert s.values[f"geval_{dim}"] is None
            assert s.values[f"geval_{dim}_reasoning"] is None
            reason = s.null_reasons[f"geval_{dim}"]
            assert "message batch failed" in reason and "HTTP 500" in reason
        assert s.values["error_codes"] is None


def test_cached_replies_survive_a_failed_message_batch(judge, tmp_path):
    request = {"system": "s", "messages": [{"role": "user", "content": "Score: cached"}],
               "max_tokens": 50}
    CachedModel(RuleJudge(judge.scores, codes="Codes: H"), tmp_path).complete(
        **{**request, "messages": [{"role": "user", "content": "Assign the error codes"}]})
    cached = CachedModel(BrokenBatchJudge(judge.scores), tmp_path)
    out = cached.complete_batch({
        "hit": {**request, "messages": [{"role": "user", "content": "Assign the error codes"}]},
        "miss": request})
    assert out["hit"].cached and out["hit"].text == "Codes: H"
    assert isinstance(out["miss"], ModelError) and "message batch failed" in str(out["miss"])


def test_every_record_carries_the_geval_reasoning_fields(judge, tmp_path):
    keys = {f"geval_{d}{suffix}" for d in ("faithfulness", "coverage")
            for suffix in ("", "_reasoning", "_parse_failed")}
    (no_judge,) = GEvalScorer(None, "none/none", tmp_path).score([_item(PERFECT)])
    failed = _item(PERFECT)
    failed.prediction.error, failed.prediction.predicted = "HTTP 529", None
    no_reference = _item(PERFECT)
    no_reference.task = Task("nr", "summarization", ("D",), "Summarize Q3.", "")
    unanswered, without_reference, answered = GEvalScorer(judge, "fake/rule", tmp_path).score(
        [failed, no_reference, _item(PERFECT)])
    for s in (no_judge, unanswered, without_reference, answered):
        assert keys <= set(s.values)
    assert no_judge.values["geval_faithfulness_reasoning"] is None
    assert unanswered.values["geval_coverage_reasoning"] is None
    assert without_reference.values["geval_coverage_reasoning"] is None
    assert without_reference.values["geval_faithfulness_reasoning"] == "All figures match.\n" \
        "Final score: 5"
    assert answered.values["geval_coverage_reasoning"] == "**Final Score:** 5/5"


class BatchingJudge(RuleJudge):
    """Verdicts by batch only; a single call fails the test."""

    def __init__(self, fail: bool = False):
        super().__init__({})
        self.fail = fail
        self.batches: list[list[str]] = []

    def complete(self, *args, **kwargs):
        raise AssertionError("judge.batch=true: the verdict went out as a single call")

    def complete_batch(self, requests):
        self.batches.append(list(requests))
        if self.fail:
            raise ModelError("batch msgbatch_1 expired")
        return {cid: Completion([{"type": "text", "text": "Verdict: correct"}], "end_turn",
                                Usage(1, 1), "j", meta={"batch": True})
                for cid in requests}


def _qa_item(tid: str, predicted: str) -> ScoringItem:
    task = Task(tid, "qa", ("D",), "What was FY2018 capex?", "$1,577 million")
    pred = Prediction(id=tid, source="s", system="naive", model="m", task_type="qa",
                      question=task.question, doc_ids=["D"], ground_truth=task.reference,
                      predicted=predicted)
    return ScoringItem(pred, task, None, "", 80, True)


def test_qa_verdicts_honour_judge_batch():
    items = [_qa_item("q1", "It was $1.577 billion."), _qa_item("q2", "About $2 billion."),
             _item(PERFECT)]
    judge = BatchingJudge()
    one, two, summary = QAScorer(judge, "", batch=True).score(items)
    assert judge.batches == [["0", "1"]]  # one batch, only the QA tasks
    assert one.values["qa_judge_correct"] == 1.0 and two.values["qa_judge_score"] == 1.0
    assert summary.values["qa_judge_reasoning"] is None
    failing = BatchingJudge(fail=True)
    one, two, _ = QAScorer(failing, "", batch=True).score(items)
    for s in (one, two):
        assert s.values["qa_judge_score"] is None and s.values["qa_judge_reasoning"] is None
        assert "message batch failed: batch msgbatch_1 expired" in s.null_reasons["qa_judge_score"]
        assert s.values["qa_contain_match"] is not None  # needs no judge


GUIDANCE = ("Guidance covered (1-5): the summary states the full-year guidance the reference "
            "gives, with its figures. 1: no guidance; 5: all of it.")


class GuidanceJudge(RuleJudge):
    """Scores the configured 'guidance covered' dimension by whether the answer says 'sees'
    or 'expect'; the default dimensions as RuleJudge does."""

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto"):
        prompt = messages[-1]["content"]
        if "Guidance covered (1-5)" in prompt and "Predicted summary" in prompt:
            self.calls.append(prompt)
            predicted = prompt.split("Predicted summary:\n", 1)[1].split("\n\nFollow", 1)[0]
            score = 5 if "sees" in predicted else 1
            text = f"Guidance {'present' if score == 5 else 'missing'}.\nFinal score: {score}"
            return Completion([{"type": "text", "text": text}], "end_turn", Usage(10, 5), "j")
        return super().complete(system, messages, tools, max_tokens, temperature, tool_choice)


def test_a_dimension_from_config_is_judged_cached_aggregated_and_reported(judge, make_cfg,
                                                                          tmp_path):
    from metrics import build_scorers
    from metrics.base import ScorerEnv
    from report.analyses.judge import further_dimensions, judged_dimensions
    from report.writers.words import say

    cfg = make_cfg("metrics.scorers=[geval]", "metrics.geval.dimensions=["
                   "{name:faithfulness,definition:'" + GEvalScorer(None, "", tmp_path)
                   .dimensions["faithfulness"].definition + "',"
                   "against:context},"
                   "{name:guidance_covered,definition:'" + GUIDANCE + "',"
                   "against:reference}]")
    guidance_judge = GuidanceJudge(judge.scores)
    (scorer,) = build_scorers(cfg.metrics, ScorerEnv(judge=guidance_judge, judge_id="fake/g",
                                                     cache_dir=tmp_path))
    assert {"geval_guidance_covered", "geval_guidance_covered_judge_sd"} <= set(scorer.fields)
    assert "geval_coverage" not in scorer.fields  # the list replaces the defaults
    perfect, omitted = scorer.score([_item(PERFECT), _item(OMITTED)])
    assert perfect.values["geval_guidance_covered"] == 5
    assert omitted.values["geval_guidance_covered"] == 1
    assert omitted.values["geval_guidance_covered_reasoning"].startswith("Guidance missing")
    assert omitted.values["geval_guidance_covered_parse_failed"] is False
    assert omitted.values["error_codes"] == ["H"]  # below 3 on a configured dimension
    asked = next(c for c in guidance_judge.calls
                 if "Guidance covered (1-5)" in c and "Predicted summary" in c)
    assert "Reference summary:\n" + REF in asked and CONTEXT not in asked  # against: reference
    entry = json.loads((tmp_path / "geval" / "criteria_guidance_covered_fake_g_v2.json")
                       .read_text())
    assert entry["definition"] == GUIDANCE and entry["against"] == "reference"
    assert "geval_criteria.json" in scorer.artifacts()
    m = aggregate([{**s.values, "error": None, "skipped": False} for s in (perfect, omitted)],
                  [scorer])
    assert m["geval_guidance_covered_mean"] == 3.0
    assert m["geval_guidance_covered_share_ge4"] == 0.5
    assert m["geval_guidance_covered_parse_failures"] == 0
    rows = [{"run": "naive", **m}]
    assert judged_dimensions(rows) == ["faithfulness", "guidance_covered"]
    (claim,) = further_dimensions(rows)
    table = say(claim)
    assert "| run | guidance_covered |" in table and "3.000" in table and "≥4: 50%" in table


def test_a_changed_definition_writes_new_criteria_and_bad_names_fail_at_build(tmp_path):
    from arag.config import ConfigError
    from metrics.base import ScorerEnv
    from metrics.geval import Against, Dimension, GEvalOptions

    judge = StepsJudge({})
    old, new = (Dimension("concise", f"Conciseness (1-5): {w}.", Against.context)
                for w in ("short", "no repetition"))
    GEvalScorer(judge, "fake/s", tmp_path, dimensions=[old]).criteria.get(old)
    GEvalScorer(judge, "fake/s", tmp_path, dimensions=[new]).criteria.get(new)
    asked = [c for c in judge.calls if "Write the evaluation steps" in c]
    assert len(asked) == 2 and "no repetition" in asked[1]
    with pytest.raises(ConfigError, match=r"dimensions\[0\].name='Guidance Covered'"):
        GEvalScorer.from_config(GEvalOptions(dimensions=[
            Dimension("Guidance Covered", GUIDANCE)]), ScorerEnv())


def test_a_record_that_does_not_say_its_context_is_not_judged_for_faithfulness(judge, tmp_path):
    """A re-scored record with no context ids: faithfulness is null with the reason (the
    judge is never shown "(the system read no context)"); coverage is still judged."""
    from dataclasses import replace

    from metrics.base import NO_CONTEXT

    (s,) = GEvalScorer(judge, "fake/rule", tmp_path).score([replace(_item(PERFECT),
                                                                     context_text=None)])
    assert s.values["geval_faithfulness"] is None
    assert s.null_reasons["geval_faithfulness"] == NO_CONTEXT
    assert s.values["geval_coverage"] == 5
    graded = [call for call in judge.calls if call.startswith("You will grade")]
    assert graded and not any("Faithfulness (1-5)" in call for call in graded)
