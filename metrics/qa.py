"""QA accuracy (``task_type=qa``): contain-match without a judge, and a judged verdict.

``qa_contain_match`` is 1 when the gold answer is contained in the prediction: every
number of the gold answer appears among the prediction's numbers (normalised as in
``metrics.numeric``), or, for answers without numbers, the normalised gold text occurs in
the normalised prediction. ``qa_judge_score`` follows a 3-point rubric (correct = 1,
partially correct = 0.5, incorrect = 0) from the judge's ``Verdict:`` line, and
``qa_judge_correct`` is 1 only for "correct". Means of these are the run's accuracies.
An unparseable verdict is null and counted, never guessed. Verdict calls run concurrently,
or as one Message Batch with ``judge.batch=true`` (a failed batch: every verdict null
with the reason).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from arag.llm.base import Completion, ModelError
from metrics.base import (
    Metric,
    Scores,
    ScoringItem,
    answered,
    count_flags,
    register_scorer,
)
from metrics.judging import JudgedScorer, failure_reason, judge_request, unreadable_reason
from metrics.numeric import quantities

log = logging.getLogger(__name__)
VERDICTS = {"correct": 1.0, "partially correct": 0.5, "incorrect": 0.0}
VERDICT = re.compile(r"verdict\s*\**\s*[:=]\s*\**\s*(partially correct|incorrect|correct)",
                     re.IGNORECASE)


def _norm(text: str) -> str:
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", text.lower())  # keep only decimal points
    return " ".join(re.sub(r"[^a-z0-9.%$ ]", " ", text).split())


def contain_match(gold: str, predicted: str) -> bool:
    wanted = quantities(gold)
    if wanted:
        found = quantities(predicted)
        return all(any(w.matches(f) for f in found) for w in wanted)
    return _norm(gold) in _norm(predicted)


def parse_verdict(reply: str) -> float | None:
    found = VERDICT.findall(reply)
    return VERDICTS[found[-1].lower()] if found else None


def verdict_prompt(item: ScoringItem) -> str:
    return (
        "Grade an answer to a question about a financial filing against the gold answer.\n\n"
        f"Question:\n{item.task.question}\n\nGold answer:\n{item.task.reference}\n\n"
        f"Answer to grade:\n{item.prediction.predicted}\n\nRubric: 'correct' if it states the "
        "gold answer's facts and figures (rounding and units may differ); 'partially correct' "
        "if it gets part of them right or hedges between right and wrong; 'incorrect' "
        "otherwise. Reason briefly, then end with one line 'Verdict: correct', 'Verdict: "
        "partially correct' or 'Verdict: incorrect'."
    )


@register_scorer("qa")
class QAScorer(JudgedScorer):
    metrics = [Metric("qa_contain_match", "QA contain-match", passes=True),
               Metric("qa_judge_score", "QA judge score"),
               Metric("qa_judge_correct", "QA judged correct", passes=True)]
    judged = ["qa_judge_score", "qa_judge_correct"]

    def aggregate(self, answered: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> dict[str, float]:
        return count_flags(records, ["qa_judge_parse_failed"])

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = [Scores() for _ in items]
        todo: dict[str, tuple[ScoringItem, Scores]] = {}
        for n, (item, s) in enumerate(zip(items, out, strict=True)):
            why = ("not a QA task" if item.task.task_type != "qa" else
                   "the task is unanswerable from its documents: scored by no_evidence"
                   if not item.task.answerable else answered(item))
            if why:
                _unjudged(s, self.fields, why)
                continue
            s.values["qa_contain_match"] = float(contain_match(item.task.reference,
                                                               item.prediction.predicted or ""))
            if self.judge is None:
                _unjudged(s, self.judged, self.no_judge_reason)
            else:
                todo[str(n)] = (item, s)
        if todo and self.judge is not None:
            replies = self.ask({i: self._verdict_request(item) for i, (item, _) in todo.items()},
                               lambda text: parse_verdict(text) is not None)
            for i, (_, s) in todo.items():
                self._apply_verdict(s, replies[i])
        return out

    def request(self, item: ScoringItem) -> dict[str, Any] | None:
        return (self._verdict_request(item) if item.task.task_type == "qa"
                and item.task.answerable else None)

    @staticmethod
    def _verdict_request(item: ScoringItem) -> dict[str, Any]:
        return judge_request(_SYSTEM, verdict_prompt(item), 400)

    def _apply_verdict(self, s: Scores, reply: Completion | ModelError) -> None:
        if isinstance(reply, ModelError):
            _unjudged(s, self.judged, failure_reason(reply))
            return
        score = parse_verdict(reply.text)
        s.values["qa_judge_reasoning"] = reply.text
        s.values["qa_judge_parse_failed"] = score is None
        if score is None:
            s.null(self.judged, unreadable_reason("the judge's reply has no 'Verdict:' line",
                                                  reply))
        else:
            s.values["qa_judge_score"] = score
            s.values["qa_judge_correct"] = float(score == 1.0)


_SYSTEM = "You grade answers to questions about financial filings."


def _unjudged(s: Scores, fields: list[str], reason: str) -> None:
    """Fields null with the reason; the judge's reply fields present and null."""
    s.null(fields, reason)
    s.values["qa_judge_reasoning"] = None
    s.values["qa_judge_parse_failed"] = None
