"""Requests-per-minute and tokens-per-minute limits, shared by every thread of a run."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable


class RateLimiter:
    """Sliding one-minute window; ``None`` means no limit for that dimension.

    ``acquire(estimate)`` blocks until one more request and ``estimate`` more tokens fit in
    the last minute; ``record(actual, estimate)`` replaces the estimate with the tokens the
    API reported.
    """

    WINDOW = 60.0

    def __init__(self, requests_per_minute: int | None, tokens_per_minute: int | None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self.clock, self.sleep = clock, sleep
        self._events: deque[list[float]] = deque()  # [time, tokens]
        self._lock = threading.Lock()

    def _trim(self, now: float) -> None:
        while self._events and now - self._events[0][0] >= self.WINDOW:
            self._events.popleft()

    def acquire(self, estimated_tokens: int = 0) -> None:
        if self.rpm is None and self.tpm is None:
            return
        tokens = min(estimated_tokens, self.tpm) if self.tpm else estimated_tokens
        while True:
            with self._lock:
                now = self.clock()
                self._trim(now)
                used = sum(e[1] for e in self._events)
                fits_requests = self.rpm is None or len(self._events) < self.rpm
                fits_tokens = self.tpm is None or used + tokens <= self.tpm
                if fits_requests and fits_tokens:
                    self._events.append([now, float(tokens)])
                    return
                wait = self.WINDOW - (now - self._events[0][0]) if self._events else 0.05
            self.sleep(max(0.05, wait))

    def record(self, actual_tokens: int, estimated_tokens: int) -> None:
        """Correct the most recent matching estimate with the tokens really used."""
        if self.rpm is None and self.tpm is None:
            return
        with self._lock:
            for event in reversed(self._events):
                if event[1] == estimated_tokens:
                    event[1] = float(actual_tokens)
                    return
