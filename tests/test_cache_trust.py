"""The response cache answers only for the server that gave the answer and only with the
answer as it was written: another ``model.base_url`` is asked itself, an entry edited even
at the same size or holding a field of the wrong type is asked again (logged), never
served and never fatal."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from pathlib import Path

import pytest

from arag.llm import make_model
from arag.llm.cache import CachedModel, response_key
from arag.llm.scripted import ScriptedModel
from tests import forked
from tests.anthropic_fake import FakeAnthropic, text_reply
from tests.conftest import ROOT, store_overrides

SYSTEM, MESSAGES = "You summarize.", [{"role": "user", "content": "hello"}]


def says(text: str):
    return lambda request, n: text_reply(text, request)


def claude(make_cfg, url: str):
    return make_model(make_cfg("model=claude-haiku-4-5", f"model.base_url={url}",
                               "model.max_retries=0").model)


def entries(folder: Path) -> list[Path]:
    return sorted((folder / "responses").rglob("*.json"))


def test_another_base_url_is_asked_itself_not_served_the_first_servers_answer(
        make_cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with FakeAnthropic(says("from A")) as a, FakeAnthropic(says("from B")) as b:
        first = CachedModel(claude(make_cfg, a.url), tmp_path).complete(SYSTEM, MESSAGES)
        again = CachedModel(claude(make_cfg, a.url), tmp_path).complete(SYSTEM, MESSAGES)
        other = CachedModel(claude(make_cfg, b.url), tmp_path).complete(SYSTEM, MESSAGES)
        assert (first.text, again.text, other.text) == ("from A", "from A", "from B")
        assert again.cached and not other.cached
        assert len(a.requests) == 1 and len(b.requests) == 1


def test_keys_of_the_providers_own_api_are_what_they_were():
    # a cache filled before the endpoint was keyed still answers for the default endpoint
    fields = {"provider": "anthropic", "model": "m", "system": SYSTEM, "messages": MESSAGES,
              "tools": [], "max_tokens": 1024, "temperature": 0.0, "tool_choice": "auto"}
    before = hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False,
                                       default=str).encode()).hexdigest()
    assert response_key("anthropic", "m", SYSTEM, MESSAGES) == before
    assert response_key("anthropic", "m", SYSTEM, MESSAGES, endpoint="http://127.0.0.1:1") \
        != before


def _edit_same_size(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert len(old) == len(new) and old in text
    path.write_text(text.replace(old, new))


def test_a_same_size_edit_is_detected_logged_and_asked_again(tmp_path, caplog):
    first = CachedModel(ScriptedModel(["revenue rose 5%"]), tmp_path)
    first.complete(SYSTEM, MESSAGES)
    [entry] = entries(tmp_path)
    size = entry.stat().st_size
    _edit_same_size(entry, "rose 5%", "rose 9%")
    assert entry.stat().st_size == size
    again = CachedModel(ScriptedModel(["revenue rose 5%"]), tmp_path)
    with caplog.at_level(logging.WARNING, logger="arag.llm.cache"):
        reply = again.complete(SYSTEM, MESSAGES)
    assert reply.text == "revenue rose 5%" and not reply.cached and again.misses == 1
    assert "checksum" in caplog.text and str(entry) in caplog.text
    third = CachedModel(ScriptedModel([]), tmp_path)  # the entry was written anew
    assert third.complete(SYSTEM, MESSAGES).text == "revenue rose 5%"


@pytest.mark.parametrize("field, value", [
    ("content", "not a list"), ("content", [{"type": "text", "text": 5}]),
    ("content", [{"type": "tool_use", "name": "x"}]), ("usage", {"input_tokens": "12"}),
    ("usage", {"input_tokens": 1, "bogus": 2}), ("stop_reason", None), ("model", 7)])
def test_an_entry_of_the_wrong_shape_is_asked_again_never_fatal(tmp_path, caplog, field, value):
    CachedModel(ScriptedModel(["first"]), tmp_path).complete(SYSTEM, MESSAGES)
    [entry] = entries(tmp_path)
    data = json.loads(entry.read_text())
    data[field] = value
    data.pop("sha256")  # re-stamped as by hand: only its shape is wrong
    data["sha256"] = hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False)
                                    .encode()).hexdigest()
    entry.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="arag.llm.cache"):
        reply = CachedModel(ScriptedModel(["second"]), tmp_path).complete(SYSTEM, MESSAGES)
    assert reply.text == "second" and not reply.cached
    assert "damaged" in caplog.text


def test_an_entry_whose_checksum_was_deleted_with_an_edit_is_never_served_nor_restamped(
        tmp_path, caplog):
    CachedModel(ScriptedModel(["revenue rose 5%"]), tmp_path).complete(SYSTEM, MESSAGES)
    [entry] = entries(tmp_path)
    data = json.loads(entry.read_text())
    data.pop("sha256")
    data["content"][0]["text"] = "revenue rose 50%"  # poisoned, its checksum removed
    entry.write_text(json.dumps(data))
    reading = CachedModel(ScriptedModel([]), tmp_path, mode="read_only")
    with caplog.at_level(logging.WARNING, logger="arag.llm.cache"), \
            pytest.raises(Exception, match="script"):  # not served: the model is asked
        reading.complete(SYSTEM, MESSAGES)
    assert "no checksum" in caplog.text and str(entry) in caplog.text
    assert "sha256" not in json.loads(entry.read_text())  # never stamped as trusted
    reply = CachedModel(ScriptedModel(["revenue rose 5%"]), tmp_path).complete(SYSTEM, MESSAGES)
    assert reply.text == "revenue rose 5%" and not reply.cached  # asked again, written anew
    assert CachedModel(ScriptedModel([]), tmp_path).complete(SYSTEM, MESSAGES).cached


# --- end to end: a cached sweep re-run against another server ----------------------------


def _sweep(tmp: Path, url: str, *extra: str):
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    cmd = [sys.executable, "run.py", "-m", "system=naive", "dataset=sample", "dataset.limit=2",
           "model=claude-haiku-4-5", f"model.base_url={url}", "model.max_retries=0",
           f"hydra.sweep.dir={tmp}/multirun/{len(list(tmp.glob('multirun/*')))}",
           "metrics.scorers=[rouge]", *extra, *store_overrides(tmp)]
    return forked.run(cmd, cwd=ROOT, env=env, timeout=600)


def _predicted(tmp: Path) -> set[str]:
    return {json.loads(line)["predicted"] for path in (tmp / "runs").rglob("predictions.jsonl")
            for line in path.read_text().splitlines() if line}


@pytest.mark.slow
def test_a_cached_sweep_rerun_with_another_base_url_asks_that_server(tmp_path):
    with FakeAnthropic(says("Revenue rose 5 percent, server A.")) as a:
        first = _sweep(tmp_path, a.url)
    assert first.returncode == 0, first.stderr[-3000:]
    assert _predicted(tmp_path) == {"Revenue rose 5 percent, server A."}
    with FakeAnthropic(says("Revenue rose 7 percent, server B.")) as b:
        again = _sweep(tmp_path, b.url, "runner.rerun=true")
        asked = len(b.requests)
    assert again.returncode == 0, again.stderr[-3000:]
    assert asked == 2  # one call per task: nothing came from server A's answers
    assert "Revenue rose 7 percent, server B." in _predicted(tmp_path)
