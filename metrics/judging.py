"""Asking a judge: requests, concurrent or batched calls, and several independent samples.

Every scorer that asks a judge (G-Eval, the error taxonomy, factual consistency, QA
verdicts) goes through ``judge_calls``, so each honours ``judge.batch`` and the response
cache the same way. ``judge_request(..., sample=i)`` asks for the i-th independent reply
to the same request (``judge.samples``): the response cache keeps each sample apart, so
every one is paid once and a re-run is free.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arag import progress
from arag.llm.base import SAMPLE, ChatModel, Completion, ModelError, call_arguments
from arag.llm.cache import Unreadable, note_unreadable, reply_sample
from arag.llm.window import CONTEXT_WINDOW
from metrics.base import Scorer, ScorerEnv, ScoringItem, answered

JUDGE_TEMPERATURE = 0.0  # every judge call asks for it (a run records what is sent)


def failure_reason(error: ModelError) -> str:
    """Why a judged field is null after a call that got no reply: a request left unsent
    (it does not fit the judge's window) says so in its own words."""
    return str(error) if error.kind == CONTEXT_WINDOW else f"judge call failed: {error}"


def judge_request(system: str, prompt: str, max_tokens: int, sample: int = 0) -> dict[str, Any]:
    """The keyword arguments of one judge call (``complete``, or an item of a batch), with
    the index of the independent sample it asks for from the second on."""
    request: dict[str, Any] = {"system": system, "messages": [{"role": "user", "content": prompt}],
                               "max_tokens": max_tokens, "temperature": JUDGE_TEMPERATURE}
    if sample:
        request[SAMPLE] = sample
    return request


def judge_calls(judge: ChatModel, requests: dict[str, dict[str, Any]], batch: bool = False,
                concurrency: int = 1, readable: Callable[[str], bool] | None = None
                ) -> dict[str, Completion | ModelError]:
    """Every request's reply or ModelError, by id: as one Message Batch, or concurrent calls.

    A batch that fails as a whole (create, poll or results) gives every item its error,
    so each is recorded null with the reason instead of failing the run. Ids must be
    valid batch custom ids (letters, digits, ``_`` and ``-``). A reply that is not
    ``readable`` is returned (the run records it), counted and marked in the response
    cache, which asks it again on the next run up to ``judge.reask_unreadable`` times;
    the reply carries what became of it (``unreadable_reason``).
    """
    replies = _replies(judge, requests, batch, concurrency)
    for cid, reply in replies.items():
        if readable is not None and isinstance(reply, Completion) and not readable(reply.text):
            reply.meta[UNREADABLE] = note_unreadable(judge, requests[cid])
    return replies


UNREADABLE = "unreadable"  # a reply's meta: what the response cache does with it (Unreadable)


def unreadable_reason(reason: str, *replies: Completion | ModelError | None) -> str:
    """Why a score is null when the judge's reply could not be read: ``reason``, and
    whether the next run asks again or the reply is the last word ("unreadable after N
    asks"); ``reason`` as it is for a reply no response cache keeps."""
    noted = [r.meta[UNREADABLE] for r in replies
             if isinstance(r, Completion) and isinstance(r.meta.get(UNREADABLE), Unreadable)]
    if not noted:
        return reason
    if any(n.again for n in noted):
        return f"{reason} (asked again by the next run of the same command)"
    asks = max(n.asks for n in noted)
    return f"{reason}: unreadable after {asks} ask{'' if asks == 1 else 's'}"


def _replies(judge: ChatModel, requests: dict[str, dict[str, Any]], batch: bool,
             concurrency: int) -> dict[str, Completion | ModelError]:
    if batch:
        try:
            replies = judge.complete_batch(requests)
        except ModelError as exc:
            replies = dict.fromkeys(requests, ModelError(f"the message batch failed: {exc}"))
        missing = ModelError("no result for this request in the message batch")
        return {cid: replies.get(cid, missing) for cid in requests}

    shown = progress.bar("judge", len(requests), "call", show=bool(requests))

    def one(request: dict[str, Any]) -> Completion | ModelError:
        try:
            with reply_sample(judge, request.get(SAMPLE, 0)):
                return judge.complete(**call_arguments(request))
        except ModelError as exc:
            return exc
        finally:
            shown.update(1)

    with shown, ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return dict(zip(requests, pool.map(one, requests.values()), strict=True))


class JudgedScorer(Scorer):
    """A scorer that asks the run's judge once per task (QA verdicts, factual consistency):
    with no judge its judged fields are null with ``no_judge_reason``."""

    @classmethod
    def from_config(cls, options: Any, env: ScorerEnv) -> Scorer:
        return cls(env.judge, env.judge_reason, batch=env.judge_batch,
                   concurrency=env.concurrency)

    def __init__(self, judge: ChatModel | None, no_judge_reason: str, batch: bool = False,
                 concurrency: int = 1):
        self.judge = judge
        self.no_judge_reason = no_judge_reason
        self.batch = batch
        self.concurrency = concurrency

    def request(self, item: ScoringItem) -> dict[str, Any] | None:
        """The judge call for one answered task, or None when it needs none."""
        return None

    def judge_requests(self, items: list[ScoringItem], judge_id: str, primary: bool
                       ) -> dict[str, dict[str, Any]]:
        """One call per answered task that needs one, to the primary judge only."""
        if self.judge is None or not primary:
            return {}
        found = {str(n): self.request(item) for n, item in enumerate(items)
                 if not answered(item)}
        return {n: r for n, r in found.items() if r is not None}

    def ask(self, requests: dict[str, dict[str, Any]],
            readable: Callable[[str], bool] | None = None) -> dict[str, Completion | ModelError]:
        """The judge's replies; one not ``readable`` is never cached (``judge_calls``)."""
        assert self.judge is not None
        return judge_calls(self.judge, requests, self.batch, self.concurrency, readable)


@dataclass
class Sampled:
    """A judge's replies to the samples of one request, read by ``parse``."""

    scores: list[float | None]  # per sample: the parsed score (None: failed call or parse)
    replies: list[str | None]  # per sample: the reply verbatim (None: the call failed)
    errors: list[str] = field(default_factory=list)  # calls without a reply: why
    answers: list[Completion | ModelError] = field(default_factory=list, repr=False)

    @classmethod
    def read(cls, replies: list[Completion | ModelError], parse: Any) -> Sampled:
        out = cls([], [], answers=list(replies))
        for reply in replies:
            if isinstance(reply, ModelError):
                out.scores.append(None)
                out.replies.append(None)
                out.errors.append(failure_reason(reply))
            else:
                score = parse(reply.text)
                out.scores.append(float(score) if score is not None else None)
                out.replies.append(reply.text)
        return out

    def null_reason(self, reason: str) -> str:
        """``reason`` for an item none of whose samples could be read, saying whether the
        next run asks again (``unreadable_reason``)."""
        return unreadable_reason(reason, *self.answers)

    @property
    def parsed(self) -> list[float]:
        return [s for s in self.scores if s is not None]

    @property
    def answered(self) -> bool:
        """At least one call came back (else: the judge call failed)."""
        return any(r is not None for r in self.replies)

    @property
    def score(self) -> float | None:
        """The item's score: the mean of the parsed samples."""
        return float(np.mean(self.parsed)) if self.parsed else None

    @property
    def spread(self) -> float | None:
        """The judge's own SD over its parsed samples (ddof=1); None below two."""
        return float(np.std(self.parsed, ddof=1)) if len(self.parsed) >= 2 else None

    @property
    def first_reply(self) -> str | None:
        return next((r for r in self.replies if r is not None), None)

    @property
    def parse_failures(self) -> int:
        """Samples the judge answered without a readable score."""
        return sum(1 for s, r in zip(self.scores, self.replies, strict=True)
                   if r is not None and s is None)
