"""What a sampled answer was judged against, read back from its run for the labelling page
(``python -m report label-sample --html``): the text of each source the system put in
front of its model, as the judge read it (``System.judged_sources``: the chunks it read,
the whole documents for stuffing, the contexts a pipeline gave).

The run keeps its config (``config.yaml``) and its predictions; the texts are rebuilt from
the dataset that config names, chunked as the run chunked it. When they cannot be (the
dataset moved, the record does not say what was read), the page says why instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from arag.datasets.base import load_dataset
from arag.records import Chunk, Prediction, Task, answer_key
from arag.retrieval.chunking import chunk_document
from arag.systems import SYSTEMS, Sources
from tracking.paths import PROJECT_ROOT


@dataclass
class Read:
    """What an answer was judged against: its sources as ``(name, text)``, and what the
    page must say of them (why there are none, which could not be found)."""

    sources: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


CHANGED = ("the task's question, reference or documents changed since the run: the text "
           "shown is today's, which the system may not have read")


def run_sources(client: Any, run_id: str, records: list[dict[str, Any]], folder: Path
                ) -> dict[str, Read]:
    """Each record's (answer key) judged sources, or why they cannot be shown."""
    keys = [answer_key(r["id"], int(r.get("repeat") or 0)) for r in records]
    try:
        cfg = OmegaConf.load(client.download_artifacts(run_id, "config.yaml", str(folder)))
        path = Path(client.download_artifacts(run_id, "predictions.jsonl", str(folder)))
        preds = {answer_key(p["id"], int(p.get("repeat") or 0)): p
                 for p in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if p}
        dataset = load_dataset(cfg.dataset, PROJECT_ROOT, call_models=False)
        system = SYSTEMS.get(str(cfg.system.kind))
    except Exception as exc:  # noqa: BLE001 - the page is still of use: it says why
        why = (f"the context this run read could not be read back ({type(exc).__name__}: "
               f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}); the trace shows it")
        return {key: Read(notes=[why]) for key in keys}
    tasks = {t.id: t for t in dataset.tasks}
    out: dict[str, Read] = {}
    for key in keys:
        pred = Prediction.from_dict(preds[key]) if key in preds else None
        task = tasks.get(pred.id) if pred else None
        if pred is None or task is None:
            out[key] = Read(notes=[f"the {'task' if pred else 'prediction'} is not in the "
                                   f"{'dataset' if pred else 'run'} any more: the trace shows "
                                   "what was read"])
            continue
        chunks = _chunks(pred, task, dataset.corpus.documents, cfg.retrieval.chunk_size,
                         cfg.retrieval.chunk_overlap)
        found = system.judged_sources(pred, task, Sources(dataset.corpus, chunks))
        if found is None:
            out[key] = Read(notes=["the record does not say what the system read (no "
                                   "context_chunk_ids or contexts): the judge had none either"])
            continue
        missing = [c for c in dict.fromkeys(pred.context_chunk_ids) if c not in chunks]
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        notes = ([f"{len(missing)} chunk(s) read are not in the dataset now and are not "
                  f"shown: {', '.join(missing[:5])}{more}"] if missing and not pred.contexts
                 else [])
        if pred.task_digest and dataset.task_digests.get(task.id) not in (None, pred.task_digest):
            notes.append(CHANGED)
        out[key] = Read(found, notes)
    return out


def _chunks(pred: Prediction, task: Task, documents: dict[str, Any], size: int,
            overlap: int) -> dict[str, Chunk]:
    """The chunks of the task's documents and of those the system read from, as the run
    chunked them (``<doc id>#L<start>-<end>``)."""
    named = {c.rsplit("#L", 1)[0] for c in pred.context_chunk_ids}
    return {c.chunk_id: c for d in sorted(set(task.doc_ids) | named) if d in documents
            for c in chunk_document(documents[d], size, overlap)}
