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


def test_a_damaged_middle_record_keeps_every_other_record_and_predicts_only_its_task(
        tmp_path, caplog):
    log = tmp_path / "predictions.jsonl"
    predict(CountingSystem(), _tasks(6), log, source="s", progress=False)
    lines = log.read_text().splitlines(keepends=True)
    damaged = json.loads(lines[2])["id"]
    lines[2] = lines[2][: len(lines[2]) // 2] + "\n"  # damaged in the middle of the log
    lines[4] = "[1, 2]\n" + lines[4]  # valid JSON, not an object
    log.write_text("".join(lines))
    system = CountingSystem()
    out = predict(system, _tasks(6), log, source="s", progress=False)
    assert system.calls == [damaged] and out.n_resumed == 5 and out.n_new == 1
    assert sorted(read_log(log)) == [f"t{i}" for i in range(6)]
    aside = (tmp_path / "predictions.jsonl.damaged").read_text().splitlines()
    assert aside == [lines[2].rstrip("\n"), "[1, 2]"]
    named = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert any(f"{log}:3:" in m for m in named) and any(f"{log}:5:" in m and "not a prediction"
                                                         in m for m in named)


def test_a_write_that_fails_leaves_no_torn_record_and_names_the_log(tmp_path, monkeypatch):
    import errno
    import os

    import pytest

    import arag.files

    log = tmp_path / "predictions.jsonl"
    predict(CountingSystem(), _tasks(2), log, source="s", progress=False)
    before = log.read_bytes()
    real_write = os.write

    def half_then_full_disk(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(arag.files.os, "write", half_then_full_disk)
    with pytest.raises(OSError) as err:
        predict(CountingSystem(), _tasks(4), log, source="s", progress=False)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(log)
    assert log.read_bytes() == before


def test_a_task_that_crashes_the_system_is_a_recorded_error_and_the_others_go_on(tmp_path):
    class Crashing(CountingSystem):
        def predict(self, task, source):
            if task.id == "t1":
                raise OverflowError("cannot convert float infinity to integer")
            return super().predict(task, source)

    log = tmp_path / "predictions.jsonl"
    out = predict(Crashing(), _tasks(3), log, source="s", progress=False)
    assert [p.id for p in out.predictions] == ["t0", "t1", "t2"]
    crashed = out.predictions[1]
    assert crashed.error_kind == "crash" and "OverflowError: cannot convert" in crashed.error
    assert read_log(log)["t1"].error == crashed.error


def test_a_rerun_keeps_the_old_log_and_its_set_aside_lines_together(tmp_path):
    from runners.resume import start_fresh

    log = tmp_path / "predictions.jsonl"
    predict(CountingSystem(), _tasks(2), log, source="s", progress=False)
    with open(log, "a") as f:
        f.write("not json\n")
    read_log(log)
    start_fresh(log)
    (old,) = tmp_path.glob("predictions.*[0-9].jsonl")
    assert len(read_log(old)) == 2 and not log.exists()
    assert (tmp_path / f"{old.name}.damaged").read_text() == "not json\n"
    assert not (tmp_path / "predictions.jsonl.damaged").exists()


def test_a_full_disk_inside_a_task_stops_the_job_instead_of_erroring_every_task(tmp_path):
    import errno

    import pytest

    class FullCache(CountingSystem):
        def predict(self, task, source):
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "cache/x"))

    with pytest.raises(OSError) as err:
        predict(FullCache(), _tasks(3), tmp_path / "predictions.jsonl", source="s",
                concurrency=1, progress=False)
    assert err.value.filename == str(tmp_path / "cache/x")
    assert not (tmp_path / "predictions.jsonl").exists()  # no task recorded as an error
