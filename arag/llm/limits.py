"""The rate limiter every provider's calls pass through: one per account, learning its
budgets from the answers' rate-limit headers.

One limiter per provider, endpoint, API key and model (``limiter_for``): the providers hold
their limits per model, so a judge on the agent's model shares the agent's budget, and a
judge on another model has its own. Every thread of the process asks the same limiter.

A request is admitted when a slot is free and it fits every budget the limiter knows
(``arag.llm.rate_headers``: requests, input tokens, output tokens, tokens):

* Its cost: 1 request; its prompt's estimated tokens (``arag.llm.tokens``, the dry run's
  estimate) as input tokens; its ``max_tokens`` as output tokens; both as ``tokens``
  (``model.tokens_per_minute`` keeps its meaning: prompt plus ``max_tokens`` when a request
  is admitted, every token the answer reports once it is back). Input and output estimates
  are scaled by what answers really used (a prompt mostly read from the cache counts little
  towards Anthropic's input budget).
* A budget is a bucket: known from the last answer's headers (``remaining`` of ``limit``,
  full again at ``reset``: it refills at that pace), less what this process sent since;
  before the first answer, from the config (``model.requests_per_minute``,
  ``tokens_per_minute``, ``input_tokens_per_minute``, ``output_tokens_per_minute``: a full
  bucket refilling in a minute), which headers then replace. What other processes on the
  same key spend shows in the headers as budget gone that this one did not send; its pace
  is learned and left to them.
* A small share of each budget is kept unspent (``KEPT``): the other processes' requests in
  flight, and the estimate's error, fall into it instead of into a 429.
* A request larger than a whole budget waits for a full bucket and goes alone.
* Requests wait their turn in order; ``runner.concurrency`` (the threads asking) is the
  ceiling, never a target.

A 429 is news: its headers are read like any answer's, new requests wait out its
``retry-after`` (the one that got it waits in the retry loop, not twice), and the slots
are halved (at most once per round of requests) and given back one by one per success
(AIMD). A server that sends no rate-limit headers and no limits configured sees what it
always saw until its first 429; from then on AIMD paces it.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from arag.llm.base import APIFailure, Usage
from arag.llm.rate_headers import (
    BUDGETS,
    INPUT,
    OUTPUT,
    REQUESTS,
    TOKENS,
    HeaderScheme,
    Reading,
)

KEPT = 0.05  # share of each budget left unspent
LEARN = 0.2  # weight of the newest observation in the learned averages
SCALE_RANGE = (0.02, 2.0)  # what an estimate may be scaled by
RECENT_S = 120.0  # how long a sent request is remembered (to reckon headers against)
POLL_S = 1.0  # the longest wait before the state is looked at again
RATE_LIMITED = "rate_limit"  # APIFailure.kind of a 429
PACE_SPAN_MIN_S = 15.0  # the shortest span a shown pace is measured over


@dataclass(frozen=True)
class Seeds:
    """Limits known before the first answer (per minute; None: not known)."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    input_tokens_per_minute: int | None = None
    output_tokens_per_minute: int | None = None

    @classmethod
    def from_config(cls, cfg: Any) -> Seeds:
        return cls(*(getattr(cfg, f"{budget}_per_minute", None) for budget in
                     (REQUESTS, TOKENS, INPUT, OUTPUT)))

    def per_minute(self) -> dict[str, float]:
        given = {REQUESTS: self.requests_per_minute, TOKENS: self.tokens_per_minute,
                 INPUT: self.input_tokens_per_minute, OUTPUT: self.output_tokens_per_minute}
        return {budget: float(v) for budget, v in given.items() if v}


@dataclass
class Demand:
    """What one request asks: its prompt's tokens (estimated on first need) and its
    ``max_tokens``."""

    prompt: Callable[[], int]
    max_tokens: int
    _tokens: int | None = field(default=None, repr=False)

    def prompt_tokens(self) -> int:
        if self._tokens is None:
            self._tokens = int(self.prompt())
        return self._tokens


