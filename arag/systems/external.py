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
* several ``loops`` on a record (or tool calls in a harness-format trace) -> ``agentic``;
  ``system.options.declares`` adds what records cannot show (``long_context``,
  ``closed_book``, ...); ``system.model_label`` names the model; the run is named after
  the file (``run_label``), and a trace in another format is kept as an artifact.

The file format and its checks are in ``arag.systems.predictions_file``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from arag.calls import CallLog
from arag.config import ConfigError
from arag.records import Prediction, Task
from arag.systems.base import RunSetup, Sources, System, register_system
from arag.systems.builtin import whole_documents
from arag.systems.predictions_file import (
    EMPTY_ANSWER,
    PredictionsFile,
    outside_contexts,
    read_id_map,
    read_predictions,
    unmapped_contexts,
)
from arag.trace import called_a_tool


@register_system("external")
class ExternalPredictions(System):
    """A file of predictions from a pipeline outside the harness; no model is called."""

    searches = False  # its chunks come from the file, not from a search
    calls_models = False  # its model calls were made elsewhere: the records say how many
    own_settings = ("predictions", "allow_missing", "id_map", "ignore_extra", "model_label")
    predictions: ClassVar[dict[str, Prediction]] = {}
    label: ClassVar[str] = "external"  # the run's name: system.name, else the file's stem
    model_label: ClassVar[str | None] = None  # system.model_label: the pipeline's model

    @classmethod
    def configure(cls, setup: RunSetup) -> type[System]:
        if setup.recorded is not None:  # re-scoring its own run: the records say it all
            file = PredictionsFile(Path(), {p.id: p for p in setup.recorded})
        else:
            file = _file(setup)
        preds = list(file.predictions.values())
        declared = declarations(setup.options.options.get("declares"))
        carried = any("retrieved_chunk_ids" not in p.not_recorded for p in preds)
        label = setup.options.model_label
        return type(cls.__name__, (cls,), {
            "retrieves": carried or "retrieves" in declared, "ranks": carried,
            "agentic": "agentic" in declared or any(_agent_steps(p) for p in preds),
            "long_context": "long_context" in declared, "bound": "closed_book" in declared,
            "predictions": file.predictions,
            "label": file_label(setup.options.name, setup.options.predictions),
            "model_label": label, "notes": tuple(_notes(file, label)),
            "run_metrics": _metrics(file),
            "artifacts": ({"foreign_traces.json": file.foreign_traces}
                          if file.foreign_traces else {}),
            "__module__": cls.__module__, "__qualname__": cls.__qualname__})

    @classmethod
    def run_label(cls, name: str, predictions: str | None) -> str:
        return file_label(name, predictions)

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
    def judged_sources(cls, pred: Prediction, task: Task, sources: Sources
                       ) -> list[tuple[str, str]] | None:
        if pred.contexts:  # the texts the pipeline gave its model, as given
            return [(context_name(c, k), c["text"]) for k, c in enumerate(pred.contexts)]
        if "context_chunk_ids" not in pred.not_recorded:
            return super().judged_sources(pred, task, sources)
        return whole_documents(pred, sources)

    @classmethod
    def context_chunks(cls, pred: Prediction, task: Task, sources: Sources) -> int | None:
        """The chunks its contexts were found in (None: the file does not say)."""
        if "context_chunk_ids" in pred.not_recorded:
            return None
        return len(dict.fromkeys(pred.context_chunk_ids))

    def predict(self, task: Task, source: str) -> Prediction:
        return replace(self.predictions[task.id], source=source, system=self.label,
                       model=self.model_label or "external")

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        raise NotImplementedError("external predictions are read from the file, not answered")


# what a run of predictions made elsewhere may declare it is (system.options.declares)
DECLARATIONS = ("agentic", "retrieves", "long_context", "closed_book")


def declarations(value: Any) -> set[str]:
    """``system.options.declares``: a list of ``DECLARATIONS`` (none: what the records say)."""
    given = [] if value is None else [value] if isinstance(value, str) else list(value)
    unknown = [v for v in given if v not in DECLARATIONS]
    if unknown:
        raise ConfigError(f"system.options.declares: {unknown[0]!r} is not a declaration; use "
                          f"any of {list(DECLARATIONS)}, e.g. "
                          "'+system.options.declares=[agentic,retrieves]'")
    return set(given)


def file_label(name: str, predictions: str | None) -> str:
    """What an external run is called: ``system.name`` when set, else its file's stem (so
    a sweep over several files names each run after its file)."""
    if name != "external" or not predictions:
        return name
    return Path(str(predictions)).stem


def _agent_steps(pred: Prediction) -> bool:
    """The record shows an agent at work: several loops, or tool calls in its trace."""
    return (pred.loops or 0) > 1 or called_a_tool(pred.trace)


def _file(setup: RunSetup) -> PredictionsFile:
    opts = setup.options
    if not opts.predictions:
        raise ConfigError("system.predictions is not set: system=external needs "
                          "system.predictions=PATH, the JSONL file of your pipeline's "
                          "predictions (docs/your-pipeline.md)")
    id_map = read_id_map(setup.base / str(opts.id_map)) if opts.id_map else None
    return read_predictions(setup.base / str(opts.predictions), setup.tasks, setup.corpus,
                            setup.chunks(), bool(opts.allow_missing), id_map,
                            bool(opts.ignore_extra), setup.past_limit)


