"""A file of predictions made outside the harness: read, checked, and located in the dataset.

One JSON object a line, keyed by task id (the schema is in docs/your-pipeline.md):

    {"id": "KBTX_q3_2024", "predicted": "Revenue rose 14.2% ...",
     "contexts": [{"text": "...", "doc_id": "KBTX_q3_2024", "line_start": 12, "line_end": 13},
                  {"text": "...", "doc_id": "KBTX_q3_2024", "page": 3}, "a bare text"],
     "retrieved_chunk_ids": ["KBTX_q3_2024#L10-17"],
     "cost_usd": 0.0021, "latency_ms": 840, "input_tokens": 3100, "output_tokens": 120,
     "loops": 1, "trace": [...], "error": null}

Every problem of the file is found before any run opens and named with the file, the line
and the field. A context text is located in the dataset by its ``line_start``/``line_end``,
its ``page``, or else by its sentences (each sentence of the document it contains, or the
one sentence that contains it); the lines found become the chunks of this harness's index
that hold them, so gold-based retrieval scores apply. A context that cannot be located is
kept for faithfulness, counted, and left out of retrieval, never guessed.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arag import progress
from arag.datasets.base import DatasetError, read_jsonl
from arag.records import MEASURED, Chunk, Corpus, Document, Prediction, Task, content_hash
from arag.trace import step_from_dict

# a document line shorter than this (normalised) is not matched inside a context: short
# lines ("Thank you.") occur everywhere and would place a context by accident
MIN_MATCH_CHARS = 20
INTEGERS = ("loops", "model_calls", "input_tokens", "output_tokens", "cache_read_input_tokens",
            "cache_creation_input_tokens")


# a context's chunk id when its doc_id is outside the dataset: ``<doc_id>#outside-<k>``
OUTSIDE_MARK = "#outside-"


class PredictionsFileError(DatasetError):
    """The predictions file is wrong; the message names the file, line and field."""


@dataclass
class PredictionsFile:
    """The checked records of one file, as predictions, and what they leave out."""

    path: Path
    predictions: dict[str, Prediction]  # task id -> prediction (file order)
    missing: list[str] = field(default_factory=list)  # dataset tasks with no record
    extra: int = 0  # records whose ids are not tasks, left out (system.ignore_extra)
    past_limit: int = 0  # records of tasks past dataset.limit, left out
    # task id -> a trace in a format of the pipeline's own, kept as given (its located tool
    # calls are the prediction's ``foreign_path``, scored by metrics.trajectory)
    foreign_traces: dict[str, Any] = field(default_factory=dict)
    # task id -> the model calls the record says it made (only records that say)
    model_calls: dict[str, int] = field(default_factory=dict)
    # task ids whose contexts are the chunk texts their foreign trace's chunk_read calls returned
    reads_from_traces: list[str] = field(default_factory=list)


def read_predictions(path: Path, tasks: list[Task], corpus: Corpus, chunks: list[Chunk],
                     allow_missing: bool, id_map: dict[str, str] | None = None,
                     ignore_extra: bool = False, past_limit: Collection[str] = ()
                     ) -> PredictionsFile:
    """Every record of ``path`` checked and turned into a Prediction for its task; ``id_map``
    turns the pipeline's own ids into task ids (an id it lacks is taken as a task id);
    records of tasks ``dataset.limit`` cut (``past_limit``) are left out, and counted."""
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.jsonl"))[:5]
        raise PredictionsFileError(
            "is a folder, not a file; set system.predictions to the JSONL file of your "
            "pipeline's predictions" + (f" (in it: {', '.join(inside)})" if inside else ""),
            path)
    if not path.is_file():
        raise PredictionsFileError("file not found; set system.predictions to the JSONL file "
                                   "of your pipeline's predictions", path)
    by_id = {t.id: t for t in tasks}
    located = Locator(corpus, chunks)
    seen: dict[str, int] = {}
    file = PredictionsFile(path, {})
    unknown: list[tuple[int, str]] = []
    for n, obj in _with_progress(_records(path), path):
        raw_id = _task_id(obj, path, n)
        task_id = (id_map or {}).get(raw_id, raw_id)
        if task_id in seen:
            raise PredictionsFileError(f"duplicate id {task_id!r} (first on line {seen[task_id]});"
                                       " keep one record per task", path, n, "id")
        seen[task_id] = n
        if task_id in past_limit:
            file.past_limit += 1
            continue
        if task_id not in by_id:
            unknown.append((n, raw_id))
            continue
        file.predictions[task_id] = _read_record(obj, by_id[task_id], located, file, n)
    if unknown and not ignore_extra:
        raise _unknown_ids(unknown, tasks, path)
    file.extra = len(unknown)
    out = file.predictions
    missing = [t.id for t in tasks if t.id not in out]
    if missing and not allow_missing:
        listed = ", ".join(missing[:20]) + (f" and {len(missing) - 20} more"
                                            if len(missing) > 20 else "")
        raise PredictionsFileError(
            f"{len(missing)} task(s) of the dataset have no record: {listed}. Add them, or set "
            "system.allow_missing=true to score the others only", path, None, "id")
    file.missing = missing
    return file


# a file this big takes a while to check (every context is located in the documents): a
# bar shows how far it is
PROGRESS_FROM_BYTES = 1_000_000


def _with_progress(records: Iterator[tuple[int, dict[str, Any]]], path: Path
                   ) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records, with a bar of lines read for a big file."""
    size = path.stat().st_size
    if size < PROGRESS_FROM_BYTES:
        yield from records
        return
    with path.open("rb") as handle:
        lines = sum(1 for _ in handle)
    with progress.bar(f"checking {path.name} ({size / 1e6:.0f} MB)", lines, "line") as shown:
        last = 0
        for n, obj in records:
            shown.update(n - last)
            last = n
            yield n, obj


