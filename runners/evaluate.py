"""Score predictions: scorers -> one EvalRecord per task (``predictions.eval.jsonl``)."""

from __future__ import annotations

from typing import Any

from arag.records import Chunk, Corpus, Prediction, Task
from arag.systems.builtin import gold_passages
from metrics import Scorer, ScoringItem

PASSTHROUGH = ("loops", "max_loops_reached", "cost_usd", "cost_usd_uncached", "latency_ms",
               "input_tokens", "output_tokens", "cache_read_input_tokens",
               "cache_creation_input_tokens", "skipped", "skip_reason", "error")


def gold_chunk_ids(task: Task, chunks_by_doc: dict[str, list[Chunk]]) -> set[str] | None:
    """Chunks that contain at least one gold line of the task (None: no gold at all)."""
    if task.gold_lines is None:
        return None
    gold = set()
    for doc_id, lines in task.gold_lines.items():
        for chunk in chunks_by_doc.get(doc_id, []):
            if any(chunk.covers(line) for line in lines):
                gold.add(chunk.chunk_id)
    return gold


def context_text(pred: Prediction, task: Task, corpus: Corpus, chunk_by_id: dict[str, Chunk],
                 system_kind: str) -> str:
    """What the system put in front of the model: chunks it read, gold lines, or documents."""
    if system_kind in ("arag", "naive"):
        return "\n\n".join(chunk_by_id[c].text for c in pred.context_chunk_ids if c in chunk_by_id)
    if system_kind == "oracle":
        return gold_passages(task, corpus)
    if system_kind == "closed_book":
        return ""
    return "\n\n".join(corpus.documents[d].text for d in pred.doc_ids if d in corpus.documents)


def paged_gold_documents(task: Task, corpus: Corpus) -> dict[str, tuple[int, ...]]:
    """The page of every line of the task's gold documents that have pages."""
    docs = (corpus.documents.get(d) for d in (task.gold_lines or {}))
    return {d.doc_id: d.line_pages for d in docs if d is not None and d.line_pages is not None}


def evaluate(predictions: list[Prediction], tasks: dict[str, Task], corpus: Corpus,
             chunks: list[Chunk], scorers: list[Scorer], target_length: int,
             system_kind: str) -> list[dict[str, Any]]:
    chunks_by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        chunks_by_doc.setdefault(c.doc_id, []).append(c)
    chunk_by_id = {c.chunk_id: c for c in chunks}
    items = [
        ScoringItem(
            prediction=p, task=tasks[p.id],
            gold_chunk_ids=gold_chunk_ids(tasks[p.id], chunks_by_doc),
            context_text=context_text(p, tasks[p.id], corpus, chunk_by_id, system_kind),
            target_length=target_length, system_retrieves=system_kind in ("arag", "naive"),
            line_pages=paged_gold_documents(tasks[p.id], corpus),
        )
        for p in predictions
    ]
    records: list[dict[str, Any]] = [{"id": p.id, "system": p.system} for p in predictions]
    reasons: list[dict[str, str]] = [{} for _ in predictions]
    for scorer in scorers:
        for record, why, scores in zip(records, reasons, scorer.score(items), strict=True):
            record.update(scores.values)
            why.update(scores.null_reasons)
    for record, why, item in zip(records, reasons, items, strict=True):
        for key in PASSTHROUGH:
            record[key] = getattr(item.prediction, key)
        record["n_gold_chunks"] = (len(item.gold_chunk_ids)
                                   if item.gold_chunk_ids is not None else None)
        record["null_reasons"] = why
    return records
