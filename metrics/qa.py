"""QA accuracy (``task_type=qa``): contain-match without a judge, and a judged verdict.

``qa_contain_match`` is 1 when the gold answer is contained in the prediction: every
number of the gold answer appears among the prediction's numbers (normalised as in
``metrics.numeric``), or, for answers without numbers, the normalised gold text occurs in
the normalised prediction. ``qa_judge_score`` follows a 3-point rubric (correct = 1,
partially correct = 0.5, incorrect = 0) from the judge's ``Verdict:`` line, and
``qa_judge_correct`` is 1 only for "correct". Means of these are the run's accuracies.
An unparseable verdict is null and counted, never guessed.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from arag.llm.base import ChatModel, ModelError
from metrics.base import Scorer, Scores, ScoringItem, answered, register_scorer
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


class QAScorer(Scorer):
    name = "qa"
    fields = ["qa_contain_match", "qa_judge_score", "qa_judge_correct"]

    def __init__(self, judge: ChatModel | None, no_judge_reason: str):
        self.judge = judge
        self.no_judge_reason = no_judge_reason

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = []
        for item in items:
            s = Scores()
            why = answered(item)
            if item.task.task_type != "qa":
                s.null(self.fields, "not a QA task")
            elif why:
                s.null(self.fields, why)
            else:
                s.values["qa_contain_match"] = float(contain_match(item.task.reference,
                                                                   item.prediction.predicted))
                self._judge(item, s)
            out.append(s)
        return out

    def _judge(self, item: ScoringItem, s: Scores) -> None:
        judged = ["qa_judge_score", "qa_judge_correct"]
        if self.judge is None:
            s.null(judged, self.no_judge_reason)
            return
        try:
            reply = self.judge.complete(
                system="You grade answers to questions about financial filings.",
                messages=[{"role": "user", "content": verdict_prompt(item)}], max_tokens=400)
        except ModelError as exc:
            s.null(judged, f"judge call failed: {exc}")
            return
        score = parse_verdict(reply.text)
        s.values["qa_judge_reasoning"] = reply.text
        s.values["qa_judge_parse_failed"] = score is None
        if score is None:
            s.null(judged, "the judge's reply has no 'Verdict:' line")
        else:
            s.values["qa_judge_score"] = score
            s.values["qa_judge_correct"] = float(score == 1.0)


@register_scorer("qa")
def _qa(cfg: Any, judge: ChatModel | None = None, judge_reason: str = "", **_: Any) -> Scorer:
    return QAScorer(judge, judge_reason or "no judge configured (judge=none)")