def _unknown_ids(unknown: list[tuple[int, str]], tasks: list[Task], path: Path
                 ) -> PredictionsFileError:
    """Ids that are not tasks: which, what a task id looks like, and the two ways out."""
    listed = ", ".join(f"{i!r} (line {n})" for n, i in unknown[:20])
    more = f" and {len(unknown) - 20} more" if len(unknown) > 20 else ""
    valid = ", ".join(repr(t.id) for t in tasks[:3])
    return PredictionsFileError(
        f"{len(unknown)} id(s) are not tasks of the dataset: {listed}{more}. Task ids of the "
        f"dataset look like {valid}. Fix the ids, map yours to them with system.id_map=FILE "
        "(JSON object or two-column CSV), leave them out with system.ignore_extra=true, or "
        "pick the dataset (and task_type) the predictions were made for", path, None, "id")


def read_id_map(path: Path) -> dict[str, str]:
    """A pipeline's ids -> task ids: a JSON object, or a CSV of two columns (a first row
    whose second cell is ``task_id`` is a header)."""
    if not path.is_file():
        raise PredictionsFileError("file not found; set system.id_map to a JSON object or a "
                                   "two-column CSV mapping your ids to task ids", path)
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".json":
        return _json_id_map(text, path)
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    if rows and rows[0][1:2] == ["task_id"]:
        rows = rows[1:]
    mapping: dict[str, str] = {}
    for n, row in enumerate(rows, start=1):
        if len(row) != 2 or not all(cell.strip() for cell in row):
            raise PredictionsFileError(f"expected two non-empty cells (your id, task id), got "
                                       f"{row!r:.80}", path, n, "system.id_map")
        mapping[row[0].strip()] = row[1].strip()
    return mapping


