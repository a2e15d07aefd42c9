"""One MLflow trace per task, rebuilt from the prediction's call log.

Spans: a root span for the task (AGENT for a system that declares itself agentic, CHAIN
otherwise), a CHAT_MODEL span for
every model call (token usage, cost, cached or not) and a TOOL or RETRIEVER span for every
tool call (arguments, returned chunk ids), at their recorded times; a model call a tool
makes itself (``chunk_summarize``) is a CHAT_MODEL span inside its TOOL span. Traces are linked to
the run through the ``mlflow.sourceRun`` metadata, so they show in the run's Traces tab.
With ``runner.repeats``, each answer to a task is a trace of its own, named
``<system>:<task>#<repeat>`` from repeat 1 on; every trace of a task carries the tag and
metadata ``task_id`` (search ``tags.task_id = '...'`` to list a task's repeats together)
and ``repeat``.

Each trace carries the task's scores as MLflow assessments (feedback): every report metric
the task has, its error codes, and the comparison metric's reason when it is null; judge
scores come with the judge's reasoning as their rationale.

On a SQL store, or a tracking server over its REST API, traces are stored in batches
(``_collected``) of ``BATCH``: on a SQL store the infos, tags, metadata, scores and spans of
a batch in one transaction; through a server each trace's info in a request of its own, then
the spans of the batch in one. MLflow's exporter writes every span as it ends, each in a
transaction of its own, and then merges the trace's row into the one those spans made. The
stored traces are the same, field for field; a kill between a server's infos and their spans
is found by the next run (``_held_stamp``) and the trace written again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from arag import progress
from arag.records import Prediction, answer_key
from arag.trace import ModelCall, Retrieval, Step

log = logging.getLogger(__name__)
DIGITS = 4  # decimals of a score shown on a trace (the records keep every digit)
MS = 1_000_000  # nanoseconds
BATCH = 50  # traces whose spans are written in one transaction
SPANS_WRITTEN = "spans_written"  # metadata of a trace stored in a batch (``_held_stamp``)
STORE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https")


def _ns(pred: Prediction, ms: float) -> int:
    return int((pred.started_at + ms / 1000.0) * 1e9)


Assessments = dict[str, list[tuple[str, dict[str, Any]]]]  # answer key -> (name, kwargs)


def log_task_traces(experiment_id: str, run_id: str, predictions: list[Prediction],
                    agentic: bool = False, tags: Mapping[str, Mapping[str, Any]] | None = None,
                    assessments: Assessments | None = None) -> int:
    """One trace per task of the run; a task whose prediction already has its trace is left
    alone (a continued run), one whose prediction changed (a retried error) gets a new trace
    in place of the old. ``tags``: task id -> its document features, set as trace tags so
    the MLflow UI filters traces by them (a null feature is not set). ``assessments``
    (``task_assessments``): the scores each new trace is written with, in the trace's own
    transaction rather than one per score. Returns the number of traces written."""
    import mlflow

    existing = _existing_traces(experiment_id, run_id)
    stale: list[str] = []
    count = 0
    todo = [p for p in predictions if existing.get(p.answer_key, ("", ""))[1] != _stamp(p)]
    with progress.bar("traces", len(todo), "trace", show=bool(todo)) as shown, \
            _collected(experiment_id) as collected:
        for pred in todo:
            old = existing.get(pred.answer_key)
            if old is not None:
                stale.append(old[0])
            _log_trace(experiment_id, run_id, pred, _stamp(pred), agentic,
                       (tags or {}).get(pred.id), assessments)
            count += 1
            if len(collected) >= BATCH:
                _store(experiment_id, collected)
            shown.update(1)
    _flush()
    lost = _not_stored(experiment_id, run_id, todo)
    for pred in lost:  # a full export queue drops a trace with a warning only (a store that
        # refused a batch, with one): once more, one at a time, so the queue is empty for each
        _log_trace(experiment_id, run_id, pred, _stamp(pred), agentic,
                   (tags or {}).get(pred.id), assessments)
        _flush()
    if lost:
        still = _not_stored(experiment_id, run_id, lost)
        if still:
            log.error("%d of %d traces did not reach the MLflow store (tasks %s): the run's "
                      "records and metrics hold every task, its Traces tab lacks these",
                      len(still), len(todo), ", ".join(p.answer_key for p in still[:5]))
        count -= len(still)
    if stale:
        mlflow.MlflowClient().delete_traces(experiment_id, trace_ids=stale)
    return count


@contextmanager
def _collected(experiment_id: str) -> Iterator[list[Any]]:
    """While open, a finished trace is not exported by MLflow but collected in the list
    yielded; the caller stores batches of them (``_store``) and what is left is stored on
    exit. Where MLflow's exporter is not its plain synchronous one to a SQL store or a
    tracking server (async logging, a batch span processor, Databricks), MLflow exports as
    usual and the list stays empty. A server whose store cannot take spans refuses the
    batch: its traces are then written again by MLflow's exporter (``log_task_traces``)."""
    import mlflow
    from mlflow.tracing.export.mlflow_v3 import MlflowV3SpanExporter
    from mlflow.tracing.provider import _get_span_processor, _get_tracer

    collected: list[Any] = []
    _get_tracer(__name__)  # the provider, built now if no span was made yet
    processor = _get_span_processor()
    exporter = getattr(processor, "span_exporter", None)
    scheme = mlflow.get_tracking_uri().split(":", 1)[0].split("+", 1)[0]
    if type(exporter) is not MlflowV3SpanExporter or exporter._should_log_async() \
            or getattr(processor, "_batch_delegate", None) is not None \
            or scheme not in STORE_SCHEMES:
        yield collected
        return
    processor.span_exporter = _Collector(collected)
    try:
        yield collected
    finally:
        processor.span_exporter = exporter
        if collected:
            _store(experiment_id, collected)


