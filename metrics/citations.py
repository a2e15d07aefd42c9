"""Citations bound to sources: does each claim cite a chunk, and does that chunk back it?

Systems that declare ``cites`` are asked to end every bullet or sentence with
``[c:<chunk id>]`` (``arag.citations``). Per answered task:

* a citation is *valid* when it names a chunk the system showed the model: one in its
  context (read, summarized or retrieved into the prompt) or named in a tool result the
  model saw. An invented or unseen id is not;
* ``citation_coverage``: the share of claims with at least one valid citation;
* ``citation_invalid_rate``: of all the citations the answer makes, the share naming a
  chunk the model was never shown (fabricated or unseen ids; lower is better). Null when
  the answer cites nothing;
* ``citation_precision``: of the claims with valid citations whose support could be
  checked, the share their cited chunks back. A claim with figures is backed when the
  cited chunks (their text, without the metadata header) hold every figure (normalised as
  in ``metrics.numeric``); otherwise, and for a claim without figures, the judge is asked
  (``Supported: yes/no``). With no judge a claim without figures is unchecked, and one
  whose figures are not all there is not backed.

Every claim is kept in the record's ``citations`` list (text, cited ids, valid ids, backed
or not and how it was checked), so the eval table and the comparison page show which
chunk backs which bullet. ``citation_claims`` and ``citation_unchecked`` count the
task's claims and those precision could not check. Runs that asked for no citations
(stuffing, the oracle, closed book, ``system.citations=false``) get nulls with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from arag.citations import Claim, claims
from arag.llm.base import ChatModel, Completion, ModelError
from arag.records import Prediction
from arag.trace import ToolCall
from metrics.base import (
    Metric,
    Scorer,
    ScorerEnv,
    Scores,
    ScoringItem,
    answered,
    count_flags,
    register_scorer,
)
from metrics.judging import failure_reason, judge_calls, judge_request
from metrics.numeric import quantities

FIELDS = ["citation_precision", "citation_coverage", "citation_invalid_rate"]
NOT_ASKED = ("this run asked for no citations (the system shows the model no chunk ids, "
             "System.cites=False, or system.citations=false)")
SUPPORTED = re.compile(r"supported\s*\**\s*:\s*\**\s*(yes|no)\b", re.IGNORECASE)
_SYSTEM = "You check whether source passages support claims in financial summaries."


def shown_chunk_ids(pred: Prediction) -> set[str]:
    """Chunks whose id the model saw: its context, and every tool result it was given."""
    shown = set(pred.context_chunk_ids)
    for step in pred.trace:
        if isinstance(step, ToolCall):
            shown.update(step.result_chunk_ids)
    return shown


def support_prompt(claim: str, passages: str) -> str:
    return (f"Source passages:\n{passages}\n\nClaim:\n{claim}\n\nDo the source passages state "
            "what the claim says (every figure, period and entity as the claim gives them)? "
            "Reason in one or two sentences, then end with one line 'Supported: yes' or "
            "'Supported: no'.")


def parse_supported(reply: str) -> bool | None:
    found = SUPPORTED.findall(reply)
    return found[-1].lower() == "yes" if found else None


@dataclass
class CitationOptions:
    judge_support: bool = True  # ask the judge about claims their figures cannot settle


@dataclass
class _Check:
    """One claim of one task on its way to a record."""

    claim: Claim
    valid: list[str]
    supported: bool | None = None
    checked_by: str | None = None  # figures | judge
    judge_reply: str | None = None
    unreadable: bool = False  # the judge replied without a verdict

    def entry(self) -> dict[str, Any]:
        return {"claim": self.claim.text, "cited": list(self.claim.chunk_ids),
                "valid": self.valid, "supported": self.supported, "checked_by": self.checked_by,
                "judge_reply": self.judge_reply}


@register_scorer("citations")
class CitationScorer(Scorer):
    Options = CitationOptions
    metrics = [Metric("citation_precision", "citation precision", report=True),
               Metric("citation_coverage", "citation coverage", report=True),
               # lower is better: citations of chunks the model was never shown
               Metric("citation_invalid_rate", "invalid citations", report=True)]

    @classmethod
    def from_config(cls, options: Any, env: ScorerEnv) -> Scorer:
        judge = env.judge if options.judge_support else None
        return cls(judge, batch=env.judge_batch, concurrency=env.concurrency)

    def __init__(self, judge: ChatModel | None = None, batch: bool = False, concurrency: int = 1):
        self.judge = judge
        self.batch = batch
        self.concurrency = concurrency

    def aggregate(self, answered: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> dict[str, float]:
        """``citation_support_parse_failures``: tasks with a support verdict the judge wrote
        unreadably (those claims stay unchecked)."""
        return count_flags(answered, ["citation_support_parse_failed"]) if self.judge else {}

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = [Scores() for _ in items]
        checks: dict[int, list[_Check]] = {}
        for n, (item, s) in enumerate(zip(items, out, strict=True)):
            why = answered(item) or (None if item.cites else NOT_ASKED)
            if why:
                s.null(FIELDS, why)
                s.values["citations"] = None
                continue
            checks[n] = [self._by_figures(item, c, self.judge is not None)
                         for c in claims(item.cited_answer)]
        self._ask_judge(items, checks)
        for n, task_checks in checks.items():
            _fill(out[n], task_checks, judged=self.judge is not None)
        return out

    def _by_figures(self, item: ScoringItem, claim: Claim, judged: bool) -> _Check:
        shown = shown_chunk_ids(item.prediction)
        check = _Check(claim, [c for c in claim.chunk_ids if c in shown and c in item.chunks])
        figures = quantities(claim.text)
        if check.valid and figures:
            found = quantities("\n".join(item.chunks[c].body for c in check.valid))
            if all(any(f.matches(h) for h in found) for f in figures):
                check.supported, check.checked_by = True, "figures"
            elif not judged:
                check.supported, check.checked_by = False, "figures"
        return check

    def _ask_judge(self, items: list[ScoringItem], checks: dict[int, list[_Check]]) -> None:
        """The judge settles what the figures could not (nothing to do without a judge)."""
        if self.judge is None:
            return
        requests = _support_requests(items, checks)
        if not requests:
            return
        replies = judge_calls(self.judge, requests, self.batch, self.concurrency,
                              lambda text: parse_supported(text) is not None)
        for key, reply in replies.items():
            n, i = map(int, key.split(":"))
            _apply_verdict(checks[n][i], reply)


    def judge_requests(self, items: list[ScoringItem], judge_id: str, primary: bool
                       ) -> dict[str, dict[str, Any]]:
        """One support check per cited claim its figures cannot settle (primary judge)."""
        if self.judge is None or not primary:
            return {}
        checks = {n: [self._by_figures(item, c, True) for c in claims(item.cited_answer)]
                  for n, item in enumerate(items) if item.cites and not answered(item)}
        return _support_requests(items, checks)


def _support_requests(items: list[ScoringItem], checks: dict[int, list[_Check]]
                      ) -> dict[str, dict[str, Any]]:
    """The judge's support check of every cited claim the figures left undecided."""
    return {f"{n}:{i}": judge_request(_SYSTEM, support_prompt(c.claim.text, "\n\n".join(
                items[n].chunks[cid].text for cid in c.valid)), 300)
            for n, task_checks in checks.items()
            for i, c in enumerate(task_checks) if c.valid and c.supported is None}


