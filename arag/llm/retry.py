"""The retry loop every provider shares: exponential backoff with jitter, the server's own
wait when it names one, and a clear error when the attempts run out.

A server's ``retry-after`` is honoured within bounds, both from the provider's settings:
its floor is the backoff of that attempt (``retry_base_delay_s * 2**attempt`` with jitter),
so a ``retry-after: 0`` during a burst does not spend every attempt in milliseconds; its
ceiling is ``retry_after_max_s`` (60 s by default): a server asking for longer fails the
call at once with a message that says so, instead of sleeping an hour per attempt.

A provider only says what an exception means (``ChatModel.classify_error``): retryable or
not, and its kind. Everything else (how often, how long, what the final error says) is here.

Each attempt passes its account's rate limiter (``arag.llm.limits``) when the provider
hands one (``pace``): admitted before it is sent, settled with its answer's usage and
headers, or told of its failure (a 429's headers and retry-after are news to every
request on the account).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from arag.llm.base import APIFailure, ModelError

if TYPE_CHECKING:
    from arag.llm.limits import Pace

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    retry_after_max_s: float = 60.0  # the longest retry-after waited for

    def backoff(self, attempt: int) -> float:
        """``base * 2**attempt``, at most ``max_delay_s``, times a jitter in [0.5, 1)."""
        return min(self.max_delay_s, self.base_delay_s * 2 ** attempt) * (0.5 + random.random() / 2)

    def wait(self, attempt: int, failure: APIFailure, label: str) -> float:
        """How long to wait before retry ``attempt + 1``: the server's retry-after, at least
        the backoff; a retry-after above ``retry_after_max_s`` raises ModelError."""
        asked = failure.retry_after_s
        if asked is not None and asked > self.retry_after_max_s:
            raise ModelError(
                f"{label}: the server asks to wait {asked:g} s before retrying (retry-after), "
                f"longer than retry_after_max_s={self.retry_after_max_s:g} s; the call fails "
                f"now instead of waiting ({failure.message}). Fix: run the same command later "
                "(only errored tasks run again), or raise model.retry_after_max_s (judge."
                "retry_after_max_s for the judge)", kind=failure.kind)
        floor = self.backoff(attempt)
        return floor if asked is None else max(asked, floor)


def call_with_retries(call: Callable[[], T], classify: Callable[[Exception], APIFailure | None],
                      policy: RetryPolicy, label: str, sleep: Callable[[float], object],
                      pace: Pace | None = None) -> T:
    """``call()``, retried while ``classify`` says its failure is retryable; each attempt
    paced by ``pace`` when given.

    A non-retryable failure raises ModelError at once with the API's message; an exception
    ``classify`` does not recognise is raised unchanged (it is a bug, not an outage).
    """
    last: APIFailure | None = None
    for attempt in range(policy.max_retries + 1):
        if pace is not None:
            pace.admit()
        try:
            result = call()
        except BaseException as exc:
            failure = classify(exc) if isinstance(exc, Exception) else None
            if pace is not None:
                pace.failed(exc, failure)
            if failure is None:
                raise
            if not failure.retryable:
                raise ModelError(failure.message, kind=failure.kind) from None
            last = failure
        else:
            if pace is not None:
                pace.succeeded(result)
            return result
        if attempt < policy.max_retries:
            wait = policy.wait(attempt, last, label)
            log.info("%s: %s; retry %d/%d in %.1fs", label, last.message, attempt + 1,
                     policy.max_retries, wait)
            sleep(wait)
    assert last is not None
    raise ModelError(f"{label}: gave up after {policy.max_retries + 1} attempts; last error: "
                     f"{last.message}", kind=last.kind)
