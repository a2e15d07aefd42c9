"""The one model call the harness makes, and the records around it.

Messages use the Anthropic Messages format as plain dicts, the lingua franca of every
provider here: ``{"role": "user"|"assistant", "content": str | list[block]}`` with
blocks ``{"type": "text", "text": ...}``, ``{"type": "tool_use", "id", "name", "input"}``
and ``{"type": "tool_result", "tool_use_id", "content", "is_error"}``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from arag.llm.rate_headers import HeaderScheme

Message = dict[str, Any]
# A request as a dict (an item of ``complete_batch``) may carry ``sample``: which of several
# independent replies to the same request it asks for (judge.samples). Only the response
# cache reads it (it keys on it); the model is sent the request without it.
SAMPLE = "sample"
# which of ``runner.repeats`` answers to a task a call belongs to: the response cache keys on
# it from repeat 1 on (repeat 0 keeps the key a request has always had)
REPEAT = "repeat"


def call_arguments(request: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``complete`` in a request dict (without ``sample``)."""
    return {k: v for k, v in request.items() if k != SAMPLE}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]

    def to_api(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
        )


@dataclass
class Completion:
    content: list[dict[str, Any]]
    stop_reason: str
    usage: Usage
    model: str
    cached: bool = False  # served by the response cache: no API call, no cost
    latency_ms: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.content if b.get("type") == "text")

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]


class ModelError(RuntimeError):
    """A model call failed for good (retries exhausted, or a non-retryable API error).

    ``kind`` names the failure (``rate_limit``, ``overloaded``, ``server``, ``connection``,
    ``timeout``, ``malformed``, ``auth``, ``bad_request``, ``refusal``, ...), so a run can
    count its errors by kind.
    """

    def __init__(self, message: str, kind: str = "error"):
        super().__init__(message)
        self.kind = kind


class MissingCredentials(ModelError):
    """A provider's credentials are not in the environment; the message names the variable."""

    def __init__(self, message: str):
        super().__init__(message, kind="credentials")


@dataclass(frozen=True)
class APIFailure:
    """What a failed call's exception means, as the provider that raised it reads it."""

    kind: str
    message: str
    retryable: bool
    retry_after_s: float | None = None  # the server's own wait (e.g. retry-after), if any


def estimate_tokens(text: str) -> int:
    """Tokens of a text, estimated locally: about 4 characters a token."""
    return max(1, len(text) // 4)


class ChatModel(ABC):
    """One abstract call. Providers translate messages; everything else is shared."""

    name: str
    provider: str

    @abstractmethod
    def complete(
        self,
        system: str,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        tool_choice: str = "auto",
    ) -> Completion:
        """Answer one request. ``tool_choice`` is "auto" or "none" (tools listed, not callable)."""

    def complete_batch(self, requests: dict[str, dict[str, Any]]) -> dict[str, Completion | ModelError]:
        """Answer many independent requests (``custom_id -> complete() kwargs``).

        The default answers them one by one; a provider with a batch API (Anthropic's
        Message Batches, half price) overrides it. A failed item maps to a ModelError.
        """
        out: dict[str, Completion | ModelError] = {}
        for custom_id, request in requests.items():
            try:
                out[custom_id] = self.complete(**call_arguments(request))
            except ModelError as exc:
                out[custom_id] = exc
        return out

    def count_tokens(self, text: str) -> int:
        """Local estimate (≈4 characters a token) for budgets and dry runs."""
        return estimate_tokens(text)

    def sent_temperature(self, requested: float) -> float | None:
        """The temperature a request asking for ``requested`` carries; None: it carries none
        and the server's default applies. A run records it (param ``temperature_sent``)."""
        return requested

    def reply_settings(self) -> dict[str, Any]:
        """Settings of this model, beyond ``complete``'s arguments, that change what a reply
        can be (e.g. a temperature left out of every request). The response cache keys on
        them; empty: none."""
        return {}

    def endpoint(self) -> str | None:
        """The server its replies come from when it is not the provider's own API (the
        configured ``model.base_url``, as configured: credentials redacted); None: the
        provider's default. The response cache keys on it, so two servers that call their
        model by the same name never share answers."""
        return None

    def probe(self, timeout_s: float) -> APIFailure | None:
        """Whether its endpoint answers, asked with one request that costs nothing (a
        provider's model list); None: it answered, or there is nothing to reach (offline,
        scripted). Asked once per endpoint before a sweep's first job."""
        return None

    judges: bool = True  # set from its provider's declaration by ``make_model``
    # how its answers' headers say what is left of the account's rate limits (a provider
    # declares it, as it declares its retryable errors); None: they say nothing
    rate_limit_headers: HeaderScheme | None = None

    @property
    def can_judge(self) -> bool:
        """Whether it may act as the judge: its provider declares it (``register_provider``)."""
        return self.judges

    def classify_error(self, exc: Exception) -> APIFailure | None:
        """Whether an exception of a call is an API failure, and whether to retry it.

        None: not an API failure (a bug), raised as it is. Providers override this; the
        retry loop (``arag.llm.retry``) is shared.
        """
        return None
