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
def run(tmp_path, monkeypatch):
    """(experiment id, run id) in a fresh SQLite store, traces exported synchronously as
    the harness has them (``tracking.runs.SYNC_TRACES``)."""
    from tracking.runs import SYNC_TRACES

    monkeypatch.setenv(*SYNC_TRACES)
    mlflow.tracing.reset()  # a tracer built now reads it
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    experiment_id = mlflow.create_experiment("traces", artifact_location=str(tmp_path / "a"))
    run_id = mlflow.MlflowClient().create_run(experiment_id).info.run_id
    yield experiment_id, run_id
    mlflow.set_tracking_uri(None)
    monkeypatch.undo()
    mlflow.tracing.reset()


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


def _agentic(task_id: str, error: str | None = None) -> Prediction:
    """A prediction whose trace nests: model calls, a tool that called the model itself,
    a retrieval, and a failed tool."""
    from arag.trace import ModelCall, Retrieval, ToolCall

    def call(at: float) -> ModelCall:
        return ModelCall(model="offline", start_ms=at, latency_ms=2.0, stop_reason="tool_use",
                         usage={"input_tokens": 10, "output_tokens": 3}, cost_usd=0.001,
                         cached=False, tool_calls=["keyword_search"])

    pred = _prediction(task_id)
    pred.error = error
    pred.trace = [
        call(0.0),
        Retrieval(name="semantic_search", arguments={"query": "revenue"},
                  result_chunk_ids=["c1", "c2"], start_ms=2.5, latency_ms=1.0),
        ToolCall(name="chunk_summarize", arguments={"chunk_ids": ["c1"]},
                 result_chunk_ids=["c1"], is_error=False, error=None, start_ms=4.0,
                 latency_ms=3.0, steps=[call(4.5)]),
        ToolCall(name="chunk_read", arguments={"chunk_ids": ["c9"]}, result_chunk_ids=[],
                 is_error=True, error="no chunk c9", start_ms=7.5, latency_ms=0.5),
    ]
    return pred


def _stored(experiment_id: str, run_id: str) -> list[dict]:
    """Every stored field of a run's traces that does not name the run or the trace."""
    from tracking.traces import SPANS_WRITTEN

    traces = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list")
    out = []
    for t in sorted(traces, key=lambda t: t.info.trace_metadata["task_id"]):
        info = t.info
        ids = {span.span_id: span.name for span in t.data.spans}
        out.append({
            "state": info.state, "request_time": info.request_time,
            "duration": info.execution_duration,
            "request": info.request_preview, "response": info.response_preview,
            "metadata": {k: v for k, v in info.trace_metadata.items()
                         if k not in {SPANS_WRITTEN, "mlflow.sourceRun"}},
            "tags": {k: v for k, v in info.tags.items() if k != "mlflow.artifactLocation"},
            "assessments": sorted((a.name, str(a.value), a.rationale, a.source.source_id)
                                  for a in info.assessments),
            "spans": [(span.name, span.span_type, ids.get(span.parent_id), span.start_time_ns,
                       span.end_time_ns, span.status.status_code, span.inputs, span.outputs,
                       {k: v for k, v in span.attributes.items()
                        if k != "mlflow.traceRequestId"})
                      for span in t.data.spans]})
    return out


