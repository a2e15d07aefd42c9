"""Document features of a task: what its data says about the documents it reads.

Every task gets the same features, computed from the adapter's Tasks and Corpus, so the
report can slice a comparison by them (``report.slice_by``) and the MLflow UI can filter
traces by them:

* ``document_tokens``: length of the task's documents in tokens (≈4 characters a token);
* ``n_documents``, ``task_type``, ``dataset``;
* ``company``, ``period``, ``doc_type``: where the documents say them (one value, or the
  distinct values joined by `` + `` for a task over several documents); null otherwise;
* ``evidence_position``: where the gold evidence lies, 0 (the first line) to 1 (the last),
  the mean over the gold lines (ECTSum's key sentences, FinanceBench's evidence pages);
  null where the task has no gold evidence;
* ``fits_context``: whether the whole document fits the model's window by the rule
  stuffing uses to skip (given by the caller, who knows the model: the run's, or the
  re-scored run's; null for predictions made elsewhere with no model named for them).

An adapter adds its own (``Dataset.task_features``: task id -> name -> value), e.g. the
folder adapter's ``file_type``. A feature that cannot be known is null and its reason is in
``null_reasons`` — never a made-up value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from arag.records import Corpus, Document, Task

# what every task carries (adapters may add more); the order is the order on a record
FEATURES = ("document_tokens", "n_documents", "task_type", "dataset", "company", "period",
            "doc_type", "evidence_position", "fits_context")
NUMERIC = frozenset({"document_tokens", "n_documents", "evidence_position"})
# features adapters add (``Dataset.task_features``), declared so ``report.slice_by`` can
# name them before any dataset is read; an adapter of the user's own calls declare_feature
ADAPTER_FEATURES = ["file_type"]  # the folder adapter's


def declare_feature(name: str) -> None:
    """An adapter's own feature, made known to ``report.slice_by``'s check."""
    if name not in ADAPTER_FEATURES and name not in FEATURES:
        ADAPTER_FEATURES.append(name)


def known_features() -> list[str]:
    return [*FEATURES, *ADAPTER_FEATURES]


# a Document field left at its placeholder says nothing about the document
PLACEHOLDER_DOC_TYPE = "DOCUMENT"


@dataclass(frozen=True)
class Features:
    """One task's features, with the reason of each null one."""

    values: dict[str, Any]
    null_reasons: dict[str, str] = field(default_factory=dict)


def document_tokens(docs: list[Document]) -> int:
    """The documents' length in tokens, ≈4 characters a token (the report's long-standing
    ``document_tokens``)."""
    return sum(len(d.text) for d in docs) // 4


def task_features(task: Task, corpus: Corpus, dataset: str, fits_context: bool | None = None,
                  extra: Mapping[str, Any] | None = None,
                  no_window: str | None = None) -> Features:
    """The features of one task (``fits_context``: by stuffing's rule, None when unknown,
    ``no_window`` saying why)."""
    docs = [corpus.documents[d] for d in task.doc_ids if d in corpus.documents]
    values: dict[str, Any] = {"document_tokens": document_tokens(docs),
                              "n_documents": len(task.doc_ids), "task_type": task.task_type,
                              "dataset": dataset}
    why: dict[str, str] = {}
    for name in ("company", "period", "doc_type"):
        values[name] = _said(docs, name)
        if values[name] is None:
            why[name] = f"the dataset does not say the documents' {name.replace('_', ' ')}"
    values["evidence_position"] = evidence_position(task, corpus)
    if values["evidence_position"] is None:
        why["evidence_position"] = ("the task has no gold evidence (no key sentences or "
                                    "evidence pages) to locate in its documents")
    values["fits_context"] = fits_context
    if fits_context is None:
        why["fits_context"] = no_window or "the model's context window was not given"
    values.update(extra or {})
    return Features(values, why)


def _said(docs: list[Document], name: str) -> str | None:
    """A document field where the data says it: one value, or the distinct ones joined."""
    said = []
    for doc in docs:
        value = getattr(doc, name)
        placeholder = (name == "company" and value == doc.doc_id) or \
            (name == "doc_type" and value == PLACEHOLDER_DOC_TYPE)
        if value and not placeholder and value not in said:
            said.append(value)
    return " + ".join(said) if said else None


def evidence_position(task: Task, corpus: Corpus) -> float | None:
    """Mean position of the gold lines in their documents, 0 (first line) to 1 (last);
    None without gold."""
    positions = []
    for doc_id, lines in (task.gold_lines or {}).items():
        doc = corpus.documents.get(doc_id)
        if doc is None or not lines:
            continue
        last = max(len(doc.lines) - 1, 1)
        positions += [(line - 1) / last for line in lines]
    return sum(positions) / len(positions) if positions else None
