"""runner.repeats: every answer to a task is a request of its own, paid once.

The real anthropic SDK against the local fake Messages API, through the real response cache:
K repeats send K times the requests of one, the same command again sends none, and raising
K asks only the new repeats. Repeat 0 keeps the cache key a request always had.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from arag.llm.cache import CachedModel, response_key
from arag.records import Prediction, Task
from runners.predict import predict, read_log
from tests.anthropic_fake import FakeAnthropic
from tests.test_claude import claude


class OneCallSystem:
    """Asks its model once per task and answers with the reply."""

    name = "one-call"

    def __init__(self, model):
        self.ctx = SimpleNamespace(model=model)

    def predict(self, task: Task, source: str) -> Prediction:
        reply = self.ctx.model.complete("You summarize.", [{"role": "user",
                                                            "content": task.question}])
        return Prediction(id=task.id, source=source, system=self.name, model="m",
                          task_type="summarization", question=task.question,
                          doc_ids=list(task.doc_ids), ground_truth="", predicted=reply.text)


def _tasks(n: int) -> list[Task]:
    return [Task(f"t{i}", "summarization", ("D",), f"question {i}", "ref") for i in range(n)]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        yield server


def _run(make_cfg, fake, tmp_path, repeats: int, folder: str) -> tuple[int, list[Prediction]]:
    """Requests the fake received for one prediction run, and its predictions."""
    before = len(fake.requests)
    model = CachedModel(claude(make_cfg, fake.url), tmp_path / folder / "cache")
    out = predict(OneCallSystem(model), _tasks(3), tmp_path / folder / "predictions.jsonl",
                  source="s", progress=False, repeats=repeats)
    return len(fake.requests) - before, out.predictions


def test_repeats_are_asked_once_each_and_raising_k_asks_only_the_new_ones(make_cfg, fake,
                                                                         tmp_path):
    one, _ = _run(make_cfg, fake, tmp_path, 1, "k1")
    three, preds = _run(make_cfg, fake, tmp_path, 3, "k3")
    assert one == 3 and three == 3 * one
    assert [(p.id, p.repeat) for p in preds] == [(f"t{i}", r) for i in range(3) for r in range(3)]
    again, _ = _run(make_cfg, fake, tmp_path, 3, "k3")
    assert again == 0
    four, preds = _run(make_cfg, fake, tmp_path, 4, "k3")
    assert four == one and sorted({p.repeat for p in preds}) == [0, 1, 2, 3]
    assert sorted(read_log(tmp_path / "k3" / "predictions.jsonl")) == sorted(
        [f"t{i}" for i in range(3)] + [f"t{i}#{r}" for i in range(3) for r in (1, 2, 3)])


def test_a_lost_response_cache_still_resumes_from_the_records(make_cfg, fake, tmp_path):
    _run(make_cfg, fake, tmp_path, 2, "k2")
    (tmp_path / "k2" / "cache").rename(tmp_path / "gone")
    again, _ = _run(make_cfg, fake, tmp_path, 2, "k2")
    assert again == 0  # resume counts repeats: nothing on disk is asked again


def test_repeat_zero_keeps_the_key_requests_always_had(tmp_path):
    request = {"system": "s", "messages": [{"role": "user", "content": "q"}]}
    plain = response_key("anthropic", "m", **request)
    assert response_key("anthropic", "m", **request, repeat=0) == plain
    assert response_key("anthropic", "m", **request, repeat=1) != plain
    assert response_key("anthropic", "m", **request, repeat=1) != response_key(
        "anthropic", "m", **request, sample=1)  # a judge sample is not a repeat


def test_the_cost_cap_counts_every_repeat(tmp_path):
    class Paid(OneCallSystem):
        def predict(self, task, source):
            return Prediction(id=task.id, source=source, system=self.name, model="m",
                              task_type="summarization", question=task.question,
                              doc_ids=list(task.doc_ids), ground_truth="", predicted="a",
                              cost_usd=1.0)

    out = predict(Paid(None), _tasks(2), tmp_path / "p.jsonl", source="s", progress=False,
                  concurrency=1, repeats=3, max_cost_usd=2.5)
    assert len(out.predictions) == 3 and len(out.not_run) == 3
    assert out.not_run == ["t1", "t1#1", "t1#2"] and "3 answers not run" in out.stop_reason
    lines = (tmp_path / "p.jsonl").read_text().splitlines()
    assert [json.loads(line)["repeat"] for line in lines] == [0, 1, 2]