@pytest.mark.parametrize("rows", ["a table at a time", "through the session", "with rollups"])
def test_traces_written_in_batches_are_those_mlflow_itself_writes(run, monkeypatch, rows):
    """Each trace, its nested spans, an ERROR state, tags and scores: what the batched write
    stores is field for field what MLflow's own exporter stores, and no span is written
    before its batch (one ``log_spans`` per batch, not per span). So it is when the rows
    MLflow builds go through the session (what is not a tree of new rows does), and with
    MLflow's opt-in trace rollups, which add rows of their own."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    import tracking.traces as traces_module
    from tracking.traces import task_assessments

    if rows == "through the session":
        monkeypatch.setattr(traces_module, "_rows", lambda instance: None)
    if rows == "with rollups":
        monkeypatch.setenv("MLFLOW_SQL_TRACE_ROLLUPS_ENABLED", "true")
    experiment_id, batched_run = run
    own_run = mlflow.MlflowClient().create_run(experiment_id).info.run_id
    predictions = [_agentic(f"t{k}", error="timed out" if k == 2 else None) for k in range(5)]
    if rows == "with rollups":  # a day old: MLflow queues its rollup for a day past
        for p in predictions:
            p.started_at -= 2 * 86_400
    records = [_record(p.id) for p in predictions]
    scores = task_assessments(records, JUDGE, FIELDS, {p.id: p.ground_truth for p in predictions})
    features = {p.id: {"company": "ACME"} for p in predictions}

    monkeypatch.setattr(traces_module, "BATCH", 2)
    span_writes = []
    log_spans = SqlAlchemyStore.log_spans
    monkeypatch.setattr(SqlAlchemyStore, "log_spans", lambda self, location, spans, **kw:
                        span_writes.append(len(spans)) or log_spans(self, location, spans, **kw))
    assert log_task_traces(experiment_id, batched_run, predictions, agentic=True,
                           tags=features, assessments=scores) == 5
    assert span_writes == [12, 12, 6]  # 6 spans a trace; batches of 2, 2 and the last one
    span_writes.clear()
    monkeypatch.setattr(traces_module, "STORE_SCHEMES", ())  # MLflow exports as usual
    assert log_task_traces(experiment_id, own_run, predictions, agentic=True,
                           tags=features, assessments=scores) == 5
    assert len(span_writes) == 30  # MLflow's exporter: a transaction per span

    batched, own = _stored(experiment_id, batched_run), _stored(experiment_id, own_run)
    assert batched == own
    assert [t["state"].value for t in batched] == ["OK", "OK", "ERROR", "OK", "OK"]
    # the steps outlast the recorded latency (5 ms): the task's span covers them (8 ms), on
    # whole milliseconds
    assert all(8 <= t["duration"] <= 9 for t in batched)
    assert [s[:3] for s in batched[0]["spans"]][-2:] == [
        ("llm:offline", "CHAT_MODEL", "chunk_summarize"), ("chunk_read", "TOOL", batched[0][
            "spans"][0][0])]


@pytest.mark.parametrize("store", ["sql", "server"])
def test_a_kill_before_a_batchs_spans_are_stored_is_repaired_by_the_next_run(run, monkeypatch,
                                                                             store):
    """The process dies as the spans of a batch are written. On a SQL store the batch is
    one transaction: none of it is stored. Through a tracking server (infos, then spans)
    the infos are there without a span. Either way the continued run writes each trace
    again, complete, once."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    import tracking.traces as traces_module

    experiment_id, run_id = run
    predictions = [_agentic(f"t{k}") for k in range(3)]
    if store == "server":  # a server's requests: no transaction spans them
        monkeypatch.setattr(traces_module, "_sql_store", lambda store: None)

    class Killed(BaseException):
        pass

    def die(self, location, spans, **kw):
        raise Killed

    monkeypatch.setattr(SqlAlchemyStore, "log_spans", die)
    with pytest.raises(Killed):
        log_task_traces(experiment_id, run_id, predictions, agentic=True)
    monkeypatch.undo()
    half = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list",
                                include_spans=False)
    assert len(half) == (3 if store == "server" else 0)  # the infos, without a span
    assert mlflow.search_traces(locations=[experiment_id], run_id=run_id,
                                return_type="list") == []

    assert log_task_traces(experiment_id, run_id, predictions, agentic=True) == 3
    whole = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list")
    assert sorted(t.info.trace_metadata["task_id"] for t in whole) == ["t0", "t1", "t2"]
    assert all(len(t.data.spans) == 6 for t in whole)
    assert log_task_traces(experiment_id, run_id, predictions, agentic=True) == 0


@pytest.mark.parametrize("store", ["sql", "server"])
def test_spans_the_store_refuses_are_written_again(run, monkeypatch, caplog, store):
    """The store refuses a batch's spans once: the warning says so, the traces are written
    again, and each task ends with one complete trace."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    import tracking.traces as traces_module

    experiment_id, run_id = run
    predictions = [_agentic(f"t{k}") for k in range(3)]
    if store == "server":
        monkeypatch.setattr(traces_module, "_sql_store", lambda store: None)
    log_spans = SqlAlchemyStore.log_spans
    refused = []

    def once(self, location, spans, **kw):
        if not refused:
            refused.append(len(spans))
            raise RuntimeError("database is locked")
        return log_spans(self, location, spans, **kw)

    monkeypatch.setattr(SqlAlchemyStore, "log_spans", once)
    with caplog.at_level("WARNING", logger="tracking.traces"):
        assert log_task_traces(experiment_id, run_id, predictions, agentic=True) == 3
    assert refused == [18]
    said = "the spans of 3 traces not stored" if store == "server" else "3 traces not stored"
    assert f"{said} (database is locked); writing them again" in caplog.text
    whole = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list")
    assert sorted(t.info.trace_metadata["task_id"] for t in whole) == ["t0", "t1", "t2"]
    assert all(len(t.data.spans) == 6 for t in whole)


def test_a_batchs_transaction_is_the_writing_threads_alone(run):
    """While a batch's transaction is open, another thread of the process (a runner's
    worker logging a metric) writes through a session of its own: its write stands when the
    batch is rolled back, and the store is its own again afterwards."""
    import threading

    from mlflow.tracing.client import TracingClient

    from tracking.traces import _one_transaction, _sql_store

    experiment_id, run_id = run
    store = _sql_store(TracingClient().store)
    own_maker = store.ManagedSessionMaker
    client = mlflow.MlflowClient()

    class RolledBack(BaseException):  # a kill: the batch is not committed
        pass

    def other_thread():
        client.set_tag(run_id, "written_by", "another thread")

    with pytest.raises(RolledBack), _one_transaction(store):
        assert store.get_experiment(experiment_id) is store.get_experiment(experiment_id)
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join(timeout=60)
        assert not worker.is_alive()
        client.set_tag(run_id, "written_by", "the batch")  # this thread: in the batch
        raise RolledBack
    assert client.get_run(run_id).data.tags["written_by"] == "another thread"
    assert store.ManagedSessionMaker is own_maker and "get_experiment" not in vars(store)