def _metrics(file: PredictionsFile) -> dict[str, float]:
    preds = list(file.predictions.values())
    out = {"n_tasks_missing": float(len(file.missing)),
           "n_records_ignored": float(file.extra),
           "n_records_past_limit": float(file.past_limit),  # tasks dataset.limit cut
           "n_contexts": float(sum(len(p.contexts) for p in preds)),
           "n_contexts_unmapped": float(len(unmapped_contexts(preds))),
           "n_contexts_outside_dataset": float(outside_contexts(preds)),
           "n_tasks_without_context": float(sum(1 for p in preds if _no_context(p))),
           "n_empty_answers": float(sum(1 for p in preds if p.skip_reason == EMPTY_ANSWER)),
           "n_foreign_traces": float(len(file.foreign_traces))}
    if preds and len(file.model_calls) == len(preds):  # a total over some would be made up
        out["model_calls"] = float(sum(file.model_calls.values()))
    return out


def context_name(context: dict[str, Any], k: int) -> str:
    """What a context the pipeline gave is called: where it was found, or its place."""
    lines = context.get("lines") or []
    where = f" lines {min(lines)}-{max(lines)}" if lines else ""
    return f"context {k + 1}" + (f": {context['doc_id']}{where}" if context.get("doc_id") else "")


def _no_context(pred: Prediction) -> bool:
    return not pred.contexts and "context_chunk_ids" in pred.not_recorded


def _notes(file: PredictionsFile, model_label: str | None) -> list[Any]:
    """What the report must say about how these predictions were scored."""
    preds, missing = list(file.predictions.values()), file.missing
    notes: list[Any] = [] if model_label else ["the pipeline's model is not named (set "
                                    "system.model_label=<model>): no model was called here"]
    if missing:
        notes.append(f"{len(missing)} task(s) of the dataset have no prediction in the file "
                     f"(system.allow_missing=true): scored on the other {len(preds)}")
    if file.extra:
        notes.append(f"{file.extra} record(s) of the file are not tasks of the dataset and were "
                     "left out (system.ignore_extra=true)")
    notes += _answer_notes(preds) + _context_notes(preds) + _record_notes(file)
    return notes


def _answer_notes(preds: list[Prediction]) -> list[str]:
    empty = sum(1 for p in preds if p.skip_reason == EMPTY_ANSWER)
    skipped = [p.skip_reason for p in preds if p.skipped and p.skip_reason != EMPTY_ANSWER]
    notes = []
    if skipped:
        why = Counter(skipped).most_common(1)[0][0]
        notes.append(f"{len(skipped)} task(s) skipped by the pipeline (most often: {why}): "
                     "counted as skipped, not answered")
    if empty:
        notes.append(f"{empty} record(s) give an empty answer and no error: not answered (counted "
                     "as skipped), their latency and cost left out of the answered figures")
    return notes


def _context_notes(preds: list[Prediction]) -> list[str]:
    notes = []
    bare = sum(1 for p in preds if _no_context(p))
    if bare:
        notes.append(f"{bare} of {len(preds)} prediction(s) carry no context: faithfulness and "
                     "numeric precision are judged against the task's whole documents, and "
                     "retrieval metrics are null")
    outside = outside_contexts(preds)
    if outside:
        notes.append(f"{outside} context(s) come from documents outside the dataset: counted as "
                     "irrelevant reads in retrieval precision")
    unmapped = unmapped_contexts(preds)
    if unmapped:
        total = sum(len(p.contexts) for p in preds)
        why = Counter(reason for _, reason in unmapped).most_common(1)[0][0]
        notes.append(f"{len(unmapped)} of {total} context text(s) could not be located in the "
                     f"dataset and are left out of retrieval scores (most often: {why})")
    return notes


def _record_notes(file: PredictionsFile) -> list[Any]:
    preds = list(file.predictions.values())
    notes: list[Any] = []
    if file.foreign_traces:
        notes.append(f"{len(file.foreign_traces)} record(s) carry a trace in a format of their "
                     "own: kept as given in foreign_traces.json; their tool calls, located in "
                     "the dataset by their text, are scored as the agent's path (trajectory_*)")
    if file.reads_from_traces:
        notes.append(f"{len(file.reads_from_traces)} record(s) give no contexts: the chunk texts "
                     "their trace's chunk_read calls returned are their contexts")
    absent = Counter(k for p in preds for k in p.not_recorded
                     if k in ("cost_usd", "latency_ms", "loops", "max_loops_reached"))
    if preds and len(file.model_calls) < len(preds):
        absent["model_calls"] = len(preds) - len(file.model_calls)
    # declared, not worded: the report says fields the records lack once across runs
    notes += [{"kind": "not_recorded", "field": key, "count": count, "of": len(preds)}
              for key, count in sorted(absent.items())]
    return notes