def counted(usage: Usage, scheme: HeaderScheme | None) -> dict[str, float]:
    """What an answer's usage spent of each budget, as the provider counts it."""
    reads = usage.cache_read_input_tokens if scheme is None or scheme.cache_reads_count else 0
    prompt = usage.input_tokens + usage.cache_creation_input_tokens + reads
    return {REQUESTS: 1.0, INPUT: float(prompt), OUTPUT: float(usage.output_tokens),
            TOKENS: float(usage.input_tokens + usage.cache_creation_input_tokens
                          + usage.cache_read_input_tokens + usage.output_tokens)}


@dataclass(eq=False)
class Ticket:
    """One admitted request: when it was sent and what it holds of each budget (its
    estimate until its answer says what it spent)."""

    sent_at: float
    cost: dict[str, float]
    estimate: dict[str, float]  # unscaled input and output estimates


class Bucket:
    """One budget as this process reckons it: ``level`` at time ``at``, refilling at
    ``rate`` per second (less ``others``: what other processes spend) up to ``limit``."""

    def __init__(self, limit: float, rate: float, now: float, learned: bool = False):
        self.limit, self.rate, self.level, self.at = limit, rate, limit, now
        self.learned = learned
        self.others = 0.0
        self.heard_at: float | None = None  # send time of the request it was last told at
        self.anchor: tuple[float, float] | None = None  # (time, remaining) to learn others by

    @property
    def pace(self) -> float:
        """Refill per second left to this process (at least a quarter of the whole)."""
        return max(self.rate - self.others, self.rate / 4)

    def level_at(self, now: float) -> float:
        return min(self.limit, self.level + self.pace * max(0.0, now - self.at))

    def take(self, amount: float, now: float) -> None:
        self.level, self.at = self.level_at(now) - amount, now

    def counts(self, ticket: Ticket) -> bool:
        """Whether ``ticket``'s cost is reckoned locally (sent after the last header)."""
        return self.heard_at is None or ticket.sent_at > self.heard_at


@dataclass(frozen=True)
class Totals:
    wait_s: float = 0.0  # time requests waited for admission, summed over requests
    rate_limited: int = 0  # 429s
    requests: int = 0

    def __sub__(self, other: Totals) -> Totals:
        return Totals(self.wait_s - other.wait_s, self.rate_limited - other.rate_limited,
                      self.requests - other.requests)


