"""What an HTTP API's failure means, for the providers whose official SDKs share one
exception hierarchy (``anthropic`` and ``openai``: ``APIStatusError`` with the status and
body, ``APITimeoutError``, ``APIConnectionError``, ``APIResponseValidationError``).

429 (honouring ``retry-after``), 529 overloaded, 408/409, any 5xx, connection errors,
timeouts and malformed replies are retried; other 4xx (400/401/403/404 ...) fail at once
with the API's message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

from arag.llm.base import APIFailure, Completion

RETRYABLE_STATUS = {408: "timeout", 409: "conflict", 429: "rate_limit", 529: "overloaded"}
FATAL_STATUS = {400: "bad_request", 401: "auth", 403: "permission", 404: "not_found",
                413: "request_too_large"}


class MalformedResponse(Exception):
    """A reply the SDK accepted that lacks what a reply must have."""


def parse_reply(build: Callable[[Any, float], Completion], response: Any, started: float
                ) -> Completion:
    """``build(response, started)``; a reply it cannot read is a MalformedResponse."""
    try:
        return build(response, started)
    except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
        raise MalformedResponse(f"{type(exc).__name__}: {exc}") from None


def classify_sdk_error(exc: Exception, sdk: ModuleType, api: str) -> APIFailure | None:
    """What ``exc``, raised by ``sdk``'s client, means; None for anything that is not an API
    failure (a bug is raised as it is). ``api`` names the API in a fatal error's message."""
    if isinstance(exc, sdk.APIStatusError):
        status, message = exc.status_code, api_message(exc)
        if status not in RETRYABLE_STATUS and status < 500:
            return APIFailure(FATAL_STATUS.get(status, f"http_{status}"),
                              f"{api} error {status}: {message}", retryable=False)
        return APIFailure(RETRYABLE_STATUS.get(status, "server"), f"HTTP {status}: {message}",
                          retryable=True, retry_after_s=retry_after(exc))
    if isinstance(exc, sdk.APITimeoutError):
        return APIFailure("timeout", f"{type(exc).__name__}: {exc}", retryable=True)
    if isinstance(exc, sdk.APIConnectionError):
        return APIFailure("connection", f"{type(exc).__name__}: {exc}", retryable=True)
    if isinstance(exc, sdk.APIResponseValidationError | MalformedResponse | json.JSONDecodeError):
        return APIFailure("malformed", f"malformed response: {type(exc).__name__}: {exc}"[:300],
                          retryable=True)
    return None


def probe(call: Callable[[], Any], classify: Callable[[Exception], APIFailure | None]
          ) -> APIFailure | None:
    """What one request that costs nothing (``call``: a model list) says of an endpoint:
    None when it answered, else its failure as the provider reads it (a bug is raised)."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - classified; anything else is raised
        failure = classify(exc)
        if failure is None:
            raise
        return failure
    return None


def api_message(exc: Any) -> str:
    """The error message in an API error's body (``{"error": {"type", "message"}}`` or a
    flat ``{"message"}``), else the exception's own."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(err, dict) and err.get("message"):
            return f"{err.get('type') or 'error'}: {err['message']}"
    return str(getattr(exc, "message", exc))[:500]


def retry_after(exc: Any) -> float | None:
    """The server's ``retry-after`` (seconds) on an error response, if it sent one."""
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
