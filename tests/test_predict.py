"""Predictions are appended as they finish and a re-run resumes without redoing work."""

from __future__ import annotations

import json
import threading

from arag.records import Prediction, Task
from runners.predict import predict, read_log


class CountingSystem:
    name = "counting"

    def __init__(self, fail: set[str] = frozenset()):
        self.calls: list[str] = []
        self.fail = fail
        self._lock = threading.Lock()

    def predict(self, task: Task, source: str) -> Prediction:
        with self._lock:
            self.calls.append(task.id)
        return Prediction(id=task.id, source=source, system=self.name, model="m",
                          task_type="summarization", question=task.question,
                          doc_ids=list(task.doc_ids), ground_truth="", predicted=f"answer {task.id}",
                          cost_usd=0.5, error="boom" if task.id in self.fail else None)


def _tasks(n):
    return [Task(f"t{i}", "summarization", ("D",), f"q{i}", "ref") for i in range(n)]


def test_every_prediction_is_on_disk_once_in_task_order(tmp_path):
    log = tmp_path / "predictions.jsonl"
    out = predict(CountingSystem(), _tasks(10), log, source="s", concurrency=4, progress=False)
    assert [p.id for p in out.predictions] == [f"t{i}" for i in range(10)]
    lines = log.read_text().splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == sorted(f"t{i}" for i in range(10))


def test_rerun_resumes_skipping_finished_tasks_and_drops_a_torn_line(tmp_path):
    log = tmp_path / "predictions.jsonl"
    predict(CountingSystem(), _tasks(3), log, source="s", progress=False)
    with open(log, "a") as f:
        f.write('{"id": "t3", "source": "s", "sys')  # a kill in the middle of a write
    system = CountingSystem()
    out = predict(system, _tasks(5), log, source="s", progress=False)
    assert sorted(system.calls) == ["t3", "t4"]
    assert out.n_resumed == 3 and out.n_new == 2
    assert len(read_log(log)) == 5
    assert all(line.endswith("}") for line in log.read_text().splitlines())


def test_errors_are_kept_unless_retry_errors(tmp_path):
    log = tmp_path / "predictions.jsonl"
    predict(CountingSystem(fail={"t1"}), _tasks(3), log, source="s", progress=False)
    untouched = CountingSystem()
    predict(untouched, _tasks(3), log, source="s", progress=False)
    assert untouched.calls == []
    retry = CountingSystem()
    out = predict(retry, _tasks(3), log, source="s", progress=False, retry_errors=True)
    assert retry.calls == ["t1"] and all(p.error is None for p in out.predictions)


def test_cost_cap_stops_new_tasks_and_says_how_many_were_not_run(tmp_path):
    log = tmp_path / "predictions.jsonl"
    out = predict(CountingSystem(), _tasks(10), log, source="s", concurrency=1,
                  progress=False, max_cost_usd=1.2)
    assert len(out.predictions) == 3  # 0.5 each: the third starts below the cap
    assert len(out.not_run) == 7 and "7 tasks not run" in out.stop_reason