class RateLimiter:
    """See the module's docstring. ``clock`` and ``sleep`` are for tests (a fake clock);
    by default waits end early when another request's answer changes the state."""

    def __init__(self, seeds: Seeds | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] | None = None):
        self.clock, self._sleep = clock, sleep
        self._cond = threading.Condition()
        now = clock()
        self.buckets = {budget: Bucket(v, v / 60.0, now)
                        for budget, v in (seeds or Seeds()).per_minute().items()}
        self.scale = {INPUT: 1.0, OUTPUT: 1.0}
        self.slots: float | None = None  # AIMD's slots; None: no 429 yet
        self.in_flight = 0
        self.hold_until = -math.inf
        self._halved_at = -math.inf
        self._recent: deque[Ticket] = deque()
        self._queue: deque[object] = deque()
        self._answered: deque[tuple[float, float, float]] = deque()  # (time, input, tokens)
        self._started = now
        self.totals = Totals()

    def seed(self, seeds: Seeds) -> None:
        """Further limits (another config on the same account): the stricter holds."""
        with self._cond:
            now = self.clock()
            for budget, v in seeds.per_minute().items():
                known = self.buckets.get(budget)
                if known is None or (not known.learned and v < known.limit):
                    self.buckets[budget] = Bucket(v, v / 60.0, now)

    # admission ------------------------------------------------------------------------

    def acquire(self, demand: Demand, waited_until: float = -math.inf) -> Ticket:
        """Wait until ``demand`` may be sent, then hold its cost. ``waited_until``: the end
        of a hold the caller has already waited out (its own 429's retry-after)."""
        me = object()
        with self._cond:
            start = self.clock()
            self._queue.append(me)
            try:
                while True:
                    now = self.clock()
                    wait = self._wait(demand, now, waited_until) if self._queue[0] is me \
                        else POLL_S
                    if wait <= 0:
                        break
                    self._pause(min(wait, POLL_S))
            finally:
                self._queue.remove(me)
                self._cond.notify_all()
            return self._admit(demand, now, now - start)

    def _cost(self, demand: Demand) -> dict[str, float]:
        cost = {REQUESTS: 1.0}
        if INPUT in self.buckets or TOKENS in self.buckets:
            cost[INPUT] = demand.prompt_tokens() * self.scale[INPUT]
            cost[TOKENS] = float(demand.prompt_tokens() + demand.max_tokens)
        cost[OUTPUT] = demand.max_tokens * self.scale[OUTPUT]
        return cost

    def _wait(self, demand: Demand, now: float, waited_until: float) -> float:
        """Seconds until ``demand`` may go (0 or less: now)."""
        waits = [0.0]
        if self.hold_until > waited_until + 1e-6:
            waits.append(self.hold_until - now)
        if self.slots is not None and self.in_flight >= max(1, int(self.slots)):
            waits.append(POLL_S)  # an answer frees a slot and wakes the queue
        cost = self._cost(demand)
        for budget, bucket in self.buckets.items():
            need = cost.get(budget, 0.0)
            if need + KEPT * bucket.limit > bucket.limit:  # larger than the whole budget
                if self.in_flight:
                    waits.append(POLL_S)
                need = bucket.limit * (1 - 1e-6)
            else:
                need += KEPT * bucket.limit
            level = bucket.level_at(now)
            if level < need:
                waits.append((need - level) / bucket.pace)
        return max(waits)

    def _admit(self, demand: Demand, now: float, waited: float) -> Ticket:
        cost = self._cost(demand)
        estimate = {OUTPUT: float(demand.max_tokens)}
        if INPUT in cost:
            estimate[INPUT] = float(demand.prompt_tokens())
        ticket = Ticket(now, cost, estimate)
        for budget, bucket in self.buckets.items():
            bucket.take(cost.get(budget, 0.0), now)
        self.in_flight += 1
        self._recent.append(ticket)
        while self._recent and now - self._recent[0].sent_at > RECENT_S:
            self._recent.popleft()
        t = self.totals
        self.totals = Totals(t.wait_s + waited, t.rate_limited, t.requests + 1)
        return ticket

    def _pause(self, seconds: float) -> None:
        if self._sleep is None:
            self._cond.wait(seconds)
            return
        self._cond.release()
        try:
            self._sleep(seconds)
        finally:
            self._cond.acquire()

    # answers --------------------------------------------------------------------------

    def settle(self, ticket: Ticket, spent: dict[str, float], reading: Reading | None) -> None:
        """``ticket``'s answer came back: it ``spent`` this much of each budget (its usage),
        and its headers said ``reading``."""
        with self._cond:
            now = self.clock()
            self.in_flight -= 1
            for budget in (INPUT, OUTPUT):
                estimated = ticket.estimate.get(budget)
                if estimated and budget in spent:
                    ratio = spent[budget] / estimated
                    low, high = SCALE_RANGE
                    self.scale[budget] = min(high, max(low, (1 - LEARN) * self.scale[budget]
                                                       + LEARN * ratio))
            for budget, bucket in self.buckets.items():
                if budget in spent and bucket.counts(ticket):
                    bucket.level += ticket.cost.get(budget, 0.0) - spent[budget]
            ticket.cost.update({b: v for b, v in spent.items()})
            if reading is not None:
                self._hear(reading, ticket.sent_at, now)
            if self.slots is not None:
                self.slots += 1 / max(1.0, self.slots)
            self._answered.append((now, spent.get(INPUT, 0.0), spent.get(TOKENS, 0.0)))
            while self._answered and now - self._answered[0][0] > 60:
                self._answered.popleft()
            self._cond.notify_all()

    def failed(self, ticket: Ticket, failure: APIFailure | None, reading: Reading | None
               ) -> float:
        """``ticket``'s request failed (``failure``: what the provider says it was; None:
        not an API failure). Returns the end of the hold a 429 set, which the caller waits
        out itself (``acquire``'s ``waited_until``)."""
        with self._cond:
            now = self.clock()
            self.in_flight -= 1
            for budget, bucket in self.buckets.items():  # a refused request spent nothing
                if bucket.counts(ticket):
                    bucket.level += ticket.cost.get(budget, 0.0)
            ticket.cost = {}
            if failure is None or failure.kind != RATE_LIMITED:
                self._cond.notify_all()
                return -math.inf
            self.totals = Totals(self.totals.wait_s, self.totals.rate_limited + 1,
                                 self.totals.requests)
            if reading is not None:  # said when the request arrived, before later ones
                self._hear(reading, ticket.sent_at, now)
            else:  # nothing said: take every known budget as spent
                for bucket in self.buckets.values():
                    bucket.level, bucket.at = min(bucket.level_at(now), 0.0), now
            if ticket.sent_at > self._halved_at:  # news of this round, not of an earlier one
                self.slots = max(1.0, (self.in_flight + 1) / 2)
                self._halved_at = now
            if failure.retry_after_s:
                self.hold_until = max(self.hold_until, now + failure.retry_after_s)
            self._cond.notify_all()
            return self.hold_until

    def _hear(self, reading: Reading, said_at: float, now: float) -> None:
        """Take what headers said at ``said_at`` (the send time of the request they answer)."""
        for budget, told in reading.budgets.items():
            spent = told.limit - told.remaining
            heard_rate = spent / told.reset_s if told.reset_s and spent > 0.02 * told.limit \
                else None
            bucket = self.buckets.get(budget)
            if bucket is None or not bucket.learned:
                bucket = self.buckets[budget] = Bucket(
                    told.limit, heard_rate or told.limit / 60.0, now, learned=True)
            bucket.limit = told.limit
            if heard_rate:
                bucket.rate = (1 - LEARN) * bucket.rate + LEARN * heard_rate
            if bucket.heard_at is not None and said_at < bucket.heard_at:
                continue  # an older answer than the one it was last told by
            self._learn_others(bucket, budget, told.remaining, said_at)
            bucket.heard_at = said_at
            mine_since = sum(t.cost.get(budget, 0.0) for t in self._recent if t.sent_at > said_at)
            bucket.level = min(bucket.limit, told.remaining + bucket.pace * (now - said_at)) \
                - mine_since
            bucket.at = now

    def _learn_others(self, bucket: Bucket, budget: str, remaining: float, said_at: float) -> None:
        """What went from the budget between two headers, beyond what this process sent,
        was spent by others on the key: learn their pace, over spans long enough to refill
        a ``KEPT`` share."""
        if bucket.anchor is None:
            bucket.anchor = (said_at, remaining)
            return
        since, then = bucket.anchor
        span = said_at - since
        if span < KEPT * bucket.limit / bucket.rate:
            return
        mine = sum(t.cost.get(budget, 0.0) for t in self._recent if since < t.sent_at <= said_at)
        expected = min(bucket.limit, then + bucket.rate * span) - mine
        bucket.others = max(0.0, (1 - LEARN) * bucket.others + LEARN * (expected - remaining) / span)
        bucket.anchor = (said_at, remaining)

    # what it did ----------------------------------------------------------------------

    def pace(self) -> tuple[float, float | None, str] | None:
        """Tokens per minute its answers spent over the last minute, the limit they are
        held to (None: not known) and which tokens (``input`` or all); None before any."""
        with self._cond:
            if not self._answered:
                return None
            now = self.clock()
            span = min(60.0, max(PACE_SPAN_MIN_S, now - self._started))  # no wild first guess
            budget = INPUT if INPUT in self.buckets or TOKENS not in self.buckets else TOKENS
            column = 1 if budget == INPUT else 2
            per_minute = sum(a[column] for a in self._answered if now - a[0] <= 60) * 60 / span
            known = self.buckets.get(budget)
            return per_minute, known.limit if known else None, \
                "input" if budget == INPUT else "all"


