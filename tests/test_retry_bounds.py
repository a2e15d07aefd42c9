"""A server's retry-after is honoured within bounds from the provider's settings: never
below the backoff (``retry_base_delay_s``; a burst answered with ``retry-after: 0`` is not
burned in milliseconds), never above ``retry_after_max_s`` (``retry-after: 3600`` fails the
call at once, saying why and what to do). The real SDK against the fake Messages API."""

from __future__ import annotations

import time

import pytest

from arag.llm import ModelError, make_model
from tests.anthropic_fake import FakeAnthropic, error, text_reply


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


def busy(retry_after: str, n: int) -> list[dict]:
    return [error(429, "rate_limit_error", "slow down", {"retry-after": retry_after})] * n


def claude(make_cfg, url: str, *extra: str):
    model = make_model(make_cfg("model=claude-haiku-4-5", f"model.base_url={url}", *extra).model)
    model.sleeps = []
    model.sleep = model.sleeps.append  # record what would be waited
    return model


def ask(model):
    return model.complete("You summarize.", [{"role": "user", "content": "hello"}])


def test_retry_after_above_the_ceiling_fails_at_once_with_the_fix(make_cfg):
    with FakeAnthropic(lambda r, n: text_reply("late", r)) as fake:
        fake.queue = busy("3600", 1)
        model = claude(make_cfg, fake.url)
        start = time.monotonic()
        with pytest.raises(ModelError) as failed:
            ask(model)
    assert time.monotonic() - start < 30 and model.sleeps == []  # no hour-long sleep
    message = str(failed.value)
    assert "3600 s" in message and "retry_after_max_s=60 s" in message
    assert "run the same command later" in message and failed.value.kind == "rate_limit"
    assert len(fake.requests) == 1


def test_a_raised_ceiling_waits_what_the_server_asks(make_cfg):
    with FakeAnthropic(lambda r, n: text_reply("done", r)) as fake:
        fake.queue = busy("3600", 1)
        model = claude(make_cfg, fake.url, "model.retry_after_max_s=7200")
        assert ask(model).text == "done"
    assert model.sleeps == [3600.0]


def test_retry_after_zero_waits_at_least_the_backoff(make_cfg):
    # a 6-second overload answered with retry-after: 0 is outlasted by the default retries
    with FakeAnthropic(lambda r, n: text_reply("done", r)) as fake:
        fake.queue = busy("0", 5)
        model = claude(make_cfg, fake.url)
        assert ask(model).text == "done"
    floors = [0.5 * 2 ** attempt for attempt in range(5)]  # base 1 s, jitter at least half
    assert len(model.sleeps) == 5
    assert all(s >= f for s, f in zip(model.sleeps, floors, strict=True)), model.sleeps
    assert sum(model.sleeps) > 6


def test_the_ceiling_is_a_checked_setting(make_cfg):
    from runners.settings import read

    with pytest.raises(Exception, match="retry_after_max_s"):
        read(make_cfg("model=claude-haiku-4-5", "model.retry_after_max_s=0"))
