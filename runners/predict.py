"""Run a system over tasks: concurrent, appended as each task finishes, resumable.

``predictions.jsonl`` is an append-only log: one line per finished task, flushed and
fsynced at once, so a killed process loses at most the tasks in flight. On start the log
is read back; tasks already answered are skipped (errored ones too, unless
``retry_errors``), a torn last line is dropped, and a later line for the same id
supersedes an earlier one.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from arag.records import Prediction, Task
from arag.systems.base import System

log = logging.getLogger(__name__)


@dataclass
class PredictOutcome:
    predictions: list[Prediction]  # in task order, one per task that has a prediction
    n_resumed: int = 0
    n_new: int = 0
    not_run: list[str] = field(default_factory=list)  # stopped by the cost cap
    stop_reason: str | None = None


def read_log(path: Path) -> dict[str, Prediction]:
    """Predictions already on disk, last line per id wins; a torn trailing line is cut off."""
    done: dict[str, Prediction] = {}
    if not path.exists():
        return done
    raw = path.read_bytes()
    good_end = 0
    for line in raw.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        try:
            pred = Prediction.from_dict(json.loads(line))
        except (json.JSONDecodeError, TypeError):
            break
        done[pred.id] = pred
        good_end += len(line)
    if good_end != len(raw):
        log.warning("%s: dropping a torn last record (%d bytes) left by an interrupted run",
                    path, len(raw) - good_end)
        with open(path, "r+b") as f:
            f.truncate(good_end)
    return done


class PredictionLog:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()

    def append(self, pred: Prediction) -> None:
        line = pred.to_json() + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


def predict(system: System, tasks: list[Task], log_path: Path, *, source: str,
            concurrency: int = 4, progress: bool = True, retry_errors: bool = False,
            max_cost_usd: float | None = None, label: str | None = None) -> PredictOutcome:
    done = read_log(log_path)
    keep = {i: p for i, p in done.items() if not (retry_errors and p.error)}
    todo = [t for t in tasks if t.id not in keep]
    outcome = PredictOutcome(predictions=[], n_resumed=sum(1 for t in tasks if t.id in keep))
    if outcome.n_resumed:
        log.info("%s: resuming; %d of %d tasks already done", system.name, outcome.n_resumed,
                 len(tasks))
    sink = PredictionLog(log_path)
    spent = sum(p.cost_usd or 0.0 for p in keep.values())
    results: dict[str, Prediction] = dict(keep)
    bar = tqdm(total=len(tasks), initial=outcome.n_resumed, desc=label or system.name,
               unit="task", disable=not progress, dynamic_ncols=True)
    pending: set[Future] = set()
    queue = list(todo)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        while queue or pending:
            while queue and len(pending) < concurrency:
                if max_cost_usd is not None and spent >= max_cost_usd:
                    outcome.not_run = [t.id for t in queue]
                    outcome.stop_reason = (f"cost cap runner.max_cost_usd={max_cost_usd} reached "
                                           f"(spent ${spent:.4f}); {len(queue)} tasks not run")
                    log.warning("%s: %s", system.name, outcome.stop_reason)
                    queue = []
                    break
                pending.add(pool.submit(system.predict, queue.pop(0), source))
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                pred = future.result()  # a framework error fails the run, loudly
                sink.append(pred)
                results[pred.id] = pred
                spent += pred.cost_usd or 0.0
                outcome.n_new += 1
                bar.update(1)
                bar.set_postfix(cost=f"${spent:.4f}", errors=sum(1 for p in results.values()
                                                                  if p.error))
    bar.close()
    outcome.predictions = [results[t.id] for t in tasks if t.id in results]
    return outcome