class Pace:
    """One call's passage through its limiter, attempt by attempt (the retry loop's
    ``admit``, ``succeeded`` and ``failed``); the provider hands it each answer's headers
    (``heard``), read with the provider's declared ``scheme``."""

    def __init__(self, limiter: RateLimiter, demand: Demand, scheme: HeaderScheme | None,
                 wall: Callable[[], float] = time.time):
        self.limiter, self.demand, self.scheme, self.wall = limiter, demand, scheme, wall
        self.ticket: Ticket | None = None
        self.headers: Mapping[str, str] | None = None
        self._waited_until = -math.inf

    def admit(self) -> None:
        self.headers = None
        self.ticket = self.limiter.acquire(self.demand, self._waited_until)

    def heard(self, headers: Mapping[str, str] | None) -> None:
        self.headers = headers

    def _reading(self, headers: Mapping[str, str] | None) -> Reading | None:
        return self.scheme.read(headers, self.wall()) if self.scheme is not None else None

    def succeeded(self, result: Any) -> None:
        assert self.ticket is not None
        usage = getattr(result, "usage", None)
        spent = counted(usage, self.scheme) if isinstance(usage, Usage) else {}
        self.limiter.settle(self.ticket, spent, self._reading(self.headers))

    def failed(self, exc: BaseException, failure: APIFailure | None) -> None:
        assert self.ticket is not None
        headers = getattr(getattr(exc, "response", None), "headers", None) or self.headers
        self._waited_until = self.limiter.failed(self.ticket, failure, self._reading(headers))


