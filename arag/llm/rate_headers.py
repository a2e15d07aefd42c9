"""How a provider's answers say what is left of its rate limits.

A provider declares a ``HeaderScheme`` (as it declares its retryable errors): for each
budget it reports, the names of its limit, remaining and reset headers, and how a reset
reads. ``read`` turns an answer's headers into a ``Reading`` the limiter learns from
(``arag.llm.limits``). The budgets:

* ``requests``: requests; a request costs 1.
* ``input_tokens``: prompt tokens (Anthropic does not count cache reads towards it).
* ``output_tokens``: reply tokens.
* ``tokens``: prompt plus reply (OpenAI's one token budget, and ``model.tokens_per_minute``).

Anthropic: ``anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}``,
resets as RFC 3339 times. OpenAI and the servers that copy it:
``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, resets as durations ("6m0s", "1.5s",
"20ms").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

REQUESTS, INPUT, OUTPUT, TOKENS = "requests", "input_tokens", "output_tokens", "tokens"
BUDGETS = (REQUESTS, INPUT, OUTPUT, TOKENS)


@dataclass(frozen=True)
class Remaining:
    """One budget as an answer reports it: ``remaining`` of ``limit`` now, full again in
    ``reset_s`` seconds (None: not said)."""

    limit: float
    remaining: float
    reset_s: float | None


@dataclass(frozen=True)
class Reading:
    budgets: dict[str, Remaining] = field(default_factory=dict)


def rfc3339_in(value: str, now: float) -> float:
    """Seconds from ``now`` (a POSIX time) until an RFC 3339 time (``2026-12-01T20:50:00Z``)."""
    return datetime.fromisoformat(value.strip().replace("z", "Z")).timestamp() - now


DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|h|m|s)")
UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration_s(value: str, now: float = 0.0) -> float:
    """Seconds in a duration such as ``6m0s``, ``1.5s``, ``20ms`` or ``1h2m3s`` (a bare
    number is seconds)."""
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {value!r}")
    return sum(float(n) * UNIT_S[u] for n, u in parts)


@dataclass(frozen=True)
class HeaderScheme:
    """Header names per budget: ``budget -> (limit, remaining, reset)``; ``reset`` turns a
    reset header and the POSIX time now into seconds from now. ``cache_reads_count``:
    whether cache-read prompt tokens count towards the input and token budgets."""

    names: dict[str, tuple[str, str, str]]
    reset: Callable[[str, float], float]
    cache_reads_count: bool = True

    def read(self, headers: Mapping[str, str] | None, now: float) -> Reading | None:
        """What ``headers`` say of each budget; None when they say nothing (a server that
        sends no rate-limit headers). A malformed header is ignored, not an error: pacing
        is best effort, the server's 429 the authority."""
        if not headers:
            return None
        lowered = {str(k).lower(): str(v) for k, v in headers.items()}
        budgets = {}
        for budget, (limit, remaining, reset) in self.names.items():
            try:
                total, left = float(lowered[limit]), float(lowered[remaining])
            except (KeyError, ValueError):
                continue
            try:
                reset_s = max(0.0, self.reset(lowered[reset], now)) if reset in lowered else None
            except ValueError:
                reset_s = None
            if total > 0:
                budgets[budget] = Remaining(total, max(0.0, left), reset_s)
        return Reading(budgets) if budgets else None


def _anthropic(budget: str) -> tuple[str, str, str]:
    stem = f"anthropic-ratelimit-{budget}"
    return f"{stem}-limit", f"{stem}-remaining", f"{stem}-reset"


def _openai(budget: str) -> tuple[str, str, str]:
    return (f"x-ratelimit-limit-{budget}", f"x-ratelimit-remaining-{budget}",
            f"x-ratelimit-reset-{budget}")


ANTHROPIC = HeaderScheme({REQUESTS: _anthropic("requests"), INPUT: _anthropic("input-tokens"),
                          OUTPUT: _anthropic("output-tokens")}, rfc3339_in,
                         cache_reads_count=False)
OPENAI = HeaderScheme({REQUESTS: _openai("requests"), TOKENS: _openai("tokens")}, duration_s)
