"""Edge cases whose documents hold no answer: built from the filings, and scored by the
judge for declining as expected."""

from __future__ import annotations

from arag.datasets import load_dataset
from arag.llm.base import ChatModel, Completion, Usage
from arag.records import Prediction, Task
from metrics.base import ScoringItem
from metrics.no_evidence import ANSWERABLE, NoEvidenceScorer
from metrics.qa import QAScorer
from runners import dryrun
from tests.conftest import ROOT
from tests.test_financebench import write_tree


class DeclineJudge(ChatModel):
    """'declined' when the answer says the documents lack it, else 'answered'."""

    provider, name = "fake", "decline-judge"

    def complete(self, system, messages, tools=None, max_tokens=1024, temperature=0.0,
                 tool_choice="auto"):
        answer = messages[-1]["content"].split("The system's answer:\n", 1)[1]
        verdict = "declined" if "not in the documents" in answer.split("\n\n")[0] else "answered"
        return Completion([{"type": "text", "text": f"Checked.\nVerdict: {verdict}"}],
                          "end_turn", Usage(50, 5), self.name)


def test_each_filing_gives_three_unanswerable_edge_cases(make_cfg, tmp_path):
    cfg = make_cfg("dataset=financebench_edge", f"dataset.root={write_tree(tmp_path / 'fb')}",
                   f"dataset.options.cache_dir={tmp_path / 'c'}")
    ds = load_dataset(cfg.dataset, ROOT)
    assert [t.id for t in ds.tasks] == ["ACME_2022_10K:out_of_scope",
                                        "ACME_2022_10K:missing_source",
                                        "ACME_2022_10K:false_premise"]
    assert all(not t.answerable and t.gold_lines is None for t in ds.tasks)
    missing, premise = ds.tasks[1], ds.tasks[2]
    assert missing.question == "According to ACME's 10-K for FY2027, what was its total revenue?"
    assert "not among the documents" in missing.meta["expected_behaviour"]
    assert premise.question == "Why did ACME file for bankruptcy in FY2022?"
    assert premise.reference == "Reject the premise: the filing reports no bankruptcy in FY2022."


def _item(task: Task, predicted: str) -> ScoringItem:
    pred = Prediction(task.id, "s", "naive", "m", "qa", task.question, list(task.doc_ids), "",
                      predicted=predicted)
    return ScoringItem(pred, task, None, "", 50, True)


def test_an_adversarial_task_is_scored_for_declining():
    premise = Task("p", "qa", ("D",), "Why did ACME file for bankruptcy in FY2022?",
                   "Reject the premise.", answerable=False,
                   meta={"expected_behaviour": "Reject the premise: no bankruptcy."})
    normal = Task("n", "qa", ("D",), "What was capex?", "$150 million")
    declined, invented, answerable = NoEvidenceScorer(DeclineJudge(), "").score([
        _item(premise, "A bankruptcy is not in the documents; the filing reports none."),
        _item(premise, "ACME filed because of falling sales."),
        _item(normal, "$150 million.")])
    assert declined.values["no_evidence_accuracy"] == 1.0
    assert invented.values["no_evidence_accuracy"] == 0.0
    assert invented.values["no_evidence_reasoning"].endswith("Verdict: answered")
    assert answerable.values["no_evidence_accuracy"] is None
    assert answerable.null_reasons["no_evidence_accuracy"] == ANSWERABLE
    (unjudged,) = NoEvidenceScorer(None, "no judge configured").score([_item(premise, "x")])
    assert unjudged.null_reasons["no_evidence_accuracy"] == "no judge configured"
    # the QA verdict does not grade it against its "reference" (the expected behaviour)
    (qa,) = QAScorer(None, "no judge").score([_item(premise, "x")])
    assert "unanswerable" in qa.null_reasons["qa_contain_match"]
    # the dry run prices one verdict per unanswerable task
    items = [_item(premise, "x"), _item(normal, "y")]
    priced = dryrun.judge_requests([NoEvidenceScorer(DeclineJudge(), "")], items, "j", True)
    assert list(priced) == ["no_evidence:0"]