class _Collector:
    """A span exporter that keeps each finished trace (at its root span's end) instead of
    writing it: what MLflow's exporter does first, without the store writes."""

    def __init__(self, into: list[Any]) -> None:
        self.into = into

    def export(self, spans: Sequence[Any]) -> None:
        from mlflow.tracing.trace_manager import InMemoryTraceManager

        manager = InMemoryTraceManager.get_instance()
        for span in spans:
            if span.parent is None and \
                    (held := manager.pop_trace(span.context.trace_id)) is not None:
                self.into.append(held.trace)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _store(experiment_id: str, traces: list[Any]) -> None:
    """Store collected traces and empty the list. On a SQL store, the infos (tags, metadata,
    scores) and spans of all of them in one transaction (``_one_transaction``): the batch is
    stored whole or not at all. On a tracking server, each trace's info in a request of its
    own, then all their spans in one. A trace the store refuses is left out with a warning
    and found missing by ``_not_stored``, which writes it again; so are the traces of spans a
    server refuses (their infos are deleted first)."""
    from mlflow.tracing.client import TracingClient
    from mlflow.tracing.utils import add_size_stats_to_trace_metadata

    client = TracingClient()
    batch = list(traces)
    traces.clear()
    for trace in batch:
        add_size_stats_to_trace_metadata(trace)
        trace.info.trace_metadata[SPANS_WRITTEN] = "in a batch"
    sql = _sql_store(client.store)
    if sql is not None:
        try:
            with _one_transaction(sql) as transaction:
                _start_traces(transaction, client, [trace.info for trace in batch])
                client.log_spans(experiment_id, [span for t in batch for span in t.data.spans])
        except Exception as exc:  # noqa: BLE001 - none of the batch stored: written again
            log.warning("%d traces not stored (%s); writing them again", len(batch), exc)
        return
    stored = []
    for trace in batch:
        try:
            client.start_trace(trace.info)
        except Exception as exc:  # noqa: BLE001 - written again by the caller
            log.warning("trace %s not stored (%s); writing it again", trace.info.trace_id, exc)
            continue
        stored.append(trace)
    try:
        client.log_spans(experiment_id, [span for t in stored for span in t.data.spans])
    except Exception as exc:  # noqa: BLE001 - written again by the caller
        log.warning("the spans of %d traces not stored (%s); writing them again",
                    len(stored), exc)
        client.delete_traces(experiment_id, trace_ids=[t.info.trace_id for t in stored])


