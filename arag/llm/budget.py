"""A spending cap held call by call (``runner.max_cost_usd``).

Every call reserves its estimated cost before it is sent: its prompt (``request_tokens``,
priced at the dearer of the input and cache-write prices) plus ``max_tokens`` of output.
A call is sent only while what was spent plus what the calls in flight reserved is below
the cap; its reply settles the reservation at what the call really cost (a failed call
releases it). So spend passes the cap by at most the calls already in flight when it was
reached, whatever the concurrency. A refused call fails with a ``ModelError`` of kind
``cost_cap``: its task was not run, not answered wrong.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from arag.llm.base import ChatModel, Completion, Message, ModelError, ToolSpec
from arag.llm.cache import WrappedModel
from arag.llm.pricing import Prices
from arag.llm.window import request_tokens

COST_CAP = "cost_cap"  # ModelError.kind of a call the cap refused


class SpendCap:
    """What was spent (``start``, read on first use: e.g. the spend journal's total, then
    every settled call) against ``limit`` USD, with the reservations of calls in flight."""

    def __init__(self, limit: float, start: Callable[[], float] = lambda: 0.0):
        self.limit = limit
        self._start = start
        self._spent: float | None = None
        self._reserved = 0.0
        self._lock = threading.Lock()

    def _base(self) -> float:
        if self._spent is None:
            self._spent = float(self._start())
        return self._spent

    @property
    def spent(self) -> float:
        with self._lock:
            return self._base()

    @property
    def reached(self) -> bool:
        """Spend (settled calls only) is at or over the cap: no new work should start."""
        with self._lock:
            return self._base() >= self.limit

    def reserve(self, estimate: float) -> None:
        """Hold ``estimate`` for a call about to be sent; ModelError(kind=cost_cap) when
        the cap is already taken by spend and the calls in flight."""
        with self._lock:
            committed = self._base() + self._reserved
            if committed >= self.limit:
                raise ModelError(f"not sent: runner.max_cost_usd={self.limit:g} is taken "
                                 f"(${self._spent:.4f} spent, ${self._reserved:.4f} held by "
                                 "calls in flight)", kind=COST_CAP)
            self._reserved += estimate

    def settle(self, estimate: float, actual: float) -> None:
        """A reserved call came back (``actual`` USD) or failed (``actual=0``)."""
        with self._lock:
            self._reserved = max(0.0, self._reserved - estimate)
            self._spent = self._base() + actual

    def charge(self, cost: float) -> None:
        """Spend that reserved nothing (a finished record's cost, where calls are not held)."""
        self.settle(0.0, cost)


class CappedModel(WrappedModel):
    """A model whose every call reserves its cost on ``cap`` before it is sent."""

    def __init__(self, inner: ChatModel, prices: Prices, cap: SpendCap):
        super().__init__(inner)
        self.prices = prices
        self.cap = cap

    def estimate(self, system: str, messages: list[Message], tools: list[ToolSpec] | None,
                 max_tokens: int) -> float:
        """An upper estimate of one call's cost in USD."""
        prompt = request_tokens(self.count_tokens, system, messages, tools, max_tokens) \
            - max_tokens
        per_input = max(self.prices.input, self.prices.cache_write)
        return (prompt * per_input + max_tokens * self.prices.output) / 1_000_000

    def complete(self, system: str, messages: list[Message], tools: list[ToolSpec] | None = None,
                 max_tokens: int = 1024, temperature: float = 0.0,
                 tool_choice: str = "auto") -> Completion:
        held = self.estimate(system, messages, tools, max_tokens)
        self.cap.reserve(held)
        try:
            completion = self.inner.complete(system, messages, tools, max_tokens, temperature,
                                             tool_choice)
        except BaseException:
            self.cap.settle(held, 0.0)
            raise
        self.cap.settle(held, 0.0 if completion.cached else self.prices.cost_usd(completion.usage))
        return completion
