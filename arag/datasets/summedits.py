"""SummEdits (Laban et al. 2023, github.com/salesforce/factualNLG): summaries labelled by
people as consistent (1) or inconsistent (0) with their document, for judging the judge.

The upstream layout is read as is: ``<dataset.root>/data/summedits/summedits_<domain>.json``,
a JSON list of ``{id, doc, summary, label, original_summary, edit_types, split}``.
``dataset.options.domain`` picks the file (``ectsum``: earnings-call excerpts from ECTSum)
and ``dataset.split`` the items (``evaluation`` | ``test``).

Each item is a task whose document is ``doc`` and whose answer is given: ``summary`` is the
prediction to check (``system=given`` reads it from ``Task.meta["given_answer"]``; no model
writes it). The human verdict is ``Task.meta["human_label"]`` (1 consistent, 0 inconsistent)
and the edits that broke an inconsistent summary ``Task.meta["edit_types"]``. Items sharing a
document share one corpus document (its id: a hash of the text). There is no reference
summary: reference-based metrics are null with that reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from arag.datasets.base import (
    Dataset,
    DatasetError,
    make_document,
    missing_root,
    read_utf8,
    register_adapter,
    resolve_root,
    validate,
)
from arag.records import Corpus, Document, Task, content_hash

UPSTREAM = "https://github.com/salesforce/factualNLG"
SPLITS = ("evaluation", "test")
FIELDS = ("id", "doc", "summary", "label", "edit_types", "split")
QUESTION = "Is this summary consistent with its document?"
NO_REFERENCE = ("SummEdits gives no reference summary: each summary is checked against its "
                "document, so reference-based metrics do not apply")


@register_adapter("summedits")
def load_summedits(cfg: Any, project_root: Path) -> Dataset:
    root = resolve_root(cfg.root, project_root)
    if not root.is_dir():
        raise missing_root(root, UPSTREAM)
    domain = str((cfg.options or {}).get("domain", "ectsum"))
    split = cfg.split or "evaluation"
    if split not in SPLITS:
        raise DatasetError(f"dataset.split={split!r} is not a SummEdits split. Fix: "
                           f"dataset.split=evaluation or dataset.split=test")
    path = root / "data" / "summedits" / f"summedits_{domain}.json"
    items = _read_items(path, domain)
    chosen = [(n, item) for n, item in enumerate(items) if item["split"] == split]
    if not chosen:
        found = sorted({str(item["split"]) for item in items})
        raise DatasetError(f"no {split!r} items for domain {domain!r} (the file holds "
                           f"{found}). Fix: dataset.split={found[0]} here, or point "
                           f"dataset.root at a full clone of {UPSTREAM}, whose file holds "
                           "both splits", path)
    documents: dict[str, Document] = {}
    tasks = [_task(item, domain, cfg.name, documents) for _, item in chosen]
    return validate(Dataset(cfg.name, Corpus(documents), tasks), path)


def _read_items(path: Path, domain: str) -> list[dict[str, Any]]:
    text = read_utf8(path, f"no SummEdits file for domain {domain!r}; check dataset.root (a "
                     f"clone of {UPSTREAM}) and dataset.options.domain (ectsum, sales_call, "
                     "news, ...)")
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"malformed JSON ({exc.msg} at line {exc.lineno}); the file must "
                           "be the upstream JSON list", path) from None
    if not isinstance(items, list):
        raise DatasetError("must be a JSON list of items, as upstream ships it", path)
    for n, item in enumerate(items):
        _check(item, n, path)
    return items


def _check(item: Any, n: int, path: Path) -> None:
    where = f"item {n}"
    if not isinstance(item, dict):
        raise DatasetError(f"{where} is not a JSON object", path)
    for key in FIELDS:
        if key not in item:
            raise DatasetError(f"{where} lacks {key!r}; every item needs {list(FIELDS)}",
                               path, field_name=key)
    for key in ("id", "doc", "summary", "split"):
        if not isinstance(item[key], str) or not item[key].strip():
            raise DatasetError(f"{where}: must be a non-empty string", path, field_name=key)
    if item["label"] not in (0, 1) or isinstance(item["label"], bool):
        raise DatasetError(f"{where}: label must be 1 (consistent) or 0 (inconsistent), got "
                           f"{item['label']!r}", path, field_name="label")
    if not isinstance(item["edit_types"], list):
        raise DatasetError(f"{where}: edit_types must be a list", path, field_name="edit_types")


def _task(item: dict[str, Any], domain: str, source: str,
          documents: dict[str, Document]) -> Task:
    lines = tuple(" ".join(line.split()) for line in item["doc"].split("\n"))
    doc_id = f"doc_{content_hash(lines)[:12]}"
    if doc_id not in documents:
        documents[doc_id] = make_document({"doc_id": doc_id, "doc_type": "EXCERPT"}, lines)
    return Task(
        id=item["id"], task_type="summarization", doc_ids=(doc_id,), question=QUESTION,
        reference="", source=source,
        meta={"given_answer": item["summary"], "human_label": int(item["label"]),
              "edit_types": [str(e) for e in item["edit_types"]], "split": item["split"],
              "reference_missing": NO_REFERENCE, "domain": domain},
    )