def _sql_store(store: Any) -> Any:
    """``store`` where it is MLflow's SQL store (one transaction can hold a batch), else
    None."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    return store if isinstance(store, SqlAlchemyStore) else None


class _Transaction:
    """The session a batch's store calls share (``session``: the open one, or a
    ``_Deferred`` standing for it while ``_start_traces`` runs)."""

    def __init__(self, session: Any) -> None:
        self.open = session
        self.session = session


@contextmanager
def _one_transaction(store: Any) -> Iterator[_Transaction]:
    """While open, every store call this thread makes uses one session, committed on exit
    and rolled back on any error: MLflow's SQL store opens a session, and commits, in each
    call (``start_trace``, ``log_spans``, the experiment they read), each a write to disk.
    The experiment a trace is written to is read once. Other threads keep their own."""
    own, read = store.ManagedSessionMaker, store.get_experiment
    inherited = "get_experiment" not in vars(store)  # the class's method
    thread = threading.get_ident()
    experiments: dict[str, Any] = {}
    with own(read_only=False) as session:
        transaction = _Transaction(session)

        @contextmanager
        def shared(read_only: bool = True) -> Iterator[Any]:
            if threading.get_ident() != thread:
                with own(read_only=read_only) as theirs:
                    yield theirs
                return
            yield transaction.session

        def experiment(experiment_id: str) -> Any:  # read once, not once a trace
            if threading.get_ident() != thread:
                return read(experiment_id)
            if experiment_id not in experiments:
                experiments[experiment_id] = read(experiment_id)
            return experiments[experiment_id]

        store.ManagedSessionMaker, store.get_experiment = shared, experiment
        try:
            yield transaction
        finally:
            store.ManagedSessionMaker = own
            if inherited:
                del store.get_experiment  # the class's own again
            else:
                store.get_experiment = read


def _start_traces(transaction: _Transaction, client: Any, infos: list[Any]) -> None:
    """MLflow's ``start_trace`` for each info, its rows (the trace, its tags, metadata and
    scores) built by MLflow as always, then written a table at a time, one statement for
    each table's rows of the whole batch. MLflow's store flushes its objects trace by trace,
    and the unit of work's bookkeeping of some 30 objects a trace was most of a batch's
    time. What MLflow adds that is not such a tree of rows (an opt-in rollup queue's rows)
    goes through the session as MLflow's own flush would write it."""
    from sqlalchemy import insert

    deferred = _Deferred(transaction.open)
    transaction.session = deferred
    try:
        for info in infos:
            client.start_trace(info)
    finally:
        transaction.session = transaction.open
    tables: dict[Any, list[dict[str, Any]]] = {}
    for added in deferred.added:
        tree = _rows(added)
        if tree is None:
            transaction.open.add(added)
            continue
        for table, row in tree:
            tables.setdefault(table, []).append(row)
    for table, rows in tables.items():  # parents first: a table is met before its children
        by_columns: dict[frozenset[str], list[dict[str, Any]]] = {}
        for row in rows:
            by_columns.setdefault(frozenset(row), []).append(row)
        for same in by_columns.values():
            transaction.open.execute(insert(table), same)
    transaction.open.flush()


class _Deferred:
    """A session that keeps the traces MLflow adds to it (``added``) for ``_start_traces``;
    anything else added (the rows of MLflow's opt-in rollup queue), flushes and queries go
    to the session it stands for, as MLflow has them."""

    def __init__(self, session: Any) -> None:
        from mlflow.store.tracking.dbmodels.models import SqlTraceInfo

        self.session = session
        self.added: list[Any] = []
        self._trace = SqlTraceInfo

    def add(self, instance: Any, _warn: bool = True) -> None:
        if isinstance(instance, self._trace):
            self.added.append(instance)
        else:
            self.session.add(instance)

    def add_all(self, instances: Any) -> None:
        for instance in instances:
            self.add(instance)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def _rows(instance: Any, parent: Any = None, via: Any = None, parent_row: dict[str, Any] | None
          = None) -> list[tuple[Any, dict[str, Any]]] | None:
    """The rows an ORM object and the objects it holds (one-to-many) stand for, as the
    unit of work would insert them: the columns set and not None (a column left out takes
    its default), each child's keys from its parent's row. None for anything else (an object
    holding another many-to-one), which is then added to the session as it is."""
    from sqlalchemy import inspect
    from sqlalchemy.orm import RelationshipDirection

    state = inspect(instance)
    if state.key is not None:  # already in the store: not a new row
        return None
    values = state.dict
    row = {prop.columns[0].key: values[prop.key] for prop in state.mapper.column_attrs
           if values.get(prop.key) is not None}
    if via is not None and parent_row is not None:
        for parent_column, child_column in via.local_remote_pairs:
            if parent_column.key not in parent_row:
                return None
            row[child_column.key] = parent_row[parent_column.key]
    out = [(state.mapper.local_table, row)]
    for relationship in state.mapper.relationships:
        held = values.get(relationship.key)
        if held is None or held == []:
            continue
        if relationship.direction is RelationshipDirection.MANYTOONE and held is parent:
            continue  # the back reference to the parent whose rows these are
        if relationship.direction is not RelationshipDirection.ONETOMANY:
            return None
        for child in held:
            rows = _rows(child, instance, relationship, row)
            if rows is None:
                return None
            out.extend(rows)
    return out


def _flush() -> None:
    import mlflow

    try:
        mlflow.flush_trace_async_logging()
    except Exception:  # noqa: BLE001 - older/newer MLflow without async logging
        pass


def _not_stored(experiment_id: str, run_id: str, predictions: list[Prediction]
                ) -> list[Prediction]:
    """The predictions whose trace, as logged now, the store does not hold."""
    if not predictions:
        return []
    # every trace counts: a retried task's old trace is still there until it is deleted
    held = {(_trace_key(t.info.trace_metadata), _held_stamp(t.info))
            for t in _task_traces(experiment_id, run_id)}
    return [p for p in predictions if (p.answer_key, _stamp(p)) not in held]


def log_task_assessments(experiment_id: str, run_id: str, records: list[dict[str, Any]],
                         judge: str, fields: list[str],
                         references: dict[str, str | None] | None = None) -> int:
    """Scores as feedback on each task's trace (a task without scores gets one saying
    why), rounded to ``DIGITS``, beside the task's reference summary as an expectation
    (``expected_response``: what the scores were measured against). Only the names a trace
    does not hold yet are logged: a continued run leaves complete traces alone and completes
    one that a kill left with some of its scores (or a score a re-asked judge now gives),
    each name once. Returns the number of traces given any."""
    import mlflow

    traces = mlflow.search_traces(locations=[experiment_id], run_id=run_id,
                                  return_type="list", include_spans=False)
    by_answer = {_trace_key(t.info.trace_metadata): t for t in traces}
    todo = []
    for key, wanted in task_assessments(records, judge, fields, references).items():
        trace = by_answer.get(key)
        if trace is None:
            continue
        held = {a.name for a in trace.info.assessments or []}
        missing = [(n, kw) for n, kw in wanted if n not in held]
        if missing:
            todo.append((trace.info.trace_id, missing))
    with progress.bar("scores on traces", len(todo), "trace", show=bool(todo)) as shown:
        for trace_id, missing in todo:
            for name, kwargs in missing:
                attach = mlflow.log_expectation if name == EXPECTED else mlflow.log_feedback
                attach(trace_id=trace_id, name=name, **kwargs)
            shown.update(1)
    return len(todo)


EXPECTED = "expected_response"  # the reference summary on a trace (an expectation)


def task_assessments(records: list[dict[str, Any]], judge: str, fields: list[str],
                     references: dict[str, str | None] | None = None) -> Assessments:
    """Every assessment each answer's trace should carry (``log_task_assessments``), by
    answer key (``Prediction.answer_key``)."""
    return {answer_key(r["id"], r.get("repeat") or 0): _assessments(r, fields, judge, references)
            for r in records}


def _assessment(trace_id: str, name: str, kwargs: dict[str, Any]) -> Any:
    """The entity ``mlflow.log_expectation`` / ``mlflow.log_feedback`` would log."""
    from mlflow.entities import Expectation, Feedback

    made = Expectation if name == EXPECTED else Feedback
    return made(name=name, trace_id=trace_id, **kwargs)


def _attach(trace_id: str, assessments: list[tuple[str, dict[str, Any]]]) -> None:
    """Assessments held by a trace still being built, so MLflow's exporter writes them with
    the trace (``start_trace`` stores ``TraceInfo.assessments`` in its transaction). This
    is what ``mlflow.log_feedback`` itself does for the active trace; a trace started
    without a context is not the active one, so it is done here the same way."""
    from mlflow.tracing.trace_manager import InMemoryTraceManager

    with InMemoryTraceManager.get_instance().get_trace(trace_id) as trace:
        if trace is None:  # tracing disabled: nothing will be exported
            return
        trace.info.assessments.extend(_assessment(trace_id, n, kw) for n, kw in assessments)


def _assessments(record: dict[str, Any], fields: list[str], judge: str,
                 references: dict[str, str | None] | None
                 ) -> list[tuple[str, dict[str, Any]]]:
    """Every assessment a task's trace should carry, by name: the reference, then scores."""
    reference = (references or {}).get(record["id"])
    expected = [(EXPECTED, {"value": reference, "source": _code_source()})] if reference else []
    return expected + _feedback(record, fields, judge)


def _code_source() -> Any:
    from mlflow.entities import AssessmentSource

    return AssessmentSource(source_type="CODE", source_id="arag-eval")


def _feedback(record: dict[str, Any], fields: list[str], judge: str
              ) -> list[tuple[str, dict[str, Any]]]:
    from mlflow.entities import AssessmentError, AssessmentSource

    code = _code_source()
    out = []
    for name in fields:
        value = record.get(name)
        reasoning = record.get(f"{name}_reasoning")
        source = AssessmentSource(source_type="LLM_JUDGE", source_id=judge) \
            if f"{name}_reasoning" in record else code
        if value is not None:
            out.append((name, {"value": round(float(value), DIGITS), "source": source,
                               "rationale": reasoning or None}))
    if record.get("error") or record.get("skipped"):  # no scores: say why, once
        why = record.get("error") or f"skipped: {record.get('skip_reason')}"
        out.append(("scores", {"error": AssessmentError(error_code="NOT_SCORED",
                                                        error_message=str(why)[:1000]),
                               "source": code}))
    if isinstance(record.get("error_codes"), list):
        out.append(("error_codes", {"value": ", ".join(record["error_codes"]) or "none",
                                    "source": AssessmentSource(source_type="LLM_JUDGE",
                                                               source_id=judge)}))
    return out


def _stamp(pred: Prediction) -> str:
    """Which prediction of a task a trace shows (a retried task gets a new one)."""
    return "skipped" if pred.skipped else f"{pred.started_at:.6f}"


def _existing_traces(experiment_id: str, run_id: str) -> dict[str, tuple[str, str]]:
    """answer key (``Prediction.answer_key``) -> (trace id, prediction stamp) of the traces
    the run already has."""
    return {_trace_key(t.info.trace_metadata): (t.info.trace_id, _held_stamp(t.info))
            for t in _task_traces(experiment_id, run_id)}


def _held_stamp(info: Any) -> str:
    """The prediction stamp a stored trace shows, or "incomplete" for a trace stored in a
    batch whose spans never reached the store (a kill between ``start_trace`` and
    ``log_spans``): a continued run writes it again."""
    from mlflow.tracing.constant import SpansLocation, TraceTagKey

    if SPANS_WRITTEN in info.trace_metadata and \
            info.tags.get(TraceTagKey.SPANS_LOCATION) != SpansLocation.TRACKING_STORE.value:
        return "incomplete"
    return str(info.trace_metadata.get("prediction", ""))


class RunTraces:
    """The traces of runs (without their spans), searched once a run however many readers
    of one report ask: the people's feedback on them, the links to them."""

    def __init__(self, experiment_id: str) -> None:
        self.experiment_id = experiment_id
        self._held: dict[str, list[Any]] = {}

    def __call__(self, run_id: str) -> list[Any]:
        if run_id not in self._held:
            import mlflow

            self._held[run_id] = mlflow.search_traces(
                locations=[self.experiment_id], run_id=run_id, return_type="list",
                include_spans=False)
        return self._held[run_id]


def trace_route(experiment_id: str, trace_id: str) -> str:
    """The MLflow UI's address of one trace (MLflow 3's trace page, which opens it in the
    experiment's Traces tab), after the UI's origin."""
    return f"#/experiments/{experiment_id}/traces/{trace_id}"


def trace_ids(experiment_id: str, finished: list[dict[str, Any]],
              traces: Callable[[str], list[Any]] | None = None) -> dict[str, dict[str, str]]:
    """run id -> answer key (the task id; ``<task>#<repeat>`` from repeat 1 on) -> the id
    of that answer's MLflow trace. ``traces``: a run's traces, where the caller holds them
    (a ``RunTraces``). A run whose traces cannot be read has no entry: links to them are
    left out, nothing else."""
    out: dict[str, dict[str, str]] = {}
    of_run = traces or RunTraces(experiment_id)
    for run in finished:
        try:
            traces_of_run = of_run(run["run_id"])
        except Exception as exc:  # noqa: BLE001 - the pages are still useful without links
            log.warning("traces of run %s not found (%s): no links to them", run["run_id"], exc)
            continue
        out[run["run_id"]] = {_trace_key(t.info.trace_metadata): t.info.trace_id
                              for t in traces_of_run if "task_id" in t.info.trace_metadata}
    return out


def _task_traces(experiment_id: str, run_id: str) -> list[Any]:
    """The run's traces of tasks (without their spans), searched now."""
    return [t for t in RunTraces(experiment_id)(run_id) if "task_id" in t.info.trace_metadata]


def _trace_key(meta: dict[str, str]) -> str:
    """The answer a trace shows (traces logged before repeats existed are repeat 0)."""
    return answer_key(meta.get("task_id", ""), int(meta.get("repeat") or 0))


def _log_trace(experiment_id: str, run_id: str, pred: Prediction, stamp: str,
               agentic: bool, features: Mapping[str, Any] | None = None,
               assessments: Assessments | None = None) -> None:
    import mlflow
    from mlflow.entities import SpanType

    # a skipped task made no call: its trace is a single span that says why, at log time
    started = pred.started_at or time.time()
    task = {"task_id": pred.id, "repeat": str(pred.repeat)}
    feature_tags = {k: str(v) for k, v in (features or {}).items() if v is not None}
    root = mlflow.start_span_no_context(
        name=f"{pred.system}:{pred.answer_key}",
        span_type=SpanType.AGENT if agentic else SpanType.CHAIN,
        inputs={"question": pred.question, "doc_ids": pred.doc_ids},
        attributes={"system": pred.system, "model": pred.model, "task_id": pred.id},
        metadata={"mlflow.sourceRun": run_id, **task, "prediction": stamp},
        tags={**feature_tags, **task},  # a task's repeats are found together by task_id
        experiment_id=experiment_id,
        start_time_ns=MS * (int(started * 1e9) // MS),
    )
    for step in pred.trace:
        _span(root, pred, step, SpanType)
    root.set_outputs({"predicted": pred.predicted, "error": pred.error,
                      "skipped": pred.skipped, "skip_reason": pred.skip_reason,
                      "retrieved_chunk_ids": pred.retrieved_chunk_ids})
    root.set_attributes({"loops": pred.loops, "cost_usd": pred.cost_usd,
                         "max_loops_reached": pred.max_loops_reached})
    if pred.error:
        root.set_status("ERROR")
    if assessments and assessments.get(pred.answer_key):
        _attach(root.trace_id, assessments[pred.answer_key])
    # the task's span is on whole milliseconds (a trace's duration is stored in them) and
    # covers its steps, should the recorded latency end before the last one: MLflow's store
    # then gives the trace the same duration however its spans were written (``_store``)
    last = max((_ns(pred, step.start_ms + step.latency_ms) for step in pred.trace), default=0)
    end = max(int((started + (pred.latency_ms or 0.0) / 1000.0) * 1e9), last)
    root.end(end_time_ns=-MS * (-end // MS))


def _span(parent: Any, pred: Prediction, step: Step, SpanType: Any) -> None:
    import mlflow

    start = step.start_ms
    if isinstance(step, ModelCall):
        attributes: dict[str, Any] = {"usage": step.usage, "cost_usd": step.cost_usd,
                                      "cached": step.cached, "stop_reason": step.stop_reason}
        span = mlflow.start_span_no_context(
            name=f"llm:{step.model}", span_type=SpanType.CHAT_MODEL, parent_span=parent,
            start_time_ns=_ns(pred, start),
            attributes=attributes,
        )
        span.set_outputs({"stop_reason": step.stop_reason, "tool_calls": step.tool_calls})
    else:
        span_type = SpanType.RETRIEVER if isinstance(step, Retrieval) else SpanType.TOOL
        span = mlflow.start_span_no_context(
            name=step.name, span_type=span_type, parent_span=parent,
            start_time_ns=_ns(pred, start), inputs=step.arguments,
        )
        error = None if isinstance(step, Retrieval) else step.error
        for inner in [] if isinstance(step, Retrieval) else step.steps:
            _span(span, pred, inner, SpanType)  # calls the tool made itself, inside its span
        span.set_outputs({"chunk_ids": step.result_chunk_ids, "error": error})
        if error is not None:
            span.set_status("ERROR")
    span.end(end_time_ns=_ns(pred, start + step.latency_ms))


def log_trace_feedback(feedback: Sequence[tuple[str, str, str, str | None, str]]) -> int:
    """A judge's verdicts on given traces, each ``(trace id, name, value, rationale, judge)``
    (a pairwise verdict goes on both compared tasks' traces). Returns how many were logged."""
    import mlflow
    from mlflow.entities import AssessmentSource

    for trace_id, name, value, rationale, judge in feedback:
        mlflow.log_feedback(trace_id=trace_id, name=name, value=value, rationale=rationale,
                            source=AssessmentSource(source_type="LLM_JUDGE", source_id=judge))
    return len(feedback)
