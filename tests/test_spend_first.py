"""Spend first: a paid call's cost is in the spend journal before its response-cache entry
is written, so a full ``cache.dir`` loses no spend; and the message of a full disk names
the file that could not be written and the key that put it there."""

from __future__ import annotations

import errno
import json
import os

import pytest

import arag.files
from arag.llm import Prices
from arag.llm.cache import CachedModel, MeteredModel, SpendJournal
from arag.llm.scripted import ScriptedModel
from tracking.storage import explain_write_failure

SYSTEM, MESSAGES = "You summarize.", [{"role": "user", "content": "hello"}]


class FullDisk:
    """``os.fdopen`` whose files take no byte: what a full volume does to a write."""

    def __init__(self, real):
        self.real = real

    def __call__(self, fd, *args, **kw):
        f = self.real(fd, *args, **kw)

        def write(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        f.write = write
        return f


@pytest.fixture
def metered(make_cfg, tmp_path):
    cfg = make_cfg("model=claude-haiku-4-5", f"cache.dir={tmp_path / 'cache'}")
    journal = SpendJournal(tmp_path / "runs" / "spend.jsonl")
    cache = CachedModel(ScriptedModel(["revenue rose 5%", "eps $1.10"]), tmp_path / "cache")
    return MeteredModel(cache, Prices.from_config(cfg.model), journal), journal, cfg


def test_a_full_cache_dir_loses_no_spend_and_names_the_full_path(metered, tmp_path,
                                                                  monkeypatch):
    model, journal, cfg = metered
    monkeypatch.setattr(arag.files.os, "fdopen", FullDisk(os.fdopen))
    with pytest.raises(OSError) as failed:
        model.complete(SYSTEM, MESSAGES)
    monkeypatch.undo()
    cache_dir = tmp_path / "cache" / "responses"
    assert failed.value.errno == errno.ENOSPC
    assert str(cache_dir) in str(failed.value.filename)  # the entry being written
    lines = [json.loads(x) for x in journal.path.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["cost_usd"] > 0  # paid, and journaled first
    assert model.cost_usd == pytest.approx(lines[0]["cost_usd"], rel=1e-6)
    assert not list(cache_dir.rglob("*.json")) and not list(cache_dir.rglob("*.tmp"))
    message = str(explain_write_failure(failed.value, cfg))
    assert message.startswith(f"{failed.value.filename}: No space left on device")
    assert "cache.dir=" in message and "runner.runs_dir" not in message


def test_a_paid_call_is_journaled_once(metered):
    model, journal, _ = metered
    model.complete(SYSTEM, MESSAGES)
    model.complete(SYSTEM, MESSAGES)  # from the response cache: free, no line
    model.complete(SYSTEM, [{"role": "user", "content": "again"}])
    assert len(journal.path.read_text().splitlines()) == 2
    assert model.calls == 3 and model.cached_calls == 1
    assert journal.spend_total() == pytest.approx(model.cost_usd)
