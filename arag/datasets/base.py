"""The dataset contract: every adapter returns a validated Corpus and Tasks.

Errors name the file, the line and the field, and say how to fix it.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from arag.datasets.digest import digests
from arag.records import Corpus, Document, Task, content_hash
from arag.registry import Registry, UnknownName


class DatasetError(ValueError):
    """Bad input data; the message says where and how to fix it."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None,
                 field_name: str | None = None):
        where = str(path) if path else ""
        if line is not None:
            where += f":{line}"
        if field_name:
            where += f" (field {field_name!r})"
        super().__init__(f"{where}: {message}" if where else message)
        self.path, self.line, self.field = path, line, field_name


def missing_root(root: Path, upstream: str) -> DatasetError:
    """A real dataset whose folder is not there: how to get it, in one command."""
    return DatasetError(
        f"dataset.root {root} does not exist. Fix: `make data` (links ../shared/datasets into "
        f"data/datasets/ where it is there), or clone {upstream} into {root}, or set "
        "dataset.root=<path of the clone> (docs/datasets.md)")


class PendingCalls(Protocol):
    """Model calls a dataset needs before it can be scored (e.g. silver references)."""

    model_cfg: Any

    def requests(self, dataset: Dataset) -> dict[str, dict[str, Any]]:
        """Task id -> the ``ChatModel.complete`` arguments of its call."""

    def apply(self, dataset: Dataset) -> None:
        """Make the calls and complete the dataset's tasks, reports and notes."""


@dataclass
class Dataset:
    name: str
    corpus: Corpus
    tasks: list[Task]
    # reports to log with the run, name -> JSON-serialisable data (logged as <name>.json) or
    # Markdown text for people (logged as <name>.md)
    reports: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # made by load_dataset, after the limit; a dry run only prices them
    pending: PendingCalls | None = None
    # made by load_dataset, after the limit (arag/datasets/digest.py): what the dataset
    # holds, and task id -> what that task reads (its fields and its documents)
    digest: str = ""
    task_digests: dict[str, str] = field(default_factory=dict)
    # document features the adapter adds to the common ones (arag/datasets/features.py):
    # task id -> feature name -> value (the folder adapter's file_type)
    task_features: dict[str, dict[str, Any]] = field(default_factory=dict)
    past_limit: list[str] = field(default_factory=list)  # ids of the tasks dataset.limit cut


AdapterFn = Callable[[Any, Path], Dataset]
# a new adapter is one module in arag/datasets/ (``@register_adapter("name")``) and one YAML
ADAPTERS: Registry[AdapterFn] = Registry("dataset adapter", "dataset.adapter", "arag.datasets",
                                      group="arag_eval.datasets")
register_adapter = ADAPTERS.register


def read_utf8(path: Path, missing: str) -> str:
    if not path.exists():
        raise DatasetError(missing, path)
    if path.is_dir():
        raise DatasetError("is a directory, not a file; point it at the file itself", path)
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"not valid UTF-8 ({exc.reason} at byte {exc.start}); re-save the "
                           "file as UTF-8", path) from None
    except OSError as exc:
        raise DatasetError(f"cannot be read ({exc.strerror or exc}); check its permissions "
                           "(it must be readable by the user running the harness)",
                           path) from None


def split_lines(text: str) -> list[str]:
    """Lines as the datasets number them: split on newlines only (``\\r\\n`` and ``\\r`` are
    already newlines once read as text). ``str.splitlines`` would also split on form feeds,
    U+2028, U+0085 and other separators inside a line and shift every later line number."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


class DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` hook: a key given twice raises DuplicateKey (JSON keeps the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object); blank lines are skipped."""
    text = read_utf8(path, "file not found; check dataset.root")
    for n, raw in enumerate(split_lines(text), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw, object_pairs_hook=no_duplicate_keys)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"malformed JSON ({exc.msg} at column {exc.colno}); each line "
                               "must be one JSON object", path, n) from None
        except DuplicateKey as exc:
            raise DatasetError(f"the key {exc.key!r} appears twice in this record (JSON would "
                               "silently keep the last); keep one", path, n, exc.key) from None
        if not isinstance(obj, dict):
            raise DatasetError("each line must be a JSON object", path, n)
        yield n, obj


