"""An input-token bucket as the APIs hold one, for the fake servers (``bucket=`` of
``FakeAnthropic`` and ``FakeOpenAI``): ``per_minute`` tokens, refilled continuously over a
``minute_s``-second minute (a time-scaled minute makes a sweep of minutes take seconds).

A request is admitted when its prompt's tokens are in the bucket (a request larger than
the whole bucket, when the bucket is full); otherwise it gets a 429 with ``retry-after``
(the seconds until its tokens are there). Every answer, 429s too, carries the provider's
real header names: Anthropic's ``anthropic-ratelimit-input-tokens-*`` with an RFC 3339
reset, OpenAI's ``x-ratelimit-*-tokens`` with a duration.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime


class TokenBucket:
    def __init__(self, per_minute: int, minute_s: float = 60.0):
        self.limit = float(per_minute)
        self.rate = per_minute / minute_s
        self.level = self.limit
        self.at = time.monotonic()
        self.admitted: list[tuple[float, int]] = []  # (monotonic time, tokens)
        self.refused = 0
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.limit, self.level + self.rate * (now - self.at))
        self.at = now

    def take(self, tokens: int) -> float | None:
        """Admit ``tokens`` (None), or the seconds to wait before they would fit."""
        with self._lock:
            self._refill()
            if tokens <= self.level or self.level >= self.limit:
                self.level -= tokens
                self.admitted.append((self.at, tokens))
                return None
            self.refused += 1
            return (min(tokens, self.limit) - self.level) / self.rate

    def _state(self) -> tuple[int, float]:
        with self._lock:
            self._refill()
            return max(0, int(self.level)), max(0.0, (self.limit - self.level) / self.rate)

    def anthropic_headers(self) -> dict[str, str]:
        remaining, reset_s = self._state()
        reset = datetime.fromtimestamp(time.time() + reset_s, tz=UTC)
        return {"anthropic-ratelimit-input-tokens-limit": str(int(self.limit)),
                "anthropic-ratelimit-input-tokens-remaining": str(remaining),
                "anthropic-ratelimit-input-tokens-reset":
                    reset.isoformat(timespec="milliseconds").replace("+00:00", "Z")}

    def openai_headers(self) -> dict[str, str]:
        remaining, reset_s = self._state()
        return {"x-ratelimit-limit-tokens": str(int(self.limit)),
                "x-ratelimit-remaining-tokens": str(remaining),
                "x-ratelimit-reset-tokens": f"{reset_s:.3f}s"}

    def per_minute_admitted(self, minute_s: float, after: float) -> list[float]:
        """Tokens admitted in each whole ``minute_s`` window from ``after`` on."""
        with self._lock:
            times = [(t, n) for t, n in self.admitted if t >= after]
        if not times:
            return []
        end = times[-1][0]
        windows = int((end - after) // minute_s)
        return [sum(n for t, n in times if after + i * minute_s <= t < after + (i + 1) * minute_s)
                for i in range(windows)]


def retry_after(seconds: float) -> str:
    """A retry-after in seconds; fractional for a time-scaled bucket."""
    return f"{max(seconds, 0.001):.3f}"