# the process's limiters -----------------------------------------------------------------

_LIMITERS: dict[tuple[str, str, str, str], RateLimiter] = {}
_LOCK = threading.Lock()


def limiter_for(provider: str, endpoint: str | None, key: str, model_id: str,
                seeds: Seeds) -> RateLimiter:
    """The process's limiter for this account (provider, endpoint, key) and model; the
    key is kept only as a digest."""
    account = (provider, endpoint or "", hashlib.sha256(key.encode()).hexdigest()[:16],
               model_id)
    with _LOCK:
        limiter = _LIMITERS.get(account)
        if limiter is None:
            limiter = _LIMITERS[account] = RateLimiter(seeds)
        else:
            limiter.seed(seeds)
        return limiter


def totals() -> Totals:
    """What every limiter of the process did so far (a run takes the difference)."""
    with _LOCK:
        limiters = list(_LIMITERS.values())
    found = Totals()
    for limiter in limiters:
        t = limiter.totals
        found = Totals(found.wait_s + t.wait_s, found.rate_limited + t.rate_limited,
                       found.requests + t.requests)
    return found


def pace_words() -> str | None:
    """The busiest limiter's pace, for a progress bar: ``38k/40k input tok/min``."""
    with _LOCK:
        limiters = list(_LIMITERS.values())
    paces = [p for p in (limiter.pace() for limiter in limiters) if p is not None]
    if not paces:
        return None
    per_minute, limit, which = max(paces, key=lambda p: p[0])
    shown = _short(per_minute) + (f"/{_short(limit)}" if limit else "")
    return f"{shown} {which + ' ' if which == 'input' else ''}tok/min"


def _short(n: float) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e3 else f"{n:.0f}"


def forget() -> None:
    """Drop every limiter (a new process's state; for tests)."""
    with _LOCK:
        _LIMITERS.clear()


__all__ = ["BUDGETS", "Demand", "Pace", "RateLimiter", "Seeds", "Totals", "counted", "forget",
           "limiter_for", "pace_words", "totals"]