def require(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], path: Path,
            line: int) -> Any:
    if key not in obj:
        raise DatasetError(f"missing required field {key!r}; add it to this record", path, line,
                           key)
    value = obj[key]
    empty = not value.strip() if isinstance(value, str) else not value
    if not isinstance(value, kind) or (isinstance(value, str | list | dict) and empty):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise DatasetError(f"must be a non-empty {names}, got {value!r:.60}", path, line, key)
    return value


def refuse_unknown_fields(obj: dict[str, Any], known: tuple[str, ...], path: Path,
                          line: int) -> None:
    """A misspelt field (``gold_line``) is an error naming the known ones, not ignored."""
    for key in obj:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise DatasetError(f"unknown field {key!r}; {hint}the known fields are "
                               f"{list(known)}", path, line, key)


def require_strings(obj: dict[str, Any], key: str, path: Path, line: int) -> list[str]:
    """A non-empty list of non-empty strings (e.g. ``doc_ids``)."""
    values = require(obj, key, list, path, line)
    bad = [v for v in values if not isinstance(v, str) or not v.strip()]
    if bad:
        raise DatasetError(f"must be a list of non-empty strings, e.g. [\"AAN_q3_2021\"]; got "
                           f"{bad[0]!r:.60} in it", path, line, key)
    return values


