"""The project's own synthetic sample: ``documents.jsonl`` + ``documents/*.txt`` + ``tasks.jsonl``.

This is also the generic "JSONL" adapter: point ``dataset.root`` at any folder in the same
layout (see data/sample/README.md) to evaluate your own documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arag.datasets.base import (
    Dataset,
    DatasetError,
    inside_root,
    line_numbers,
    make_document,
    read_jsonl,
    read_text_lines,
    refuse_unknown_fields,
    register_adapter,
    require,
    require_strings,
    resolve_root,
    validate,
)
from arag.records import Corpus, Task

TASK_FIELDS = ("id", "task_type", "doc_ids", "question", "reference", "gold_lines", "answerable")


@register_adapter("jsonl")
def load_jsonl_dataset(cfg: Any, project_root: Path) -> Dataset:
    root = resolve_root(cfg.root, project_root)
    if not root.is_dir():
        raise DatasetError(f"dataset.root {root} is not a directory; set dataset.root=<folder>")
    docs_path = root / "documents.jsonl"
    documents = {}
    for n, obj in read_jsonl(docs_path):
        doc_id = require(obj, "doc_id", str, docs_path, n)
        rel = require(obj, "path", str, docs_path, n)
        if doc_id in documents:
            raise DatasetError(f"duplicate doc_id {doc_id!r}", docs_path, n, "doc_id")
        file = inside_root(root, rel, docs_path, n, "path")
        if not file.exists():
            raise DatasetError(f"document file {file} does not exist; fix 'path' or add the "
                               "file", docs_path, n, "path")
        if not file.is_file():
            raise DatasetError(f"{file} is a directory, not a document file; 'path' names one "
                               "text file per document", docs_path, n, "path")
        documents[doc_id] = make_document(obj, read_text_lines(file))
    tasks_path = root / "tasks.jsonl"
    tasks: list[Task] = []
    lines: dict[str, int] = {}
    for n, obj in read_jsonl(tasks_path):
        refuse_unknown_fields(obj, TASK_FIELDS, tasks_path, n)
        task_id = require(obj, "id", str, tasks_path, n)
        doc_ids = require_strings(obj, "doc_ids", tasks_path, n)
        gold = line_numbers(obj, "gold_lines", tasks_path, n)
        if task_id in lines:
            raise DatasetError(f"duplicate task id {task_id!r} (first at line {lines[task_id]}); "
                               "task ids must be unique", tasks_path, n, "id")
        lines[task_id] = n
        task_type = obj.get("task_type", "summarization")
        if task_type not in ("summarization", "qa"):
            raise DatasetError(f"task_type must be 'summarization' or 'qa', got {task_type!r}",
                               tasks_path, n, "task_type")
        answerable = obj.get("answerable", True)
        if not isinstance(answerable, bool):
            raise DatasetError(f"must be true or false, got {answerable!r}", tasks_path, n,
                               "answerable")
        tasks.append(Task(
            answerable=answerable,
            id=task_id,
            task_type=task_type,
            doc_ids=tuple(doc_ids),
            question=require(obj, "question", str, tasks_path, n),
            reference=require(obj, "reference", str, tasks_path, n),
            gold_lines=gold,
            source=cfg.name,
        ))
    dataset = Dataset(cfg.name, Corpus(documents), tasks)
    return validate(dataset, tasks_path, lines)