def _json_id_map(text: str, path: Path) -> dict[str, str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PredictionsFileError(f"malformed JSON ({exc.msg} at line {exc.lineno}); give a "
                                   "JSON object {\"your id\": \"task id\"}", path) from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                             for k, v in data.items()):
        raise PredictionsFileError("must be a JSON object of strings {\"your id\": \"task "
                                   "id\"}", path)
    return data


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each record; malformed JSON names its line."""
    try:
        yield from read_jsonl(path)
    except PredictionsFileError:
        raise
    except DatasetError as exc:
        raise PredictionsFileError(str(exc)) from None


def _task_id(obj: dict[str, Any], path: Path, n: int) -> str:
    if "id" not in obj:
        raise PredictionsFileError("missing required field 'id' (the task id the prediction "
                                   f"answers){_rename(obj, 'id')}", path, n, "id")
    if not isinstance(obj["id"], str) or not obj["id"]:
        raise PredictionsFileError(f"must be a non-empty string, got {obj['id']!r:.60}",
                                   path, n, "id")
    return obj["id"]


# what other pipelines call the required fields: a record using one is told the rename
OTHER_NAMES = {"id": ("task_id", "question_id", "example_id", "uid"),
               "predicted": ("summary", "answer", "prediction", "output", "response")}


def _rename(obj: dict[str, Any], required: str) -> str:
    """``; it has 'task_id': rename it to 'id'`` when the record holds the field under a
    name another pipeline uses; "" otherwise."""
    found = next((k for k in OTHER_NAMES[required] if k in obj), None)
    return f"; it has {found!r}: rename it to {required!r}" if found else ""


# the kind of a task error the pipeline itself recorded (``"error"`` in its record)
PIPELINE_ERROR = "pipeline"


# the skip reason of a record whose answer is empty and that gives no error
EMPTY_ANSWER = "the pipeline gave an empty answer and no error"


def _read_record(obj: dict[str, Any], task: Task, locator: Locator, file: PredictionsFile,
                 n: int) -> Prediction:
    """``to_prediction``, keeping what the file says beyond a Prediction: a trace in a
    format of its own, and the model calls made."""
    path = None
    if _foreign_trace(obj):
        file.foreign_traces[task.id] = obj["trace"]
        reads = trace_reads(obj["trace"])
        budget = _measure(obj, "max_loops", file.path, n)
        path = {"steps": trace_path(obj["trace"], locator, task),
                "max_loops": None if budget is None else int(budget)}
        obj = {k: v for k, v in obj.items() if k != "trace"}
        if reads and not obj.get("contexts") and obj.get("retrieved_chunk_ids") is None:
            obj["contexts"] = reads  # what it read is what it says it read: located below
            file.reads_from_traces.append(task.id)
    calls = _measure(obj, "model_calls", file.path, n)
    if calls is not None:
        file.model_calls[task.id] = int(calls)
    pred = to_prediction(obj, task, locator, file.path, n)
    pred.foreign_path = path
    return pred


READ_TOOLS = ("chunk_read", "read_chunk", "read_chunks")
TOOL_KEYS = ("tool", "tool_name", "name", "action", "function")
RESULT_KEYS = ("output", "result", "observation", "content", "chunks", "text")


# the text of one hit or read a tool returned: the chunk's text, or what a search shows of it
ITEM_TEXT_KEYS = ("text", "preview", "snippet")


def trace_reads(trace: Any) -> list[str]:
    """The chunk texts a foreign trace's read calls returned (an ARagPoc-style trace: steps
    naming ``chunk_read`` with the text it gave back, as a list or as ``{"results": [...]}``),
    in read order; [] when it has none."""
    steps = trace if isinstance(trace, list) else []
    return [t for step in steps if isinstance(step, dict) and _tool(step).lower() in READ_TOOLS
            for t in _item_texts(_output(step))]


def _tool(step: dict[str, Any]) -> str:
    return next((step[k] for k in TOOL_KEYS if isinstance(step.get(k), str)), "")


def _output(step: dict[str, Any]) -> Any:
    return next((step[k] for k in RESULT_KEYS if step.get(k)), None)


def _item_texts(result: Any) -> list[str]:
    """The texts of a tool's output items: a list, ``{"results": [...]}`` (the public A-RAG
    project's shape), or one item; an item is a string or ``{"text" | "preview" | "snippet"}``."""
    if isinstance(result, dict) and isinstance(result.get("results"), list):
        items = result["results"]
    else:
        items = result if isinstance(result, list) else [result]
    texts = [next((item[k] for k in ITEM_TEXT_KEYS if isinstance(item.get(k), str)), None)
             if isinstance(item, dict) else item for item in items]
    return [t for t in texts if isinstance(t, str) and t.strip()]