def line_numbers(obj: dict[str, Any], key: str, path: Path, line: int
                 ) -> dict[str, tuple[int, ...]] | None:
    """``{doc_id: [1-based line numbers]}`` or None when absent; ``true`` and ``1.5`` are
    not line numbers."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DatasetError("must map doc_id -> list of 1-based line numbers", path, line, key)
    for doc_id, numbers in value.items():
        bad = [n for n in numbers if isinstance(n, bool) or not isinstance(n, int)] \
            if isinstance(numbers, list) else [numbers]
        if bad:
            raise DatasetError(f"must map doc_id -> list of 1-based line numbers (whole "
                               f"numbers); {doc_id!r} has {bad[0]!r:.60}", path, line, key)
    return {k: tuple(v) for k, v in value.items()}


def inside_root(root: Path, relative: str, path: Path, line: int, key: str) -> Path:
    """``root / relative``, refused when it leads outside ``root`` (an absolute path,
    ``..``, a symlink out): a dataset reads only files under ``dataset.root``."""
    base = root.resolve()
    target = (base / relative).resolve()
    if not target.is_relative_to(base):
        raise DatasetError(f"{relative!r} leads outside dataset.root ({base}); a dataset "
                           "reads only files under its root. Fix: move the file under "
                           f"{base} and give its path relative to it", path, line, key)
    return target


def read_text_lines(path: Path) -> tuple[str, ...]:
    """A document file: one sentence per line (blank lines kept, so line numbers match the
    file); must not be empty."""
    text = read_utf8(path, "document file not found; check the path and dataset.root")
    lines = tuple(" ".join(line.split()) for line in split_lines(text))
    if not any(lines):
        raise DatasetError("document is empty; remove it from the dataset or restore its text",
                           path)
    return lines


def validate(dataset: Dataset, tasks_path: Path | None = None,
             task_lines: dict[str, int] | None = None) -> Dataset:
    """Cross-record checks every adapter gets: unique ids, documents exist, gold in range."""
    seen: dict[str, int] = {}
    lines = task_lines or {}
    for task in dataset.tasks:
        at = lines.get(task.id)
        if task.id in seen:
            raise DatasetError(f"duplicate task id {task.id!r} (first at line {seen[task.id]}); "
                               "task ids must be unique", tasks_path, at, "id")
        seen[task.id] = at or 0
        for doc_id in task.doc_ids:
            if doc_id not in dataset.corpus.documents:
                raise DatasetError(f"task {task.id!r} names document {doc_id!r}, which is not in "
                                   "the corpus; fix doc_ids or add the document", tasks_path, at,
                                   "doc_ids")
        for doc_id, gold in (task.gold_lines or {}).items():
            doc = dataset.corpus.documents.get(doc_id)
            if doc is None or doc_id not in task.doc_ids:
                raise DatasetError(f"gold_lines names document {doc_id!r}, which is not one of "
                                   f"the task's doc_ids {list(task.doc_ids)}", tasks_path, at,
                                   "gold_lines")
            bad = [g for g in gold if not 1 <= g <= len(doc.lines)]
            if bad:
                raise DatasetError(f"gold line(s) {bad} out of range: {doc_id} has "
                                   f"{len(doc.lines)} lines (1-based); fix gold_lines to "
                                   "number the document's lines from 1", tasks_path, at,
                                   "gold_lines")
    if not dataset.tasks:
        raise DatasetError(f"dataset {dataset.name!r} has no tasks", tasks_path)
    return dataset


# what this process has loaded, by config and by the state of every file under its root:
# a sweep's pre-flight and its in-process jobs read a dataset (a FinanceBench filing's
# sentences and sections, 495 ECTSum transcripts) once; a changed file is a new key
_LOADED: dict[str, Dataset] = {}
_KEEP = 2


def load_dataset(dataset_cfg: Any, project_root: Path, call_models: bool = True) -> Dataset:
    """The validated dataset; with ``call_models=False`` (a dry run) model calls the dataset
    still needs are left in ``Dataset.pending``. Each call returns its own Dataset (tasks,
    notes and reports are the caller's to change); the documents are shared."""
    try:
        adapter = ADAPTERS.get(dataset_cfg.adapter)
    except UnknownName as exc:
        raise DatasetError(str(exc)) from None
    key = _load_key(adapter, dataset_cfg, project_root)
    loaded = _LOADED.get(key) if key else None
    if loaded is None:
        loaded = _read(adapter, dataset_cfg, project_root)
        if key:
            while len(_LOADED) >= _KEEP:
                _LOADED.pop(next(iter(_LOADED)))
            _LOADED[key] = loaded
    dataset = replace(loaded, tasks=list(loaded.tasks), notes=list(loaded.notes),
                      reports=dict(loaded.reports), task_digests=dict(loaded.task_digests))
    if dataset.pending is not None and call_models:
        dataset.pending.apply(dataset)
        dataset.pending = None
    return dataset


def forget_loaded() -> None:
    """Read every dataset again on its next load, as a new process would (a test of what
    an adapter does across runs: its parse cache, its reports)."""
    _LOADED.clear()


def _load_key(adapter: AdapterFn, dataset_cfg: Any, project_root: Path) -> str | None:
    """The adapter, the config and every file under ``dataset.root`` (path, size,
    modification time); None when the root cannot be read (the adapter says why)."""
    root = resolve_root(str(dataset_cfg.root), project_root)
    try:
        files = [str(root)] if root.is_file() else sorted(  # strings: ECTSum has 4,856 files
            os.path.join(folder, name) for folder, _, names in os.walk(root, followlinks=True)
            for name in names)
        state = [(f, st.st_size, st.st_mtime_ns) for f in files for st in [os.stat(f)]]
    except OSError:
        return None
    if not files:
        return None
    return content_hash("loaded", id(adapter), repr(dataset_cfg), str(root), state)


def _read(adapter: AdapterFn, dataset_cfg: Any, project_root: Path) -> Dataset:
    """The adapter's dataset, limited, with its digests; model calls left pending."""
    dataset = adapter(dataset_cfg, project_root)
    if dataset_cfg.limit is not None:
        if dataset_cfg.limit <= 0:
            raise DatasetError(f"dataset.limit must be positive (got {dataset_cfg.limit})")
        dataset.past_limit = [t.id for t in dataset.tasks[dataset_cfg.limit:]]
        dataset.tasks = dataset.tasks[: dataset_cfg.limit]
        used = {d for t in dataset.tasks for d in t.doc_ids}
        dataset.corpus = Corpus({k: v for k, v in dataset.corpus.documents.items() if k in used})
    # before pending calls: what they add follows from the documents and the config
    dataset.digest, dataset.task_digests = digests(dataset.tasks, dataset.corpus)
    return dataset


def resolve_root(root: str, project_root: Path) -> Path:
    path = Path(root).expanduser()
    return path if path.is_absolute() else project_root / path


def make_document(meta: dict[str, Any], lines: tuple[str, ...], line_pages=None) -> Document:
    return Document(
        doc_id=meta["doc_id"], lines=lines, company=meta.get("company", ""),
        doc_type=meta.get("doc_type", "EARNINGS_CALL"), period=meta.get("period", ""),
        ticker=meta.get("ticker", ""), line_pages=line_pages,
    )
