"""Content-addressed response cache around any ChatModel.

Key: provider, model, the server that answers when it is not the provider's own API
(``ChatModel.endpoint``: ``model.base_url``; keys of the default endpoint are what they
were before the endpoint was keyed), the full request (system, messages, tools,
max_tokens, temperature, tool_choice) and the model's settings that change a reply beyond
it (``ChatModel.reply_settings``: a temperature left out). One JSON file per entry under
``<cache.dir>/responses/<key[:2]>/<key>.json``, written atomically, carrying the SHA-256 of
its content. A hit returns the same completion marked ``cached=True`` (it costs nothing;
``cost_usd_uncached`` keeps what it would have cost). An entry whose checksum or schema
does not hold (an edit, even of the same size; a field of the wrong type) is logged as a
warning, never served, asked again and overwritten. An entry without a checksum (one
written before entries carried one, or one whose checksum was deleted along with an edit)
is treated the same: its text cannot be told from an edit, so it is never served nor
stamped, and the request is asked again (paid once more) and written anew. Modes:
``read_write``, ``read_only`` (never writes), ``off`` (not used at all).

A judge reply its scorer could not read is marked in its entry (``note_unreadable``) with
how many asks in a row were unreadable: a marked entry is not served but asked again,
up to ``reask_unreadable`` more times (``judge.reask_unreadable``), so the next run of the
same command re-asks those calls; after that the last reply is served, so the score stays
null ("unreadable after N asks") and the judge is not paid for it again.

``with fresh_replies(model):`` asks the model itself again, in this thread, instead of
reading the cache (e.g. regenerated G-Eval criteria); the fresh reply still replaces
the cached one. ``with reply_sample(model, i):`` (or ``sample: i`` in a batch request) asks
for the i-th independent reply to a request: the key adds the index from 1 on, so each
sample of ``judge.samples`` is paid once and sample 0 is the plain request's entry.
``with answer_repeat(model, r):`` does the same for the r-th of ``runner.repeats`` answers
to a task: from repeat 1 on the key adds ``repeat: r``, so every repeat is a request of its
own (paid once, free on a re-run) and repeat 0 keeps the key a request has always had
(caches and runs made before repeats existed stay valid).
A Message Batch that fails as a whole leaves cached items answered and maps every
submitted item to the batch's error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arag.files import append_whole, write_text_atomically
from arag.llm.base import (
    REPEAT,
    SAMPLE,
    ChatModel,
    Completion,
    Message,
    ModelError,
    ToolSpec,
    Usage,
    call_arguments,
)

log = logging.getLogger(__name__)


def response_key(provider: str, model_id: str, system: str, messages: list[Message],
                 tools: list[ToolSpec] | None = None, max_tokens: int = 1024,
                 temperature: float = 0.0, tool_choice: str = "auto", sample: int = 0,
                 settings: dict[str, Any] | None = None, endpoint: str | None = None,
                 repeat: int = 0) -> str:
    """The cache key of one request: provider, model, the full request, the model's
    ``settings`` that change a reply beyond it, the ``endpoint`` that answers (None: the
    provider's own API) and, from the second independent sample on, the sample's index,
    and from the second repeat of a task on, the repeat's index (each only when there is
    one, so other keys stay as they were)."""
    fields: dict[str, Any] = {
        "provider": provider, "model": model_id, "system": system,
        "messages": messages, "tools": [t.to_api() for t in tools or []],
        "max_tokens": max_tokens, "temperature": temperature, "tool_choice": tool_choice,
    }
    if sample:
        fields[SAMPLE] = sample
    if repeat:
        fields[REPEAT] = repeat
    if settings:
        fields["settings"] = settings
    if endpoint:
        fields["endpoint"] = endpoint.rstrip("/")
    payload = json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def is_cached(cache_dir: str | Path, provider: str, model_id: str,
              endpoint: str | None = None, reask_unreadable: int = 0, **request: Any) -> bool:
    """Whether the response cache holds an answer to this request (no model needed) that it
    serves: not a reply marked unreadable that is still asked again (``reask_unreadable``)."""
    key = response_key(provider, model_id, endpoint=endpoint, **request)
    path = Path(cache_dir) / "responses" / key[:2] / f"{key}.json"
    return path.exists() and not 0 < _entry_asks(path) <= reask_unreadable


def _entry_asks(path: Path) -> int:
    """The unreadable asks an entry is marked with (0: none, or an entry not read)."""
    try:
        asks = json.loads(path.read_text(encoding="utf-8")).get(UNREADABLE_ASKS, 0)
    except (OSError, ValueError, AttributeError):
        return 0
    return asks if isinstance(asks, int) else 0


def reply_sample(model: ChatModel, index: int) -> AbstractContextManager[None]:
    """Within the block, calls through ``model`` in this thread ask for the ``index``-th
    independent reply (a response-cache entry of its own); a no-op without a cache."""
    sample = getattr(model, "reply_sample", None)
    return sample(index) if sample is not None else nullcontext()


def answer_repeat(model: ChatModel, index: int) -> AbstractContextManager[None]:
    """Within the block, calls through ``model`` in this thread answer the ``index``-th
    repeat of a task (``runner.repeats``: a response-cache entry of its own from 1 on); a
    no-op without a cache."""
    repeat = getattr(model, "answer_repeat", None)
    return repeat(index) if repeat is not None else nullcontext()


def forget_reply(model: ChatModel, request: dict[str, Any]) -> None:
    """A reply to ``request`` (``complete()`` kwargs) was unusable (e.g. a judge reply with
    no score): drop it from the response cache, so the next run asks again, and count it
    as a failure where the model is metered. A no-op for a model with neither."""
    forget = getattr(model, "forget", None)
    if forget is not None:
        forget(request)


@dataclass(frozen=True)
class Unreadable:
    """A reply its caller could not read: how many asks of the request were unreadable
    so far, and whether the response cache asks it again next time (``again``) or serves
    it from now on as the last word."""

    asks: int
    again: bool


def note_unreadable(model: ChatModel, request: dict[str, Any]) -> Unreadable | None:
    """A reply to ``request`` (``complete()`` kwargs) could not be read (a judge reply with
    no score): mark it in the response cache, counted, and say whether it is asked again;
    None for a model with no cache around it (nothing is served from one then)."""
    note = getattr(model, "note_unreadable", None)
    return note(request) if note is not None else None


def fresh_replies(model: ChatModel) -> AbstractContextManager[None]:
    """Within the block, calls through ``model`` in this thread skip response-cache reads
    (a fresh reply is still written); a no-op for a model with no cache around it."""
    fresh = getattr(model, "fresh_replies", None)
    return fresh() if fresh is not None else nullcontext()


class WrappedModel(ChatModel):
    """A model around another (``inner``): what the inner model declares about itself
    (whether it judges, its token count, the temperature it sends, the settings its replies
    depend on) is asked of the inner model."""

    inner: ChatModel

    def __init__(self, inner: ChatModel):
        self.inner = inner
        self.name = inner.name
        self.provider = inner.provider

    @property
    def model_id(self) -> str:
        """The wrapped model's id: the response cache keys on it, so a wrapper below the
        cache (a context window, a spending cap) leaves every key as it was."""
        return str(getattr(self.inner, "model_id", self.inner.name))

    @property
    def can_judge(self) -> bool:
        return self.inner.can_judge

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def sent_temperature(self, requested: float) -> float | None:
        return self.inner.sent_temperature(requested)

    def reply_settings(self) -> dict[str, Any]:
        return self.inner.reply_settings()

    def endpoint(self) -> str | None:
        return self.inner.endpoint()


class CachedModel(WrappedModel):
    def __init__(self, inner: ChatModel, cache_dir: str | Path, mode: str = "read_write",
                 reask_unreadable: int = 0):
        self.inner = inner
        # how many more times a request whose reply could not be read is asked again
        self.reask_unreadable = reask_unreadable
        self.name = inner.name
        self.provider = inner.provider
        self.folder = Path(cache_dir) / "responses"
        self.mode = mode
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._skip_reads = threading.local()  # per thread: other threads keep their hits
        self._sample = threading.local()  # per thread: which independent reply is asked for
        self._repeat = threading.local()  # per thread: which repeat of a task is answered
        # told of each reply the model was paid for before it is stored: spend is journaled
        # first, so a write that fails (a full disk) loses none (``MeteredModel``)
        self.paid: list[Callable[[Completion], None]] = []

    @contextmanager
    def fresh_replies(self) -> Iterator[None]:
        """Calls made in this thread inside the block ask the model, not the cache."""
        before = getattr(self._skip_reads, "on", False)
        self._skip_reads.on = True
        try:
            yield
        finally:
            self._skip_reads.on = before

    def reply_sample(self, index: int) -> AbstractContextManager[None]:
        """Calls made in this thread inside the block ask for the ``index``-th sample."""
        return _thread_index(self._sample, index)

    def answer_repeat(self, index: int) -> AbstractContextManager[None]:
        """Calls made in this thread inside the block answer the ``index``-th repeat."""
        return _thread_index(self._repeat, index)

    def key(self, system: str, messages: list[Message], tools: list[ToolSpec] | None,
            max_tokens: int, temperature: float, tool_choice: str, sample: int = 0) -> str:
        return response_key(self.inner.provider, getattr(self.inner, "model_id", self.inner.name),
                            system, messages, tools, max_tokens, temperature, tool_choice,
                            sample, self.inner.reply_settings(), self.inner.endpoint(),
                            repeat=getattr(self._repeat, "index", 0))

    def complete(self, system: str, messages: list[Message], tools: list[ToolSpec] | None = None,
                 max_tokens: int = 1024, temperature: float = 0.0,
                 tool_choice: str = "auto") -> Completion:
        if self.mode == "off":
            return self.inner.complete(system, messages, tools, max_tokens, temperature,
                                       tool_choice)
        key = self.key(system, messages, tools, max_tokens, temperature, tool_choice,
                       getattr(self._sample, "index", 0))
        path = self.folder / key[:2] / f"{key}.json"
        hit = self._lookup(path)
        if hit is not None and not self._asks_again(hit):
            with self._lock:
                self.hits += 1
            return hit
        completion = self.inner.complete(system, messages, tools, max_tokens, temperature,
                                         tool_choice)
        with self._lock:
            self.misses += 1
        self._tell_paid(completion)
        if self.mode == "read_write":
            self._write(path, completion, asked_before=_unreadable_asks(hit))
        return completion

    def complete_batch(self, requests: dict[str, dict[str, Any]]) -> dict[str, Any]:
        if self.mode == "off":
            return self.inner.complete_batch({c: call_arguments(r) for c, r in requests.items()})
        out: dict[str, Any] = {}
        missing: dict[str, dict[str, Any]] = {}
        paths: dict[str, Path] = {}
        before: dict[str, int] = {}  # unreadable asks of the requests asked again
        for cid, r in requests.items():
            key = self.key(r["system"], r["messages"], r.get("tools"), r.get("max_tokens", 1024),
                           r.get("temperature", 0.0), r.get("tool_choice", "auto"),
                           r.get(SAMPLE, 0))
            paths[cid] = self.folder / key[:2] / f"{key}.json"
            hit = self._lookup(paths[cid])
            if hit is not None and not self._asks_again(hit):
                out[cid] = hit
            else:
                missing[cid] = call_arguments(r)
                before[cid] = _unreadable_asks(hit)
        with self._lock:
            self.hits += len(out)
            self.misses += len(missing)
        try:
            fetched = self.inner.complete_batch(missing)
        except ModelError as exc:  # the whole batch failed: the cached answers still stand
            fetched = dict.fromkeys(missing, ModelError(f"the message batch failed: {exc}"))
        for result in fetched.values():
            if isinstance(result, Completion):
                self._tell_paid(result)
        for cid, result in fetched.items():
            out[cid] = result
            if self.mode == "read_write" and isinstance(result, Completion):
                self._write(paths[cid], result, asked_before=before[cid])
        return out

    def _tell_paid(self, completion: Completion) -> None:
        for hook in self.paid:
            hook(completion)

    def forget(self, request: dict[str, Any]) -> None:
        """Delete the cached reply to ``request``: it is not an answer to serve again."""
        self._path(request).unlink(missing_ok=True)

    def note_unreadable(self, request: dict[str, Any]) -> Unreadable | None:
        """Mark the cached reply to ``request`` as unreadable, one more ask counted (a
        reply served because its asks ran out is not counted again); None when the cache
        holds no entry for it (``read_only``, or a write that failed)."""
        path = self._path(request)
        with self._lock:
            entry = self._read(path)
            if entry is None:
                return None
            asks = entry.meta.get(UNREADABLE_ASKS)
            if asks is None:
                asks = entry.meta.get(ASKED_BEFORE, 0) + 1
                if self.mode == "read_write":
                    self._write(path, entry, unreadable_asks=asks)
        return Unreadable(asks, asks <= self.reask_unreadable)

    def _asks_again(self, hit: Completion) -> bool:
        """A reply marked unreadable is asked again until it was asked
        ``1 + reask_unreadable`` times."""
        return 0 < _unreadable_asks(hit) <= self.reask_unreadable

    def _path(self, request: dict[str, Any]) -> Path:
        key = self.key(request["system"], request["messages"], request.get("tools"),
                       request.get("max_tokens", 1024), request.get("temperature", 0.0),
                       request.get("tool_choice", "auto"),
                       request.get(SAMPLE, getattr(self._sample, "index", 0)))
        return self.folder / key[:2] / f"{key}.json"

    def _lookup(self, path: Path) -> Completion | None:
        return None if getattr(self._skip_reads, "on", False) else self._read(path)

    def _read(self, path: Path) -> Completion | None:
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            checksum = data.pop(CHECKSUM, None)
            if checksum is None:  # deleted with an edit, or written before checksums
                raise ValueError("it carries no checksum, so an edit cannot be ruled out")
            if checksum != _checksum(data):
                raise ValueError("its checksum does not match its content")
            completion = stored_completion(data)
            completion.meta.update(_marks(data))
        except (OSError, ValueError) as exc:  # never fatal: the model is asked again
            log.warning("response cache entry %s is damaged (%s); asking the model again",
                        path, exc)
            return None
        return completion

    def _write(self, path: Path, completion: Completion, asked_before: int = 0,
               unreadable_asks: int = 0) -> None:
        data: dict[str, Any] = {"content": completion.content,
                                "stop_reason": completion.stop_reason,
                                "usage": vars(completion.usage), "model": completion.model}
        for mark, value in ((ASKED_BEFORE, asked_before), (UNREADABLE_ASKS, unreadable_asks)):
            if value:  # only on entries of requests with unreadable replies
                data[mark] = value
        data[CHECKSUM] = _checksum(data)
        write_text_atomically(path, json.dumps(data, ensure_ascii=False))


@contextmanager
def _thread_index(local: threading.local, index: int) -> Iterator[None]:
    """Set ``local.index`` for the block, then put back what it was."""
    before = getattr(local, "index", 0)
    local.index = index
    try:
        yield
    finally:
        local.index = before


_METERED = "_metered"  # a completion's meta: already metered and journaled
CHECKSUM = "sha256"  # an entry's field: the SHA-256 of the rest of the entry
# an entry's fields (and a served completion's meta): the stored reply could not be read,
# after this many asks in a row; a reply that came from asking again, after this many
UNREADABLE_ASKS = "unreadable_asks"
ASKED_BEFORE = "asked_before"


def _marks(data: dict[str, Any]) -> dict[str, int]:
    """An entry's unreadable-ask counts, checked (a wrong type is a damaged entry)."""
    marks = {k: data[k] for k in (UNREADABLE_ASKS, ASKED_BEFORE) if k in data}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in marks.values()):
        raise ValueError("an unreadable-ask count is not a positive whole number")
    return marks