def _foreign_trace(obj: dict[str, Any]) -> bool:
    """A ``trace`` that is not a list of this harness's steps (another project's format)."""
    trace = obj.get("trace")
    if trace is None:
        return False
    try:
        [step_from_dict(s) for s in trace]  # noqa: B018 - parsed only to test the format
    except (ValueError, TypeError, AttributeError, KeyError):
        return True
    return not isinstance(trace, list)


def to_prediction(obj: dict[str, Any], task: Task, locator: Locator, path: Path, n: int
                  ) -> Prediction:
    """One record as the Prediction the harness scores; what it lacks is ``not_recorded``."""
    error = _optional_text(obj, "error", path, n)
    skipped = _flag(obj, "skipped", path, n)
    if "predicted" not in obj:
        raise PredictionsFileError("missing required field 'predicted' (the answer; null "
                                   f"only with an 'error' or 'skipped'){_rename(obj, 'predicted')}",
                                   path, n, "predicted")
    predicted = obj["predicted"]
    if not isinstance(predicted, str) and not (predicted is None and (error or skipped)):
        raise PredictionsFileError(f"must be a string (null only with an 'error' or "
                                   f"'skipped'), got {predicted!r:.60}", path, n, "predicted")
    pred = Prediction(id=task.id, source="", system="", model="external",
                      task_type=task.task_type, question=task.question,
                      doc_ids=list(task.doc_ids), ground_truth=task.reference,
                      predicted=predicted, error=error,
                      error_kind=PIPELINE_ERROR if error else None,
                      word_count=len((predicted or "").split()))
    _mark_unanswered(pred, obj, skipped, path, n)
    for key in MEASURED:
        setattr(pred, key, _measure(obj, key, path, n))
    pred.not_recorded = [k for k in MEASURED if getattr(pred, k) is None]
    if obj.get("max_loops_reached") is None:  # unknown, not False
        pred.not_recorded.append("max_loops_reached")
    else:
        pred.max_loops_reached = _flag(obj, "max_loops_reached", path, n)
    pred.trace = _trace(obj, path, n)
    ids = _chunk_ids(obj, locator, path, n)
    pred.contexts = [locator.locate(c, task, path, n, k)
                     for k, c in enumerate(_list(obj, "contexts", path, n))]
    if ids is None and pred.contexts:  # contexts stand for the retrieval: their chunks
        ids = list(dict.fromkeys(c for ctx in pred.contexts for c in ctx["chunk_ids"]))
        ids = ids or None  # none located: the retrieval is unknown, not empty
    if ids is None:
        pred.not_recorded = ["retrieved_chunk_ids", "context_chunk_ids", *pred.not_recorded]
    else:
        pred.retrieved_chunk_ids = pred.context_chunk_ids = ids
    return pred


def _mark_unanswered(pred: Prediction, obj: dict[str, Any], skipped: bool, path: Path,
                     n: int) -> None:
    """A task the pipeline skipped (``skipped``, ``skip_reason``), or answered with nothing
    and no error: not answered, as a built-in system's skip is."""
    if skipped:
        pred.skipped = True
        pred.skip_reason = _optional_text(obj, "skip_reason", path, n) or "skipped by the pipeline"
        pred.predicted = None
    elif not pred.error and not (pred.predicted or "").strip():
        pred.skipped, pred.skip_reason, pred.predicted = True, EMPTY_ANSWER, None


def _flag(obj: dict[str, Any], key: str, path: Path, n: int) -> bool:
    value = obj.get(key)
    if value is not None and not isinstance(value, bool):
        raise PredictionsFileError(f"must be true, false or null, got {value!r:.60}", path, n,
                                   key)
    return bool(value)


