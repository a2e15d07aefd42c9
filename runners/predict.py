"""Run a system over tasks: concurrent, appended as each task finishes, resumable.

``predictions.jsonl`` is an append-only log: one line per finished task, flushed and
fsynced at once, so a killed process loses at most the tasks in flight. On start the log
is read back; tasks already answered are skipped (errored ones too, unless
``retry_errors``), and a later line for the same id supersedes an earlier one. A damaged
line (a torn write, a line that is not a prediction object) is set aside to
``predictions.jsonl.damaged`` and named, wherever it sits: every intact record is kept and
only the tasks without one are predicted again.

With ``runner.repeats=K`` every task is answered K times: each answer is a record of its own
(``repeat``, from 0) and a request of its own to the model (``answer_repeat``: the response
cache keys on the repeat index), so resume, the cost cap and the spend journal count
answers, and raising K asks only the repeats not yet on disk.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from arag.files import append_whole, is_storage_failure, write_bytes_atomically
from arag.llm import limits
from arag.llm.base import ChatModel
from arag.llm.budget import COST_CAP, SpendCap
from arag.llm.cache import answer_repeat
from arag.records import Prediction, Task, answer_key
from arag.systems.base import System

log = logging.getLogger(__name__)
CRASH = "crash"  # Prediction.error_kind of a task whose system raised (a bug, not the API)


@dataclass
class PredictOutcome:
    predictions: list[Prediction]  # in task order, one per task that has a prediction
    n_resumed: int = 0
    n_new: int = 0
    n_changed: int = 0  # recorded answers asked again: their task's content changed since
    not_run: list[str] = field(default_factory=list)  # answer keys stopped by the cost cap
    stop_reason: str | None = None


def read_log(path: Path) -> dict[str, Prediction]:
    """Predictions already on disk by ``answer_key`` (the task id for repeat 0), last line
    per answer wins. A damaged line (torn by a kill,
    not JSON, not a prediction object) is set aside wherever it sits: every intact record
    is kept, the damaged lines move to ``<log>.damaged`` and each is named (file:line)."""
    done: dict[str, Prediction] = {}
    if not path.exists():
        return done
    raw = path.read_bytes()
    kept: list[bytes] = []
    damaged: list[tuple[int, bytes, str]] = []
    for number, line in enumerate(raw.splitlines(keepends=True), start=1):
        pred, why = _parse_record(line)
        if pred is None:
            damaged.append((number, line, why))
            continue
        done[pred.answer_key] = pred
        kept.append(line)
    if damaged:
        _set_aside(path, kept, damaged)
    return done


def _parse_record(line: bytes) -> tuple[Prediction | None, str]:
    """The prediction on one line of the log, or (None, why the line is damaged)."""
    if not line.endswith(b"\n"):
        return None, "torn last line (no newline): a write interrupted by a kill"
    if not line.strip():
        return None, "blank line"
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"not JSON ({getattr(exc, 'msg', exc)})"
    if not isinstance(data, dict):
        return None, f"JSON {type(data).__name__}, not a prediction object"
    try:
        pred = Prediction.from_dict(data)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        return None, f"not a prediction record ({exc})"
    if not isinstance(pred.id, str) or not pred.id:
        return None, "no task id"
    return pred, ""


def _set_aside(path: Path, kept: list[bytes], damaged: list[tuple[int, bytes, str]]) -> None:
    """Move the damaged lines to ``<log>.damaged`` (appended, never deleted), then rewrite
    the log with the intact ones, whole or not at all."""
    aside = path.with_name(path.name + ".damaged")
    for number, _, why in damaged:
        log.warning("%s:%d: damaged record set aside (%s); kept in %s, the task is "
                    "predicted again", path, number, why, aside)
    with open(aside, "ab") as f:
        f.writelines(line if line.endswith(b"\n") else line + b"\n" for _, line, _ in damaged)
        f.flush()
        os.fsync(f.fileno())
    write_bytes_atomically(path, b"".join(kept))


class PredictionLog:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()

    def append(self, pred: Prediction) -> None:
        """One whole line, or none: a failed write (a full disk) leaves no torn record and
        raises an OSError naming the log."""
        with self._lock:
            append_whole(self.path, (pred.to_json() + "\n").encode("utf-8"))


@dataclass(frozen=True)
class Answer:
    """One answer to ask for: a task and which of its repeats."""

    task: Task
    repeat: int = 0

    @property
    def key(self) -> str:
        return answer_key(self.task.id, self.repeat)


def _predict_one(system: System, answer: Answer, source: str) -> Prediction:
    """The system's prediction, its model calls asking for this repeat; a task that crashes
    the system becomes that task's recorded error (counted against runner.max_error_rate,
    its traceback in the log), not a crashed job. A failed write (a full disk) is no task's
    fault: it stops the job."""
    task = answer.task
    try:
        model = _model(system)
        with answer_repeat(model, answer.repeat) if model is not None else nullcontext():
            pred = system.predict(task, source)
    except Exception as exc:  # noqa: BLE001 - one task's failure must not end the others
        if is_storage_failure(exc):
            raise  # a full disk or read-only cache ends the job, naming the path and key
        log.exception("%s: task %s failed", system.name, task.id)
        pred = Prediction(id=task.id, source=source, system=system.name,
                          model=str(getattr(_model(system), "name", "")),
                          task_type=task.task_type, question=task.question,
                          doc_ids=list(task.doc_ids), ground_truth=task.reference,
                          error=f"{type(exc).__name__}: {exc}", error_kind=CRASH)
    pred.repeat = answer.repeat
    return pred


def _model(system: System) -> ChatModel | None:
    return getattr(getattr(system, "ctx", None), "model", None)


def unchanged(done: dict[str, Prediction], digests: dict[str, str] | None
              ) -> dict[str, Prediction]:
    """The recorded predictions whose task is as it was answered (same ``task_digest``);
    all of them when the tasks carry no digests."""
    if digests is None:
        return dict(done)
    return {k: p for k, p in done.items() if p.id in digests and p.task_digest == digests[p.id]}


def predict(system: System, tasks: list[Task], log_path: Path, *, source: str,
            concurrency: int = 4, progress: bool = True, retry_errors: bool = False,
            max_cost_usd: float | None = None, label: str | None = None,
            task_digests: dict[str, str] | None = None, repeats: int = 1,
            cap: SpendCap | None = None) -> PredictOutcome:
    """Every task answered ``repeats`` times (``runner.repeats``); the outcome's
    predictions in task order, each task's repeats together. ``task_digests``: task id ->
    the digest of its content (``Dataset.task_digests``), stored on each record; a recorded
    answer whose task's digest differs is asked again.

    The cost cap: ``cap`` is the one the system's model reserves every call on
    (``Job.capped``); without one, ``max_cost_usd`` is held on what finished records cost.
    Once it is reached no task starts; a task whose call the cap refused is not run (no
    record: the same command with a higher cap answers it)."""
    answers = [Answer(t, r) for t in tasks for r in range(repeats)]
    done = read_log(log_path)
    current = unchanged(done, task_digests)
    keep = {k: p for k, p in current.items() if not (retry_errors and p.error)}
    todo = [a for a in answers if a.key not in keep]
    outcome = PredictOutcome(predictions=[], n_resumed=sum(1 for a in answers if a.key in keep),
                             n_changed=sum(1 for a in answers if a.key in done
                                           and a.key not in current))
    if outcome.n_resumed or outcome.n_changed:
        log.info("%s: resuming; %d of %d answers kept, %d answered again (their question, "
                 "documents or reference changed), %d not answered before", system.name,
                 outcome.n_resumed, len(answers), outcome.n_changed,
                 len(todo) - outcome.n_changed)
    digests = task_digests or {}
    sink = PredictionLog(log_path)
    kept_cost = sum(p.cost_usd or 0.0 for p in keep.values())  # every repeat on disk counts
    recorded = kept_cost
    by_records = cap is None and max_cost_usd is not None
    if by_records:
        cap = SpendCap(float(max_cost_usd or 0.0), lambda: kept_cost)
    results: dict[str, Prediction] = dict(keep)
    not_run: set[str] = set()
    bar = tqdm(total=len(answers), initial=outcome.n_resumed, desc=label or system.name,
               unit="answer" if repeats > 1 else "task", disable=not progress,
               dynamic_ncols=True)
    pending: set[Future] = set()
    queue = list(todo)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        while queue or pending:
            while queue and len(pending) < concurrency:
                if cap is not None and cap.reached:
                    not_run.update(a.key for a in queue)
                    queue = []
                    break
                pending.add(pool.submit(_predict_one, system, queue.pop(0), source))
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                pred = future.result()
                if pred.error_kind == COST_CAP:  # refused before it could answer: not run
                    not_run.add(pred.answer_key)
                    continue
                pred.task_digest = digests.get(pred.id)
                sink.append(pred)
                results[pred.answer_key] = pred
                recorded += pred.cost_usd or 0.0
                if by_records and cap is not None:
                    cap.charge(pred.cost_usd or 0.0)
                outcome.n_new += 1
                bar.update(1)
                pace = limits.pace_words()  # tokens per minute against the account's limit
                bar.set_postfix(cost=f"${cap.spent if cap else recorded:.4f}",
                                errors=sum(1 for p in results.values() if p.error),
                                **({"pace": pace} if pace else {}))
    bar.close()
    outcome.predictions = [results[a.key] for a in answers if a.key in results]
    if not_run and cap is not None:
        _stopped(outcome, [a.key for a in answers if a.key in not_run], cap,
                 "answers" if repeats > 1 else "tasks")
        log.warning("%s: %s", system.name, outcome.stop_reason)
    return outcome


def _stopped(outcome: PredictOutcome, not_run: list[str], cap: SpendCap, unit: str) -> None:
    """The cap's stop, said with what was spent (the spend journal's figure where the
    model's calls are held)."""
    outcome.not_run = not_run
    spent = cap.spent
    held = "" if spent >= cap.limit else ": calls in flight held the rest when more were asked"
    outcome.stop_reason = (f"cost cap runner.max_cost_usd={cap.limit:g} reached (spent "
                           f"${spent:.4f}{held}); {len(not_run)} {unit} not run")