def _unreadable_asks(hit: Completion | None) -> int:
    return int(hit.meta.get(UNREADABLE_ASKS, 0)) if hit is not None else 0


def _checksum(data: dict[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


_BLOCK_FIELDS: dict[str, dict[str, type]] = {
    "text": {"text": str}, "tool_use": {"id": str, "name": str, "input": dict}}


def stored_completion(data: dict[str, Any]) -> Completion:
    """The completion a cache entry holds, its every field checked for its type (a
    ValueError names the first that is wrong): a wrong-typed entry is asked again, never
    handed to the agent or a scorer to fail there."""
    content, usage = data.get("content"), data.get("usage")
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise ValueError("content is not a list of blocks")
    for block in content:
        wanted = _BLOCK_FIELDS.get(str(block.get("type")))
        if wanted is None or any(not isinstance(block.get(k), t) for k, t in wanted.items()):
            raise ValueError(f"a content block of type {block.get('type')!r} is malformed")
    if not isinstance(data.get("stop_reason"), str) or not isinstance(data.get("model"), str):
        raise ValueError("stop_reason and model must be strings")
    if not isinstance(usage, dict) or set(usage) - set(Usage.__dataclass_fields__) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in usage.values()):
        raise ValueError("usage is not a set of token counts")
    return Completion(content=content, stop_reason=data["stop_reason"], usage=Usage(**usage),
                      model=data["model"], cached=True)


class SpendJournal:
    """An append-only log of every paid call, one JSON line written as the call returns:
    the spend of calls whose task never got a record (a kill, a retried error) is still
    counted (``spend_total``). Each line names the attempt that paid it (``attempt``: one
    per journal object unless given), so an attempt tells what it paid (``spent``: new)
    from what earlier attempts paid for the answers it carries over (earlier).

    A call killed mid-flight is not in the journal: its line is written only once the reply
    came back (the provider may still bill it); a line torn by a kill is not counted."""

    def __init__(self, path: Path, attempt: str | None = None,
                 tags: dict[str, Any] | None = None):
        self.path = path
        self.attempt = attempt or uuid.uuid4().hex
        # written on every line: who paid (the sweep run, the round), so a report tells
        # this sweep's rounds from an earlier attempt's or another sweep's spend
        self.tags = dict(tags or {})
        self._lock = threading.Lock()

    def record(self, cost_usd: float, usage: Usage) -> None:
        line = json.dumps({"cost_usd": round(cost_usd, 10), "input_tokens": usage.input_tokens,
                           "output_tokens": usage.output_tokens, "at": round(time.time(), 3),
                           "attempt": self.attempt, **self.tags})
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # one whole line or none; a full disk raises naming the journal
            append_whole(self.path, (line + "\n").encode("utf-8"))

    def spend_total(self) -> float:
        """USD over every intact line (a line torn by a kill is not a call that returned)."""
        new, earlier = self.spent()
        return new + earlier

    def entries(self) -> list[dict[str, Any]]:
        """Every intact line with a cost, as written (a line torn by a kill is left out)."""
        out = []
        for line in _journal_lines(self.path):
            try:
                entry = json.loads(line)
                entry["cost_usd"] = float(entry["cost_usd"])
            except (ValueError, KeyError, TypeError):
                continue
            out.append(entry)
        return out

    def spent(self) -> tuple[float, float]:
        """(USD this attempt paid, USD earlier attempts paid), over the intact lines."""
        new = earlier = 0.0
        for line in _journal_lines(self.path):
            try:
                entry = json.loads(line)
                cost = float(entry["cost_usd"])
            except (ValueError, KeyError, TypeError):
                continue
            if entry.get("attempt") == self.attempt:
                new += cost
            else:
                earlier += cost
        return new, earlier


def _journal_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


class MeteredModel(WrappedModel):
    """Counts the calls, cost and failures of a model: the judge's, and the system's (whose
    paid calls also go to a ``SpendJournal`` as they return).

    ``errors``: failed calls by ``ModelError.kind``, plus ``unparseable`` for replies the
    caller could not read (``forget_reply``).
    """

    def __init__(self, inner: ChatModel, prices: Any, journal: SpendJournal | None = None):
        self.inner = inner
        self.name = inner.name
        self.provider = inner.provider
        self.prices = prices
        self.journal = journal
        self.calls = 0
        self.cached_calls = 0
        self.cost_usd = 0.0
        self.errors: Counter[str] = Counter()
        # replies that could not be read and that the response cache asks again next run
        self.to_ask_again = 0
        self._lock = threading.Lock()
        hooks = getattr(inner, "paid", None)
        if isinstance(hooks, list):  # a response cache: meter a fresh reply before it stores it
            hooks.append(self._meter_first)

    def fresh_replies(self) -> AbstractContextManager[None]:
        return fresh_replies(self.inner)

    def reply_sample(self, index: int) -> AbstractContextManager[None]:
        return reply_sample(self.inner, index)

    def answer_repeat(self, index: int) -> AbstractContextManager[None]:
        return answer_repeat(self.inner, index)

    def forget(self, request: dict[str, Any]) -> None:
        self._fail("unparseable")
        forget_reply(self.inner, request)

    def note_unreadable(self, request: dict[str, Any]) -> Unreadable | None:
        self._fail("unparseable")
        noted = note_unreadable(self.inner, request)
        if noted is not None and noted.again:
            with self._lock:
                self.to_ask_again += 1
        return noted

    def complete(self, system: str, messages: list[Message], tools: list[ToolSpec] | None = None,
                 max_tokens: int = 1024, temperature: float = 0.0,
                 tool_choice: str = "auto") -> Completion:
        try:
            completion = self.inner.complete(system, messages, tools, max_tokens, temperature,
                                             tool_choice)
        except ModelError as exc:
            self._fail(exc.kind)
            raise
        self._meter_once(completion)
        return completion

    def complete_batch(self, requests: dict[str, dict[str, Any]]) -> dict[str, Any]:
        try:
            results = self.inner.complete_batch(requests)
        except ModelError as exc:
            self._fail(exc.kind, len(requests))
            raise
        for result in results.values():
            if isinstance(result, Completion):
                self._meter_once(result)
            elif isinstance(result, ModelError):
                self._fail(result.kind)
        return results

    def _fail(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.errors[kind] += n

    def _meter_first(self, completion: Completion) -> None:
        self._meter(completion)
        completion.meta[_METERED] = True

    def _meter_once(self, completion: Completion) -> None:
        if not completion.meta.pop(_METERED, False):  # not metered before its cache write
            self._meter(completion)

    def _meter(self, completion: Completion) -> None:
        # Message Batches are billed at half the list price
        factor = 0.5 if completion.meta.get("batch") else 1.0
        cost = 0.0 if completion.cached else factor * self.prices.cost_usd(completion.usage)
        with self._lock:
            self.calls += 1
            self.cached_calls += completion.cached
            self.cost_usd += cost
        if self.journal is not None and not completion.cached:
            self.journal.record(cost, completion.usage)
