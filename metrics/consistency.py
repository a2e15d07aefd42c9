"""Factual consistency: the judge checks every numerical claim against the used context.

String matching of numbers (``metrics.numeric``) misses a right number in the wrong place
or a wrong unit. Here the judge lists each numerical claim of the summary and marks it
``verified`` (the context states this figure for this metric, entity and period),
``unsupported`` (the context does not say) or ``contradicted`` (the context says
otherwise), against the context the system actually used (``System.judged_context``).

``factual_consistency`` = verified claims / all claims. The claims with their verdicts are
kept (``factual_consistency_claims``), and the reply verbatim. When ``attribution`` is
listed after it, the same request also lists the task's gold facts and asks which the
summary reflects (``metrics.attribution.gold_question``; ``factual_consistency_gold_facts``
says how many): attribution reads the reply, so no second call is made. A summary with no numerical
claim is null with that reason (nothing to verify is not 100%); a reply with neither claim
lines nor ``Claims: none`` is a parse failure, null and counted. Without a judge every
field is null with the reason. Calls go through the response cache and honour
``judge.batch``.
"""

from __future__ import annotations

import re
from typing import Any

from arag.llm.base import Completion, ModelError
from metrics.attribution import GOLD_ASKED, fact_sources, gold_question
from metrics.base import (
    NO_CONTEXT,
    Metric,
    Scorer,
    ScorerEnv,
    Scores,
    ScoringItem,
    answered,
    count_flags,
    register_scorer,
)
from metrics.judging import JudgedScorer, failure_reason, judge_request, unreadable_reason

VERDICTS = ("verified", "unsupported", "contradicted")
CLAIM = re.compile(r"^[\s*\-\d.)]*claim\s*:\s*(?P<claim>.+?)\s*\|\s*verdict\s*:\s*\**\s*"
                   r"(?P<verdict>verified|unsupported|contradicted)\b", re.IGNORECASE | re.MULTILINE)
NO_CLAIMS = re.compile(r"^\s*claims\s*:\s*none\b", re.IGNORECASE | re.MULTILINE)
_SYSTEM = "You verify the figures in financial summaries against their sources."


def claims_prompt(item: ScoringItem, gold_facts: bool = False) -> str:
    """The claim check's request; ``gold_facts``: with the gold-fact question appended."""
    question = gold_question(item) if gold_facts else None
    return _claims_prompt(item) + (f"\n\n{question}" if question else "")


def _claims_prompt(item: ScoringItem) -> str:
    return (
        "Check the numerical claims of a predicted summary against the source context it was "
        f"written from.\n\nSource context:\n{item.context_text or '(the system read no context)'}"
        f"\n\nPredicted summary:\n{item.prediction.predicted}\n\nList every numerical claim the "
        "summary makes (each statement of an amount, percentage, per-share value, count, "
        "growth rate or range). Judge each against the source context only:\n"
        "- verified: the context states this figure for this metric, entity and period;\n"
        "- unsupported: the context neither states nor contradicts it;\n"
        "- contradicted: the context states a different figure, unit, period or entity.\n"
        "Reply with one line per claim, exactly 'Claim: <the claim> | Verdict: verified' "
        "(or unsupported, or contradicted). If the summary makes no numerical claim, reply "
        "with the single line 'Claims: none'."
    )


def parse_claims(reply: str) -> list[dict[str, str]] | None:
    """The claims and verdicts of a reply; [] for 'Claims: none'; None: unreadable."""
    claims = [{"claim": m.group("claim").strip(), "verdict": m.group("verdict").lower()}
              for m in CLAIM.finditer(reply)]
    if claims:
        return claims
    return [] if NO_CLAIMS.search(reply) else None


@register_scorer("factual_consistency")
class FactualConsistencyScorer(JudgedScorer):
    metrics = [Metric("factual_consistency", "factual consistency", report=True)]
    extra = ("factual_consistency_claims", "factual_consistency_reply",
             "factual_consistency_parse_failed", GOLD_ASKED)

    gold_facts = False  # also ask which gold facts the summary reflects

    @classmethod
    def from_config(cls, options: Any, env: ScorerEnv) -> Scorer:
        scorer = cls(env.judge, env.judge_reason, batch=env.judge_batch,
                     concurrency=env.concurrency)
        # attribution, listed after it, reads the gold-fact verdicts from this reply
        scorer.gold_facts = "attribution" in env.scorers
        return scorer

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = [Scores() for _ in items]
        todo: dict[str, tuple[ScoringItem, Scores]] = {}
        requests: dict[str, dict[str, Any]] = {}
        for n, (item, s) in enumerate(zip(items, out, strict=True)):
            why = self.no_judge_reason if self.judge is None else (
                answered(item) or (NO_CONTEXT if item.context_text is None else None))
            if why:
                self._unjudged(s, why)
            else:
                todo[str(n)] = (item, s)
                requests[str(n)] = self.request(item)
        if self.judge is not None and requests:
            replies = self.ask(requests, lambda text: parse_claims(text) is not None)
            for cid, (item, scores) in todo.items():
                self._apply(item, scores, replies[cid])
        return out

    def request(self, item: ScoringItem) -> dict[str, Any]:
        return judge_request(_SYSTEM, claims_prompt(item, self.gold_facts), 1200)

    def aggregate(self, answered: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> dict[str, float]:
        return count_flags(records, ["factual_consistency_parse_failed"])

    def _unjudged(self, s: Scores, reason: str) -> None:
        s.null(["factual_consistency"], reason)
        for key in self.extra:
            s.values[key] = None

    def _apply(self, item: ScoringItem, s: Scores, reply: Completion | ModelError) -> None:
        if isinstance(reply, ModelError):
            self._unjudged(s, failure_reason(reply))
            return
        claims = parse_claims(reply.text)
        s.values.update(factual_consistency_reply=reply.text,
                        factual_consistency_claims=claims,
                        factual_consistency_parse_failed=claims is None,
                        **{GOLD_ASKED: len(fact_sources(item)) if self.gold_facts else None})
        if claims is None:
            s.null(["factual_consistency"], unreadable_reason(
                "the judge's reply lists no 'Claim: ... | Verdict: ...' line and does not say "
                "'Claims: none'", reply))
        elif not claims:
            s.null(["factual_consistency"], "the summary makes no numerical claim to verify")
        else:
            s.values["factual_consistency"] = (
                sum(c["verdict"] == "verified" for c in claims) / len(claims))
