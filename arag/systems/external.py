"""Predictions made outside the harness, as a system (``system=external
system.predictions=FILE``): each task's answer is read from the file, scored by every
scorer, and logged as a run like any other, so a pipeline of one's own is compared with
A-RAG, naive RAG and stuffing in the same sweep.

What the records carry decides what the system declares (``configure``):

* chunk ids, or context texts located in the dataset -> it ``retrieves`` and ``ranks``
  (in the order given); retrieval precision/recall and Recall/MRR/nDCG@k apply;
* context texts -> faithfulness and numeric precision are judged against them; chunk ids
  alone -> against those chunks; neither -> against the task's whole documents, and the
  report says so;
* ``cost_usd``, ``latency_ms``, token counts, ``loops`` -> logged when given, null with the
  reason when not (never 0).

The file format and its checks are in ``arag.systems.predictions_file``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any, ClassVar

from arag.calls import CallLog
from arag.config import ConfigError
from arag.records import Prediction, Task
from arag.systems.base import RunSetup, Sources, System, register_system
from arag.systems.builtin import whole_documents
from arag.systems.predictions_file import read_predictions, unmapped_contexts


@register_system("external")
class ExternalPredictions(System):
    """A file of predictions from a pipeline outside the harness; no model is called."""

    searches = False  # its chunks come from the file, not from a search
    predictions: ClassVar[dict[str, Prediction]] = {}

    @classmethod
    def configure(cls, setup: RunSetup) -> type[System]:
        if setup.recorded is not None:  # re-scoring its own run: the records say it all
            preds, missing = {p.id: p for p in setup.recorded}, []
        else:
            file = _file(setup)
            preds, missing = file.predictions, file.missing
        carried = [p for p in preds.values() if "retrieved_chunk_ids" not in p.not_recorded]
        return type(cls.__name__, (cls,), {
            "retrieves": bool(carried), "ranks": bool(carried), "predictions": preds,
            "notes": tuple(_notes(list(preds.values()), missing)),
            "run_metrics": _metrics(list(preds.values()), missing), "__module__": cls.__module__,
            "__qualname__": cls.__qualname__})

    @classmethod
    def answers(cls, task: Task) -> bool:
        return task.id in cls.predictions

    @classmethod
    def ranking(cls, pred: Prediction) -> list[str] | None:
        """The chunks in the order the file gives them (or its contexts were found in)."""
        if "retrieved_chunk_ids" in pred.not_recorded:
            return None
        return list(dict.fromkeys(pred.retrieved_chunk_ids))

    @classmethod
    def judged_context(cls, pred: Prediction, task: Task, sources: Sources) -> str | None:
        if pred.contexts:  # the texts the pipeline gave its model, as given
            return "\n\n".join(c["text"] for c in pred.contexts)
        if "context_chunk_ids" not in pred.not_recorded:
            return super().judged_context(pred, task, sources)
        return whole_documents(pred, sources)

    @classmethod
    def context_chunks(cls, pred: Prediction, task: Task, sources: Sources) -> int | None:
        """The chunks its contexts were found in (None: the file does not say)."""
        if "context_chunk_ids" in pred.not_recorded:
            return None
        return len(dict.fromkeys(pred.context_chunk_ids))

    def predict(self, task: Task, source: str) -> Prediction:
        return replace(self.predictions[task.id], source=source, system=self.name)

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        raise NotImplementedError("external predictions are read from the file, not answered")


def _file(setup: RunSetup) -> Any:
    path = setup.options.predictions
    if not path:
        raise ConfigError("system.predictions is not set: system=external needs "
                          "system.predictions=PATH, the JSONL file of your pipeline's "
                          "predictions (docs/your-pipeline.md)")
    file = setup.base / str(path)
    return read_predictions(file, setup.tasks, setup.corpus, setup.chunks(),
                            bool(setup.options.allow_missing))


def _metrics(preds: list[Prediction], missing: list[str]) -> dict[str, float]:
    return {"n_tasks_missing": float(len(missing)),
            "n_contexts": float(sum(len(p.contexts) for p in preds)),
            "n_contexts_unmapped": float(len(unmapped_contexts(preds))),
            "n_tasks_without_context": float(sum(1 for p in preds if _no_context(p)))}


def _no_context(pred: Prediction) -> bool:
    return not pred.contexts and "context_chunk_ids" in pred.not_recorded


def _notes(preds: list[Prediction], missing: list[str]) -> list[str]:
    """What the report must say about how these predictions were scored."""
    notes = []
    if missing:
        notes.append(f"{len(missing)} task(s) of the dataset have no prediction in the file "
                     f"(system.allow_missing=true): scored on the other {len(preds)}")
    bare = sum(1 for p in preds if _no_context(p))
    if bare:
        notes.append(f"{bare} of {len(preds)} prediction(s) carry no context: faithfulness and "
                     "numeric precision are judged against the task's whole documents, and "
                     "retrieval metrics are null")
    unmapped = unmapped_contexts(preds)
    if unmapped:
        total = sum(len(p.contexts) for p in preds)
        why = Counter(reason for _, reason in unmapped).most_common(1)[0][0]
        notes.append(f"{len(unmapped)} of {total} context text(s) could not be located in the "
                     f"dataset and are left out of retrieval scores (most often: {why})")
    absent = Counter(k for p in preds for k in p.not_recorded
                     if k in ("cost_usd", "latency_ms"))
    for key, count in sorted(absent.items()):
        notes.append(f"{count} of {len(preds)} record(s) give no {key}: null, not 0")
    return notes