def _apply_verdict(check: _Check, reply: Completion | ModelError) -> None:
    """The judge's verdict; a failed call or a reply without one leaves the claim unchecked
    (kept in ``judge_reply``), never counted as backed or not."""
    if isinstance(reply, ModelError):
        check.judge_reply = failure_reason(reply)
        return
    verdict = parse_supported(reply.text)
    check.judge_reply = reply.text
    check.unreadable = verdict is None
    check.supported, check.checked_by = verdict, "judge" if verdict is not None else None


def _fill(s: Scores, checks: list[_Check], judged: bool) -> None:
    s.values["citations"] = [c.entry() for c in checks]
    s.values["citation_claims"] = float(len(checks))
    cited = [c for c in checks if c.valid]
    decided = [c for c in cited if c.supported is not None]
    s.values["citation_unchecked"] = float(len(cited) - len(decided))
    # a task with an unreadable support verdict is counted (and held to a threshold)
    s.values["citation_support_parse_failed"] = any(c.unreadable for c in checks)
    if not checks:
        s.null(FIELDS, "the answer has no claims")
        return
    s.values["citation_coverage"] = len(cited) / len(checks)
    made = sum(len(c.claim.chunk_ids) for c in checks)
    if made:
        s.values["citation_invalid_rate"] = sum(len(c.claim.chunk_ids) - len(c.valid)
                                                for c in checks) / made
    else:
        s.null(["citation_invalid_rate"], "the answer cites no chunk")
    if decided:
        s.values["citation_precision"] = sum(bool(c.supported) for c in decided) / len(decided)
    elif not cited:
        s.null(["citation_precision"], "no claim cites a chunk the model was shown")
    else:
        s.null(["citation_precision"], "no cited claim could be checked: none states a figure"
               + ("" if judged else " and there is no judge (judge=none)"))
