"""Score predictions: scorers -> one EvalRecord per task (``predictions.eval.jsonl``).

What a system is comes from its class's declarations (``retrieves``, ``ranking``,
``agentic``, ``judged_context``), never from its name.

Each record also carries what its retrieval scores were computed from, so they can be
recomputed from the run's own artifacts: the task's gold (``gold_lines``: doc id -> 1-based
line numbers; ``gold_chunk_ids``: the chunks holding one, sorted) and the chunks the
system read (``retrieved_chunk_ids``), plus the task's document features (``document_tokens``,
``company``, ``evidence_position``, ``fits_context``, ...: ``arag.datasets.features``) for
the report's slices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from arag.citations import strip_citations
from arag.datasets import Dataset
from arag.datasets.features import Features, document_tokens, task_features
from arag.datasets.sections import document_sections
from arag.records import Chunk, Corpus, Prediction, Task
from arag.systems import Sources, System
from arag.systems.builtin import Stuffing
from metrics import Scorer, ScoringItem

PASSTHROUGH = ("repeat", "loops", "max_loops_reached", "context_budget_reached", "cost_usd",
               "cost_usd_uncached", "latency_ms", "input_tokens", "output_tokens", "cache_read_input_tokens",
               "cache_creation_input_tokens", "skipped", "skip_reason", "error", "stop_reason",
               "routed_to", "route_reason")


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


def paged_gold_documents(task: Task, corpus: Corpus) -> dict[str, tuple[int, ...]]:
    """The page of every line of the task's gold documents that have pages."""
    docs = (corpus.documents.get(d) for d in (task.gold_lines or {}))
    return {d.doc_id: d.line_pages for d in docs if d is not None and d.line_pages is not None}


def scoring_items(predictions: list[Prediction], tasks: dict[str, Task], corpus: Corpus,
                  chunks: list[Chunk], target_length: int, system: type[System],
                  citations: bool = True) -> list[ScoringItem]:
    """What scorers see of each prediction. Citation markers are stripped here, once: every
    scorer reads the answer as a reader would; the citation scorer also gets it as written
    (``citations``: the run's ``system.citations``)."""
    chunks_by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        chunks_by_doc.setdefault(c.doc_id, []).append(c)
    sources = Sources(corpus, {c.chunk_id: c for c in chunks})
    sections = {d: document_sections(doc) for d, doc in corpus.documents.items()
                if d in {d for p in predictions for d in tasks[p.id].doc_ids}}
    return [
        ScoringItem(
            prediction=replace(p, predicted=strip_citations(p.predicted)), task=tasks[p.id],
            gold_chunk_ids=gold_chunk_ids(tasks[p.id], chunks_by_doc),
            context_text=system.judged_context(p, tasks[p.id], sources),
            target_length=target_length, retrieves=system.retrieves_task(p),
            line_pages=paged_gold_documents(tasks[p.id], corpus),
            ranking=system.ranking(p) if system.ranks else None,
            context_chunks=system.context_chunks(p, tasks[p.id], sources), agentic=system.agentic,
            cited_answer=p.predicted, cites=system.cites and citations, chunks=sources.chunks,
            sections={d: sections[d] for d in tasks[p.id].doc_ids if d in sections},
        )
        for p in predictions
    ]


def dataset_features(dataset: Dataset, fits: Callable[[Task], bool] | None = None,
                     no_window: str | None = None) -> dict[str, Features]:
    """Task id -> its document features; ``fits``: stuffing's skip rule for the run's model
    (``window_rule``), None where the run's window is not known (``no_window`` says why)."""
    return {t.id: task_features(t, dataset.corpus, dataset.name, fits(t) if fits else None,
                                dataset.task_features.get(t.id), no_window)
            for t in dataset.tasks}


# why fits_context is null for predictions made elsewhere with no model named for them
PIPELINE_WINDOW_UNKNOWN = (
    "the predictions were made outside the harness (system=external) and no model is named "
    "for them, so their model's window is not known; name it: model=<its config, e.g. "
    "claude-haiku-4-5>, or model=openai-compatible model.context_limit=<tokens>")


def window_rule(cfg: Any, system: type[System], corpus: Corpus,
                count: Callable[[str], int] | None = None
                ) -> tuple[Callable[[Task], bool] | None, str | None]:
    """Whether a task's whole documents fit the run's model window, by the rule stuffing
    skips by (``Stuffing.fits``: its request within ``model.context_limit`` less
    ``system.max_tokens``), for a run or a re-scoring alike (``count``: the model's token
    count, where one is built); or None and why, for predictions made elsewhere when the
    config names no model for them (the offline stand-in is not their model)."""
    if not system.calls_models and str(cfg.model.provider) == "offline":
        return None, PIPELINE_WINDOW_UNKNOWN
    available = int(cfg.model.context_limit) - int(cfg.system.max_tokens)
    style, length = str(getattr(cfg.summarization_style, "value", cfg.summarization_style)), \
        int(cfg.target_length)

    def fits(task: Task) -> bool:
        return Stuffing.request_tokens(task, corpus, style, length,
                                       *([count] if count else [])) <= available

    return fits, None


def evaluate(predictions: list[Prediction], tasks: dict[str, Task], corpus: Corpus,
             chunks: list[Chunk], scorers: list[Scorer], target_length: int,
             system: type[System], citations: bool = True,
             features: dict[str, Features] | None = None) -> list[dict[str, Any]]:
    """One eval record per prediction, from its ``scoring_items``, with its task's document
    features (``dataset_features``; without them, ``document_tokens`` alone)."""
    items = scoring_items(predictions, tasks, corpus, chunks, target_length, system, citations)
    records: list[dict[str, Any]] = [{"id": p.id, "system": p.system} for p in predictions]
    reasons: list[dict[str, str]] = [{} for _ in predictions]
    for scorer in scorers:
        for record, why, scores, item in zip(records, reasons, scorer.score(items), items,
                                             strict=True):
            record.update(scores.values)
            why.update(scores.null_reasons)
            item.earlier.update(scores.values)
    for record, why, item in zip(records, reasons, items, strict=True):
        for key in PASSTHROUGH:
            not_given = key in item.prediction.not_recorded  # e.g. max_loops_reached: not False
            record[key] = None if not_given else getattr(item.prediction, key)
            if record[key] is None and not_given:
                why[key] = f"the prediction's record does not carry {key}"
        record.update(provenance(item, corpus))
        found = (features or {}).get(item.task.id)
        if found is not None:
            record.update(found.values)
            why.update(found.null_reasons)
        record["null_reasons"] = why
    return records


def provenance(item: ScoringItem, corpus: Corpus) -> dict[str, Any]:
    """What a record's retrieval scores rest on, and how long its documents are."""
    gold, task = item.gold_chunk_ids, item.task
    docs = [corpus.documents[d] for d in task.doc_ids if d in corpus.documents]
    return {
        "gold_lines": ({d: list(lines) for d, lines in task.gold_lines.items()}
                       if task.gold_lines is not None else None),
        "gold_chunk_ids": sorted(gold) if gold is not None else None,
        "n_gold_chunks": len(gold) if gold is not None else None,
        "retrieved_chunk_ids": list(item.prediction.retrieved_chunk_ids),
        "doc_ids": list(task.doc_ids),  # tasks sharing a document are resampled together
        "document_tokens": document_tokens(docs),
    }