def _optional_text(obj: dict[str, Any], key: str, path: Path, n: int) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise PredictionsFileError(f"must be a string or null, got {value!r:.60}", path, n, key)
    return value or None


def _measure(obj: dict[str, Any], key: str, path: Path, n: int) -> float | int | None:
    """A measurement of the record: a finite, non-negative number, or None if absent."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
            value) or value < 0:
        raise PredictionsFileError(f"must be a non-negative number (or left out: it is then "
                                   f"null with the reason), got {value!r:.60}", path, n, key)
    if key in INTEGERS:
        if value != int(value):
            raise PredictionsFileError(f"must be a whole number, got {value!r}", path, n, key)
        return int(value)
    return float(value)


def _list(obj: dict[str, Any], key: str, path: Path, n: int) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise PredictionsFileError(f"must be a list, got {value!r:.60}", path, n, key)
    return value


def _trace(obj: dict[str, Any], path: Path, n: int) -> list[Any]:
    steps = _list(obj, "trace", path, n)
    try:
        return [step_from_dict(s) for s in steps]
    except (ValueError, TypeError, AttributeError) as exc:
        raise PredictionsFileError(f"not a trace of this harness's steps ({exc}); leave it out "
                                   "or see docs/your-pipeline.md", path, n, "trace") from None


def _chunk_ids(obj: dict[str, Any], locator: Locator, path: Path, n: int) -> list[str] | None:
    if "retrieved_chunk_ids" not in obj or obj["retrieved_chunk_ids"] is None:
        return None
    ids = _list(obj, "retrieved_chunk_ids", path, n)
    bad = [c for c in ids if not isinstance(c, str) or c not in locator.chunks]
    if bad:
        raise PredictionsFileError(
            f"{len(bad)} id(s) are not chunks of this harness's index: {bad[:5]!r:.200}. Give "
            "chunk ids as the index names them (the same retrieval.chunk_size and "
            "chunk_overlap), or give the texts as 'contexts'", path, n, "retrieved_chunk_ids")
    return list(dict.fromkeys(ids))


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


class Locator:
    """Finds the lines, and so the chunks, of the dataset a context text came from."""

    def __init__(self, corpus: Corpus, chunks: list[Chunk]):
        self.corpus = corpus
        self.chunks = {c.chunk_id: c for c in chunks}
        self.by_doc: dict[str, list[Chunk]] = {}
        for c in chunks:
            self.by_doc.setdefault(c.doc_id, []).append(c)
        self._text_index: TextIndex | None = None

    def place(self, text: str, task: Task) -> dict[str, Any]:
        """``{"doc_id", "lines", "text_hash"}`` of a foreign hit or read, found in any document
        of the dataset by its text (``TextIndex``); ``doc_id`` None: not found."""
        if self._text_index is None:
            self._text_index = TextIndex(self.corpus)
        found = self._text_index.find(text, task.doc_ids)
        doc_id, lines = found if found else (None, [])
        return {"doc_id": doc_id, "lines": lines, "text_hash": content_hash(_norm(text))}

    def locate(self, raw: Any, task: Task, path: Path, n: int, k: int) -> dict[str, Any]:
        """``{"text", "doc_id", "lines", "chunk_ids", "unmapped"}`` of one context; ``unmapped``
        says why a context could not be placed (its lines and chunks are then empty)."""
        where = f"contexts[{k}]"
        ctx = {"text": raw} if isinstance(raw, str) else raw
        if not isinstance(ctx, dict) or not isinstance(ctx.get("text"), str):
            raise PredictionsFileError("each context must be a string or an object with a "
                                       "'text' string", path, n, where)
        doc_id = ctx.get("doc_id")
        if doc_id is not None and not isinstance(doc_id, str):
            raise PredictionsFileError(f"doc_id must be a string, got {doc_id!r:.60}", path, n,
                                       f"{where}.doc_id")
        out: dict[str, Any] = {"text": ctx["text"], "doc_id": doc_id, "lines": [],
                               "chunk_ids": [], "unmapped": None}
        if doc_id is not None and doc_id not in self.corpus.documents:
            # read from a document the dataset does not hold (a wrong filing): an irrelevant
            # read, so retrieval precision counts it (its id names no chunk of the index)
            out.update(outside_dataset=True, chunk_ids=[f"{doc_id}{OUTSIDE_MARK}{k}"])
            return out
        found = self._lines(ctx, doc_id, task, path, n, where)
        if isinstance(found, str):
            out["unmapped"] = found
            return out
        doc, lines = found
        out.update(doc_id=doc.doc_id, lines=lines,
                   chunk_ids=[c.chunk_id for c in self.by_doc.get(doc.doc_id, [])
                              if any(c.covers(line) for line in lines)])
        return out

    def _lines(self, ctx: dict[str, Any], doc_id: str | None, task: Task, path: Path, n: int,
               where: str) -> tuple[Document, list[int]] | str:
        """(document, 1-based lines) of a context, or why it cannot be placed."""
        if "line_start" in ctx or "page" in ctx:
            if doc_id is None and len(task.doc_ids) != 1:
                return "line_start/page given without a doc_id, and the task has several documents"
            doc = self.corpus.documents[doc_id or task.doc_ids[0]]
            if "line_start" in ctx:
                return self._span(doc, ctx, path, n, where)
            return self._page(doc, ctx, path, n, where)
        return self._by_text(ctx["text"], [doc_id] if doc_id else list(task.doc_ids))

    def _span(self, doc: Document, ctx: dict[str, Any], path: Path, n: int, where: str
              ) -> tuple[Document, list[int]] | str:
        start, end = ctx.get("line_start"), ctx.get("line_end", ctx.get("line_start"))
        for key, value in (("line_start", start), ("line_end", end)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PredictionsFileError(f"must be a 1-based line number, got {value!r:.40}",
                                           path, n, f"{where}.{key}")
        assert isinstance(start, int) and isinstance(end, int)
        if end < start or end > len(doc.lines):
            return (f"lines {start}-{end} are not within document {doc.doc_id!r} "
                    f"({len(doc.lines)} lines)")
        return doc, list(range(start, end + 1))

    def _page(self, doc: Document, ctx: dict[str, Any], path: Path, n: int, where: str
              ) -> tuple[Document, list[int]] | str:
        page = ctx["page"]
        if isinstance(page, bool) or not isinstance(page, int) or page < 1:
            raise PredictionsFileError(f"must be a 1-based page number, got {page!r:.40}", path,
                                       n, f"{where}.page")
        if doc.line_pages is None:
            return f"document {doc.doc_id!r} has no pages; give line_start/line_end instead"
        lines = [i for i, p in enumerate(doc.line_pages, start=1) if p == page]
        return (doc, lines) if lines else f"document {doc.doc_id!r} has no page {page}"

    def _by_text(self, text: str, doc_ids: Iterable[str]) -> tuple[Document, list[int]] | str:
        """The document lines the context contains, or else the one line that contains it."""
        needle = _norm(text)
        for doc_id in doc_ids:
            doc = self.corpus.documents[doc_id]
            normed = [_norm(line) for line in doc.lines]
            inside = [i for i, line in enumerate(normed, start=1)
                      if len(line) >= MIN_MATCH_CHARS and line in needle]
            if inside:
                return doc, inside
            holding = [i for i, line in enumerate(normed, start=1) if needle and needle in line]
            if len(holding) == 1 and len(needle) >= MIN_MATCH_CHARS:
                return doc, holding
        return ("its text matches no sentence of the task's documents (give doc_id and "
                "line_start/line_end or page to place it)")


def outside_contexts(predictions: Iterable[Prediction]) -> int:
    """Contexts read from documents outside the dataset (irrelevant reads)."""
    return sum(1 for p in predictions for c in p.contexts if c.get("outside_dataset"))


def unmapped_contexts(predictions: Iterable[Prediction]) -> list[tuple[str, str]]:
    """(task id, why) of every context that could not be placed in the dataset."""
    return [(p.id, c["unmapped"]) for p in predictions for c in p.contexts if c.get("unmapped")]


# a foreign trace step naming one of these gives the final answer: not a tool call
FINAL_TOOLS = ("answer", "final_answer", "finish", "final", "respond")


def trace_path(trace: Any, locator: Locator, task: Task) -> list[dict[str, Any]]:
    """Each tool call of a foreign trace, in order, with its hits (searches) or reads located
    in the dataset by their text (``Locator.place``): ``{"tool", "kind": read | search |
    other, "items": [{"doc_id", "lines", "text_hash"}], "unlocated"}``. A search whose output
    is a plain string (a listing, not texts) is ``unlocated``, as is a step none of whose items
    could be placed; an item not placed has ``doc_id`` None. The final answer is not a step."""
    out: list[dict[str, Any]] = []
    for step in trace if isinstance(trace, list) else []:
        tool = _tool(step) if isinstance(step, dict) else ""
        if not tool or tool.lower() in FINAL_TOOLS:
            continue
        name = tool.lower()
        kind = "read" if name in READ_TOOLS else "search" if "search" in name or \
            "retriev" in name else "other"
        result = _output(step)
        items = ([] if kind == "other" or (kind == "search" and isinstance(result, str))
                 else [locator.place(t, task) for t in _item_texts(result)])
        unlocated = (kind == "search" and isinstance(result, str)) or (
            bool(items) and all(i["doc_id"] is None for i in items))
        out.append({"tool": tool, "kind": kind, "items": items, "unlocated": unlocated})
    return out


ELLIPSIS = re.compile(r"^(\.\.\.|…)|(\.\.\.|…)$")
Entry = tuple[str, int, str]  # (doc_id, 1-based line, the line normalised)


class TextIndex:
    """Every sentence of the corpus by its normalised text, so a text from anywhere (another
    transcript than the task's too) is found by what it says, as ``Locator`` finds contexts:
    the document lines it contains (at least ``MIN_MATCH_CHARS`` long), else the one line
    that contains it. The task's own documents win a tie."""

    def __init__(self, corpus: Corpus):
        self.starts: dict[str, list[Entry]] = {}
        self.words: dict[str, list[Entry]] = {}
        for doc in corpus.documents.values():
            for n, line in enumerate(doc.lines, start=1):
                normed = _norm(line)
                if len(normed) < MIN_MATCH_CHARS:
                    continue
                entry = (doc.doc_id, n, normed)
                self.starts.setdefault(normed[:MIN_MATCH_CHARS], []).append(entry)
                for word in set(normed.split()):
                    self.words.setdefault(word, []).append(entry)

    def find(self, text: str, prefer: Collection[str]) -> tuple[str, list[int]] | None:
        """(document, 1-based lines) where ``text`` came from, or None when nothing places it
        or two documents (or two lines) hold it alike."""
        needle = ELLIPSIS.sub("", _norm(text)).strip()  # a preview cut short says so
        inside: dict[str, set[int]] = {}
        for i in (0, *(k + 1 for k, c in enumerate(needle) if c == " ")):
            for doc_id, n, line in self.starts.get(needle[i:i + MIN_MATCH_CHARS], []):
                if needle.startswith(line, i):
                    inside.setdefault(doc_id, set()).add(n)
        if inside:
            best = max(inside, key=lambda d: (len(inside[d]), d in prefer))
            return best, sorted(inside[best])
        if len(needle) < MIN_MATCH_CHARS:
            return None
        words = needle.split()
        inner = words[1:-1] or words  # the first and last may be cut
        candidates = min((self.words.get(w, []) for w in inner), key=len)
        holding = [(d, n) for d, n, line in candidates if needle in line]
        preferred = [h for h in holding if h[0] in prefer]
        for found in (preferred, [] if preferred else holding):
            if len(found) == 1:
                return found[0][0], [found[0][1]]
        return None
