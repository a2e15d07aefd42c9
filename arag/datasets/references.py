"""References of one's own for any dataset (``dataset.references=FILE``): a JSON-lines file of
``{"id": <task id>, "reference": <text>}`` that fills or replaces the tasks' references, so a
built-in dataset without references (or with references a team does not use) is scored by
ROUGE, BERTScore and coverage against the team's own."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from arag.datasets.base import Dataset, DatasetError, read_jsonl


def with_references(dataset: Dataset, path: Path) -> Dataset:
    """``dataset`` with the references of ``path`` in place of its own, and a note naming
    the file and how many tasks it filled or replaced."""
    given = read_references(path, [t.id for t in dataset.tasks])
    filled = sum(1 for t in dataset.tasks if t.id in given and not t.reference.strip())
    replaced = sum(1 for t in dataset.tasks if t.id in given and t.reference.strip())
    tasks = [replace(t, reference=given[t.id]) if t.id in given else t for t in dataset.tasks]
    unused = len(set(given) - {t.id for t in dataset.tasks})
    note = (f"references from {path.name} (dataset.references): {filled + replaced} of "
            f"{len(tasks)} task(s) ({replaced} replaced, {filled} filled)"
            + (f"; {unused} reference(s) for tasks not in this run were not used" if unused
               else ""))
    return replace(dataset, tasks=tasks, notes=[*dataset.notes, note])


def read_references(path: Path, task_ids: list[str]) -> dict[str, str]:
    """Task id -> reference; a file none of whose ids is a task is refused, naming three
    task ids of the dataset."""
    if not path.is_file():
        raise DatasetError("file not found; set dataset.references to a JSON-lines file of "
                           '{"id": <task id>, "reference": <text>}', path)
    out: dict[str, str] = {}
    for n, obj in read_jsonl(path):
        task_id, text = obj.get("id"), obj.get("reference")
        if not isinstance(task_id, str) or not task_id:
            raise DatasetError("needs 'id', the task id the reference is for", path, n, "id")
        if not isinstance(text, str) or not text.strip():
            raise DatasetError("needs 'reference', a non-empty text", path, n, "reference")
        if task_id in out:
            raise DatasetError(f"duplicate id {task_id!r}; keep one reference per task", path,
                               n, "id")
        out[task_id] = text
    if not set(out) & set(task_ids):
        valid = ", ".join(repr(t) for t in task_ids[:3])
        raise DatasetError(f"no id of the file is a task of the dataset; task ids look like "
                           f"{valid}. Fix the ids, or pick the dataset the references are for",
                           path, None, "id")
    return out
