"""A kill between logging a task's trace and attaching its scores leaves the trace with
some of them; the run that continues it attaches the missing ones, each exactly once, and
a further continuation adds nothing. Real MLflow store (SQLite), real traces."""

from __future__ import annotations

import time
from collections import Counter

import mlflow
import pytest

from arag.records import Prediction
from tracking.traces import log_task_assessments, log_task_traces

FIELDS = ["rouge2_f1", "rougeL_f1", "geval_faithfulness"]
JUDGE = "claude-haiku-4-5"


def _prediction(task_id: str, repeat: int = 0) -> Prediction:
    return Prediction(id=task_id, source="sample", system="naive", model="offline",
                      task_type="summary", question=f"Summarize {task_id}.", doc_ids=[task_id],
                      ground_truth=f"the reference of {task_id}", predicted="an answer",
                      repeat=repeat, started_at=time.time(), latency_ms=5.0)


def _record(task_id: str, repeat: int = 0) -> dict:
    return {"id": task_id, "repeat": repeat, "rouge2_f1": 0.25, "rougeL_f1": 0.5,
            "geval_faithfulness": 4.0, "geval_faithfulness_reasoning": "supported",
            "error_codes": []}


@pytest.fixture
def run(tmp_path):
    """(experiment id, run id) in a fresh SQLite store."""
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    experiment_id = mlflow.create_experiment("traces", artifact_location=str(tmp_path / "a"))
    run_id = mlflow.MlflowClient().create_run(experiment_id).info.run_id
    yield experiment_id, run_id
    mlflow.set_tracking_uri(None)


def _names(experiment_id: str, run_id: str) -> dict[str, Counter]:
    traces = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list",
                                  include_spans=False)
    return {t.info.trace_id:
            Counter(a.name for a in t.info.assessments) for t in traces}


def test_a_trace_missing_scores_gets_each_once_and_a_second_continuation_adds_none(run):
    experiment_id, run_id = run
    predictions = [_prediction("t1"), _prediction("t2"), _prediction("t2", repeat=1)]
    records = [_record(p.id, p.repeat) for p in predictions]
    references = {p.id: p.ground_truth for p in predictions}
    features = {"t1": {"document_tokens": 12000, "company": "ACME", "evidence_position": None},
                "t2": {"document_tokens": 900, "company": "BETA", "evidence_position": 0.25}}
    assert log_task_traces(experiment_id, run_id, predictions, tags=features) == 3
    # each trace carries its task's document features as tags the UI filters by
    acme = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list",
                                filter_string="tags.company = 'ACME'", include_spans=False)
    assert [(t.info.tags["task_id"], t.info.tags["document_tokens"]) for t in acme] == [
        ("t1", "12000")]
    assert "evidence_position" not in acme[0].info.tags  # null: not set, never "None"
    assert log_task_assessments(experiment_id, run_id, records, JUDGE, FIELDS, references) == 3
    complete = _names(experiment_id, run_id)
    want = Counter({"expected_response": 1, "rouge2_f1": 1, "rougeL_f1": 1,
                    "geval_faithfulness": 1, "error_codes": 1})
    assert all(names == want for names in complete.values())

    # the kill: one trace kept its reference and one score, another has none at all
    traces = mlflow.search_traces(locations=[experiment_id], run_id=run_id,
                                  return_type="list", include_spans=False)
    cut = {traces[0].info.trace_id: {"expected_response", "rouge2_f1"},
           traces[1].info.trace_id: set()}
    for trace in traces[:2]:
        for a in trace.info.assessments:
            if a.name not in cut[trace.info.trace_id]:
                mlflow.delete_assessment(trace.info.trace_id, a.assessment_id)
    assert _names(experiment_id, run_id) != complete

    # the continued run: the two damaged traces are completed, the intact one left alone
    again = log_task_traces(experiment_id, run_id, predictions)
    assert again == 0  # the same predictions: their traces are kept
    assert log_task_assessments(experiment_id, run_id, records, JUDGE, FIELDS, references) == 2
    assert _names(experiment_id, run_id) == complete
    # a further continuation: nothing missing, nothing doubled
    assert log_task_assessments(experiment_id, run_id, records, JUDGE, FIELDS, references) == 0
    assert _names(experiment_id, run_id) == complete


def test_a_score_a_later_attempt_has_is_attached_beside_the_ones_kept(run):
    """A judge score that was null (an unreadable reply) and is given by a later attempt
    joins the trace; the scores it had stay single."""
    experiment_id, run_id = run
    predictions = [_prediction("t1")]
    unread = {**_record("t1"), "geval_faithfulness": None}
    log_task_traces(experiment_id, run_id, predictions)
    log_task_assessments(experiment_id, run_id, [unread], JUDGE, FIELDS)
    (before,) = _names(experiment_id, run_id).values()
    assert "geval_faithfulness" not in before
    assert log_task_assessments(experiment_id, run_id, [_record("t1")], JUDGE, FIELDS) == 1
    (after,) = _names(experiment_id, run_id).values()
    assert after == before + Counter({"geval_faithfulness": 1})


def test_traces_the_export_queue_drops_are_logged_again(run, monkeypatch, caplog):
    """MLflow's async export queue discards a trace when it is full, with a warning only.
    With a queue of three, most traces of a bulk log are dropped: every one still reaches the
    store, each once, and the count returned is of traces stored."""
    from mlflow.tracing.export import async_export_queue

    experiment_id, run_id = run
    monkeypatch.setattr(async_export_queue.MLFLOW_ASYNC_TRACE_LOGGING_MAX_QUEUE_SIZE, "get",
                        lambda: 3)
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "true")
    mlflow.tracing.reset()  # a tracer built now exports through the tiny queue
    predictions = [_prediction(f"t{k}") for k in range(12)]
    assert log_task_traces(experiment_id, run_id, predictions) == 12
    traces = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list",
                                  include_spans=False)
    assert sorted(t.info.trace_metadata["task_id"] for t in traces) == \
        sorted(p.id for p in predictions)
    monkeypatch.undo()
    mlflow.tracing.reset()


def test_new_traces_are_written_with_their_scores_not_a_store_write_per_score(run,
                                                                              monkeypatch):
    """A run's traces carry every score and the reference when written: the store gets no
    write per score (MLflow's ``create_assessment``), and completing them adds nothing."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    from tracking.traces import task_assessments

    experiment_id, run_id = run
    predictions = [_prediction("t1"), _prediction("t2"), _prediction("t2", repeat=1)]
    records = [_record(p.id, p.repeat) for p in predictions]
    references = {p.id: p.ground_truth for p in predictions}
    writes = []
    create = SqlAlchemyStore.create_assessment
    monkeypatch.setattr(SqlAlchemyStore, "create_assessment",
                        lambda self, a: writes.append(a.name) or create(self, a))
    assert log_task_traces(experiment_id, run_id, predictions, assessments=task_assessments(
        records, JUDGE, FIELDS, references)) == 3
    want = Counter({"expected_response": 1, "rouge2_f1": 1, "rougeL_f1": 1,
                    "geval_faithfulness": 1, "error_codes": 1})
    assert list(_names(experiment_id, run_id).values()) == [want] * 3
    assert writes == []
    assert log_task_assessments(experiment_id, run_id, records, JUDGE, FIELDS, references) == 0
    judged = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list",
                                  include_spans=False)[0].info.assessments
    faithfulness = next(a for a in judged if a.name == "geval_faithfulness")
    assert (faithfulness.value, faithfulness.rationale, faithfulness.source.source_id) == \
        (4.0, "supported", JUDGE)
