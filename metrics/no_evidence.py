"""No-evidence accuracy: on tasks whose documents hold no answer (``answerable=false``:
out-of-scope questions, sources that do not exist, false premises), does the answer decline
as the task expects instead of inventing one?

The judge is shown the question, the expected behaviour (``Task.meta["expected_behaviour"]``,
else the reference) and the answer, and ends with ``Verdict: declined`` or ``Verdict:
answered``; ``no_evidence_accuracy`` is 1 for declined, 0 for answered. A reply without a
verdict is null and counted (``no_evidence_parse_failures``), never guessed. Answerable
tasks are null with the reason; with no judge, every such task is null with that reason.
"""

from __future__ import annotations

import re
from typing import Any

from arag.llm.base import Completion, ModelError
from metrics.base import Metric, Scores, ScoringItem, answered, count_flags, register_scorer
from metrics.judging import JudgedScorer, failure_reason, judge_request, unreadable_reason

VERDICT = re.compile(r"verdict\s*\**\s*[:=]\s*\**\s*(declined|answered)", re.IGNORECASE)
ANSWERABLE = "the task is answerable from its documents (no_evidence scores answerable=false)"
_SYSTEM = "You check whether answers about financial filings admit what the sources lack."


def no_evidence_prompt(item: ScoringItem) -> str:
    expected = item.task.meta.get("expected_behaviour") or item.task.reference
    return (f"The documents given to a system do not answer this question.\n\nQuestion:\n"
            f"{item.task.question}\n\nWhat a good answer does:\n{expected}\n\nThe system's "
            f"answer:\n{item.prediction.predicted}\n\nDid the answer decline as expected (say "
            "the information is not in the documents, or reject a false premise) rather than "
            "give an answer as if the documents held one? Reason in one sentence, then end "
            "with one line 'Verdict: declined' or 'Verdict: answered'.")


def parse_no_evidence(reply: str) -> float | None:
    found = VERDICT.findall(reply)
    return float(found[-1].lower() == "declined") if found else None


@register_scorer("no_evidence")
class NoEvidenceScorer(JudgedScorer):
    metrics = [Metric("no_evidence_accuracy", "no-evidence accuracy", report=True)]

    def request(self, item: ScoringItem) -> dict[str, Any] | None:
        if item.task.answerable:
            return None
        return judge_request(_SYSTEM, no_evidence_prompt(item), 200)

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = [Scores() for _ in items]
        todo: dict[str, tuple[ScoringItem, Scores]] = {}
        for n, (item, s) in enumerate(zip(items, out, strict=True)):
            why = ANSWERABLE if item.task.answerable else answered(item)
            if why is None and self.judge is None:
                why = self.no_judge_reason
            if why:
                _unjudged(s, why)
            else:
                todo[str(n)] = (item, s)
        if todo:
            replies = self.ask({key: self._asked(item) for key, (item, _) in todo.items()},
                               lambda text: parse_no_evidence(text) is not None)
            for key, (_, scores) in todo.items():
                _apply(scores, replies[key])
        return out

    def _asked(self, item: ScoringItem) -> dict[str, Any]:
        request = self.request(item)
        assert request is not None
        return request

    def aggregate(self, answered: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> dict[str, float]:
        return count_flags(records, ["no_evidence_parse_failed"])


def _unjudged(s: Scores, reason: str) -> None:
    s.null(["no_evidence_accuracy"], reason)
    s.values["no_evidence_reasoning"] = None
    s.values["no_evidence_parse_failed"] = None


def _apply(s: Scores, reply: Completion | ModelError) -> None:
    if isinstance(reply, ModelError):
        _unjudged(s, failure_reason(reply))
        return
    verdict = parse_no_evidence(reply.text)
    s.values.update(no_evidence_reasoning=reply.text, no_evidence_parse_failed=verdict is None,
                    no_evidence_accuracy=verdict)
    if verdict is None:
        s.null_reasons["no_evidence_accuracy"] = unreadable_reason(
            "the judge's reply has no 'Verdict:' line", reply)
