"""Your own documents: a folder of ``.txt``, ``.md`` and ``.pdf`` files, tasks optional.

Layout (``dataset=folder dataset.root=<folder>``; docs/your-documents.md walks through it)::

    <folder>/acme_q3_2024.txt       any ordinary layout: a paragraph per line, wrapped lines,
    <folder>/filings/acme_10k.pdf   headings, pages; sub-folders are fine
    <folder>/notes.md               Markdown: headings, lists, tables
    <folder>/tasks.jsonl            optional: what to ask of which documents

A document's id is its path under the folder without the suffix (``filings/acme_10k``).
Hidden files and ``tasks.jsonl`` are not documents; any other file is a problem to fix.

Sentences
---------
The harness splits sentences itself with sentencex (rule-based, ~300 languages, no model
to download): each sentence is one ``Document.lines`` entry, so chunks hold whole
sentences exactly as for the built-in datasets. Before splitting, the text is cut into
blocks that a sentence never crosses:

* ``.txt`` (and each PDF page): lines separated by blank lines form a block; within it a
  line that ends mid-sentence (no closing ``. ! ? : ;``) and is long (at least 60 % of the
  block's longest line) or is followed by a lower-case line is a wrapped line and runs on
  into the next. So a paragraph per line, hard-wrapped paragraphs and one sentence per line
  all read the same, and a short heading or speaker name ("Operator") stays on its own.
* ``.md``: parsed with markdown-it-py; each heading, paragraph, list item and table row is
  a block, markup (``#``, ``**``, links) is dropped, code is left out.
* ``.pdf``: PDFium (pypdfium2), page by page, through the parse cache
  ``dataset=financebench`` uses; a sentence never spans two pages and
  ``Document.line_pages`` gives each one's page, so chunks name their page.

A sentence longer than ``max_sentence_words`` (table rows) is cut into word windows.
Every sentence keeps where it came from (the file's 1-based line; a PDF's page): the
``positions`` report of every run lists them, so gold and citations (``doc#L<a>-<b>``
counts sentences) lead back to the file.

Tasks (``tasks.jsonl``, one JSON object a line)
-----------------------------------------------
``question`` (or ``instruction``) and ``doc_ids`` (or ``doc_id``) are required; optional:
``id`` (default ``task-<line>``), ``task_type`` (summarization | qa), ``reference``,
``gold``, ``style`` (a ``summarization_style``), ``target_length`` (words). ``gold`` is a
list of key passages, each a string (text located in the document, whitespace, case and
quotes ignored) or an object with one of ``text``, ``line``/``lines`` (the file's line
numbers) or ``page``/``pages`` (PDFs), and ``doc_id`` when the task has several
documents. Gold text that cannot be found is listed in the ``gold`` report and a note.

Without ``tasks.jsonl`` every document gets one summarization task (id = doc id) in the
run's ``summarization_style``. A task without a reference is kept: reference-based metrics
are null with the reason, reference-free ones still run.

Every problem in the folder (unreadable or empty files, unknown file types, bad JSON,
unknown or missing fields, unknown documents, gold out of range) is collected and
reported at once, each with its file, line and fix.
"""

from __future__ import annotations

import difflib
import json
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arag.config import SummarizationStyle
from arag.datasets.base import (
    Dataset,
    DatasetError,
    DuplicateKey,
    no_duplicate_keys,
    read_utf8,
    register_adapter,
    resolve_root,
    split_lines,
    validate,
)
from arag.records import Corpus, Document, Task

TASKS_FILE = "tasks.jsonl"
SUFFIXES = (".txt", ".md", ".pdf")
TASK_FIELDS = {"id", "question", "instruction", "doc_ids", "doc_id", "task_type", "reference",
               "gold", "style", "target_length"}
GOLD_KEYS = {"text", "line", "lines", "page", "pages", "doc_id"}
ENDS_SENTENCE = re.compile(r"[.!?:;][\"'”’)\]]*$")
WRAPPED_SHARE = 0.6  # a line at least this share of its block's longest line may be wrapped
QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "–": "-", "—": "-",
                        "\u00ad": None, "\u00a0": " "})


# --- problems: every one found in one pass -----------------------------------------------

@dataclass(frozen=True)
class Problem:
    file: Path
    line: int | None
    what: str
    fix: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else str(self.file)
        return f"{where}: {self.what}. Fix: {self.fix}"


class FolderProblems(DatasetError):
    """Everything wrong with a folder, found in one pass."""

    def __init__(self, root: Path, problems: list[Problem]):
        listed = "\n".join(f"  {n}. {p}" for n, p in enumerate(problems, start=1))
        super().__init__(f"{len(problems)} problem(s) in the folder {root} (dataset.root); "
                         f"fix them all, then run again:\n{listed}")
        self.problems = problems


# --- sentences with their positions -----------------------------------------------------

@dataclass(frozen=True)
class Sentence:
    text: str
    line: int | None  # the file's 1-based line the sentence starts on (text and Markdown)
    page: int | None  # a PDF's 1-based page


Block = list[tuple[int, str]]  # (1-based line, text) pieces a sentence may run across


def text_blocks(lines: list[str]) -> Iterator[Block]:
    """Plain-text lines -> blocks: a blank line ends one, and so does a line that does not
    run on (see the module docstring)."""
    paragraph: Block = []
    for number, raw in enumerate([*lines, ""], start=1):
        text = " ".join(raw.split())
        if text:
            paragraph.append((number, text))
            continue
        longest = max((len(t) for _, t in paragraph), default=0)
        block: Block = []
        for i, (n, t) in enumerate(paragraph):
            block.append((n, t))
            following = paragraph[i + 1][1] if i + 1 < len(paragraph) else ""
            runs_on = following and not ENDS_SENTENCE.search(t) and (
                len(t) >= WRAPPED_SHARE * longest or following[0].islower())
            if not runs_on:
                yield block
                block = []
        paragraph = []


def markdown_blocks(text: str) -> Iterator[Block]:
    """Markdown -> blocks: each heading, paragraph and list item, one block per table row;
    markup dropped, code left out."""
    from markdown_it import MarkdownIt

    row: Block | None = None  # the cells of the table row being read
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type == "tr_open":
            row = []
        elif token.type == "tr_close" and row is not None:
            if row:
                yield [(row[0][0], " | ".join(t for _, t in row))]
            row = None
        elif token.type == "inline" and token.map is not None:
            block = inline_block(token)
            if row is not None:
                row.extend(block)
            elif block:
                yield block


def inline_block(token: Any) -> Block:
    """An inline token's text, line by line (soft and hard breaks start a new line)."""
    block: Block = []
    line, piece = token.map[0] + 1, ""
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            piece += child.content
        elif child.type in ("softbreak", "hardbreak"):
            block.append((line, piece))
            line, piece = line + 1, ""
    block.append((line, piece))
    return [(n, " ".join(t.split())) for n, t in block if t.strip()]


def split_block(block: Block, language: str, max_words: int, page: int | None = None
                ) -> list[Sentence]:
    """A block's sentences (sentencex), each with the line it starts on."""
    from sentencex import get_sentence_boundaries

    text, starts = "", []
    for line, piece in block:
        starts.append((len(text), line))
        text += piece + " "
    out = []
    for bound in get_sentence_boundaries(language, text):
        sentence = " ".join(text[bound["start_index"]:bound["end_index"]].split())
        if not sentence:
            continue
        line = max(n for offset, n in starts if offset <= bound["start_index"])
        for window in word_windows(sentence, max_words):
            out.append(Sentence(window, None if page else line, page))
    return out


def word_windows(sentence: str, max_words: int) -> list[str]:
    words = sentence.split()
    return [" ".join(words[i:i + max_words]) for i in range(0, len(words), max_words)]


def pdf_page_blocks(page_text: str) -> Iterator[Block]:
    """A PDF page's extracted text (hyphenation at line ends undone) as text blocks."""
    text = page_text.replace("\u00ad", "").replace("\x00", " ")
    text = re.sub(r"(?<=[a-z])-\n(?=[a-z])", "", text)
    return text_blocks(text.splitlines())


# --- documents ---------------------------------------------------------------------------

@dataclass
class Options:
    language: str = "en"
    max_words: int = 60
    cache_dir: Path = Path("data/cache")
    workers: int | None = None


@dataclass
class Folder:
    root: Path
    options: Options
    problems: list[Problem] = field(default_factory=list)
    documents: dict[str, Document] = field(default_factory=dict)
    sentences: dict[str, list[Sentence]] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)

    def problem(self, file: Path, line: int | None, what: str, fix: str) -> None:
        self.problems.append(Problem(file, line, what, fix))


def special_file(path: Path) -> str | None:
    """What a file that is not a regular one is (a FIFO, a socket, a device); None: a
    regular file (or a link to one). Checked before anything opens it."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # a broken link: the outside-root or missing-file checks name it
    kinds = ((stat.S_ISFIFO, "named pipe (FIFO)"), (stat.S_ISSOCK, "socket"),
             (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"))
    return next((name for test, name in kinds if test(mode)), None)


def document_files(folder: Folder) -> list[Path]:
    """The folder's document files; any other file is a problem."""
    found = []
    for path in sorted(folder.root.rglob("*")):
        rel = path.relative_to(folder.root)
        if path.is_dir() or any(part.startswith(".") for part in rel.parts):
            continue
        special = special_file(path)
        if special is not None:  # reading a FIFO waits forever for a writer
            folder.problem(path, None, f"a {special}, not a regular file (it is never read)",
                           "move it out of the folder")
            continue
        if rel.as_posix() == TASKS_FILE:
            continue
        target = _link_target(path)
        if target is None:  # following it never ends
            folder.problem(path, None, "a symbolic link that leads back to itself (a link "
                           "loop)", "delete the link, or replace it with the file itself")
            continue
        if not target.is_relative_to(folder.root):
            folder.problem(path, None, f"a link to {target}, outside dataset.root "
                           "(documents are read only from inside it)",
                           "copy the file into the folder instead of linking to it")
            continue
        if path.suffix.lower() not in SUFFIXES:
            folder.problem(path, None, f"{path.suffix or 'a file without a suffix'} is not a "
                           "document type the harness reads (.txt, .md, .pdf)",
                           "save it as .txt, .md or .pdf, or move it out of the folder")
            continue
        doc_id = rel.with_suffix("").as_posix()
        if doc_id in folder.files:
            folder.problem(path, None, f"document id {doc_id!r} is taken by "
                           f"{folder.files[doc_id].name} too (ids are paths without the suffix)",
                           "rename one of the two files")
            continue
        folder.files[doc_id] = path
        found.append(path)
    return found


def _link_target(path: Path) -> Path | None:
    """Where ``path`` leads once every link is followed; None for a link loop."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # RuntimeError: Python before 3.13 on a loop
        return None


def read_text_document(folder: Folder, path: Path) -> list[Sentence]:
    try:
        text = read_utf8(path, "document file not found")
    except DatasetError as exc:
        folder.problem(path, None, str(exc).split(": ", 1)[-1].split("; ")[0],
                       "re-save the file as UTF-8 text")
        return []
    blocks = markdown_blocks(text) if path.suffix.lower() == ".md" else \
        text_blocks(split_lines(text))
    return [s for b in blocks for s in split_block(b, folder.options.language,
                                                    folder.options.max_words)]


def read_pdfs(folder: Folder, pdfs: list[Path]) -> dict[Path, list[Sentence]]:
    """Sentences of each PDF, parsed through the shared parse cache; a PDF the parser cannot
    read is a problem, and the others are still read."""
    from arag.datasets.financebench import PARSER, parse_pdfs

    if not pdfs:
        return {}
    opts = folder.options
    try:
        pages, _ = parse_pdfs(pdfs, opts.cache_dir, opts.workers)
    except DatasetError:  # find every broken one (the good ones are cached by now)
        pages = {}
        for pdf in pdfs:
            try:
                pages.update(parse_pdfs([pdf], opts.cache_dir, 1)[0])
            except DatasetError:
                folder.problem(pdf, None, f"{PARSER} cannot read this PDF",
                               "replace it with an intact copy, or remove it")
    return {pdf: [s for number, page in enumerate(texts, start=1)
                  for b in pdf_page_blocks(page)
                  for s in split_block(b, opts.language, opts.max_words, page=number)]
            for pdf, texts in pages.items()}


def load_documents(folder: Folder) -> None:
    files = document_files(folder)
    pdf_sentences = read_pdfs(folder, [f for f in files if f.suffix.lower() == ".pdf"])
    for doc_id, path in folder.files.items():
        if path.suffix.lower() == ".pdf":
            if path not in pdf_sentences:
                continue  # unreadable: already a problem
            sentences = pdf_sentences[path]
            empty = ("no text could be extracted (a scanned PDF?)",
                     "supply a PDF with a text layer, or a .txt of it")
        else:
            sentences = read_text_document(folder, path)
            empty = ("the document is empty", "add its text, or remove the file")
        if not sentences:
            if not any(p.file == path for p in folder.problems):
                folder.problem(path, None, *empty)
            continue
        folder.sentences[doc_id] = sentences
        pages = tuple(s.page or 0 for s in sentences) if path.suffix.lower() == ".pdf" else None
        folder.documents[doc_id] = Document(
            doc_id=doc_id, lines=tuple(s.text for s in sentences), company=doc_id,
            doc_type="DOCUMENT", line_pages=pages)
    if not folder.files and not folder.problems:
        folder.problem(folder.root, None, "the folder holds no documents",
                       "put .txt, .md or .pdf files in it, or point dataset.root at the "
                       "folder that has them")


# --- tasks ---------------------------------------------------------------------------------

def normalise(text: str) -> str:
    return " ".join(text.translate(QUOTES).casefold().split())


def locate(sentences: list[Sentence], passage: str) -> tuple[int, ...]:
    """1-based numbers of the sentences a passage of text covers (none: not found)."""
    joined, spans = "", []
    for number, s in enumerate(sentences, start=1):
        start = len(joined)
        joined += normalise(s.text) + " "
        spans.append((start, len(joined) - 1, number))
    at = joined.find(normalise(passage))
    if at < 0 or not passage.strip():
        return ()
    end = at + len(normalise(passage))
    return tuple(n for a, b, n in spans if a < end and b > at)


@dataclass
class TaskReader:
    """One tasks.jsonl line -> a Task, its problems recorded rather than raised."""

    folder: Folder
    path: Path
    line: int
    obj: dict[str, Any]
    unlocated: list[dict[str, Any]] = field(default_factory=list)

    def problem(self, what: str, fix: str) -> None:
        self.folder.problem(self.path, self.line, what, fix)

    def read(self, source: str) -> Task | None:
        n_before = len(self.folder.problems)
        self.unknown_fields()
        question = self.text_field("question", "instruction", required=True)
        doc_ids = self.doc_ids()
        task_type = self.obj.get("task_type", "summarization")
        if task_type not in ("summarization", "qa"):
            self.problem(f"task_type {task_type!r} is not summarization or qa",
                         'set "task_type": "summarization" or "qa"')
        reference = self.text_field("reference", required=False)
        meta = self.style_and_length()
        gold = self.gold(doc_ids)
        if len(self.folder.problems) > n_before:
            return None
        if not reference:
            meta["reference_missing"] = (f"no reference summary for this task in {TASKS_FILE} "
                                         f"(line {self.line})")
        if self.unlocated:
            meta["gold_not_found"] = [u["text"] for u in self.unlocated]
        return Task(id=str(self.obj.get("id") or f"task-{self.line}"), task_type=task_type,
                    doc_ids=tuple(doc_ids), question=question, reference=reference,
                    gold_lines=gold, source=source, meta=meta)

    def unknown_fields(self) -> None:
        for key in sorted(set(self.obj) - TASK_FIELDS):
            close = difflib.get_close_matches(key, sorted(TASK_FIELDS), n=1)
            self.problem(f"unknown field {key!r}",
                         f"did you mean {close[0]!r}?" if close else
                         f"remove it; the fields are {sorted(TASK_FIELDS)}")

    def text_field(self, *keys: str, required: bool) -> str:
        for key in keys:
            if key in self.obj:
                value = self.obj[key]
                if isinstance(value, str) and value.strip():
                    return value.strip()
                self.problem(f"{key!r} must be non-empty text, got {value!r:.60}",
                             f'give "{key}" as a JSON string')
                return ""
        if required:
            self.problem(f"missing {' or '.join(map(repr, keys))}",
                         f'add "{keys[0]}": "..." (what to ask of the documents)')
        return ""

    def doc_ids(self) -> list[str]:
        raw = self.obj.get("doc_ids", self.obj.get("doc_id"))
        ids = [raw] if isinstance(raw, str) else raw
        if not isinstance(ids, list) or not ids or not all(isinstance(d, str) for d in ids):
            self.problem(f"doc_ids must be a non-empty list of document ids, got {raw!r:.60}",
                         f'add "doc_ids": ["<file path without suffix>"]; the folder has '
                         f"{self.known_ids()}")
            return []
        for doc_id in ids:
            if doc_id not in self.folder.files:
                close = difflib.get_close_matches(doc_id, list(self.folder.files), n=1)
                self.problem(f"document {doc_id!r} is not in the folder",
                             f"did you mean {close[0]!r}?" if close else
                             f"use one of {self.known_ids()}")
        return ids

    def known_ids(self) -> str:
        ids = sorted(self.folder.files)
        return f"{ids[:8]}{' ...' if len(ids) > 8 else ''}"

    def style_and_length(self) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        styles = [s.value for s in SummarizationStyle]
        if "style" in self.obj:
            if self.obj["style"] in styles:
                meta["style"] = self.obj["style"]
            else:
                self.problem(f"style {self.obj['style']!r} is unknown", f"use one of {styles}")
        if "target_length" in self.obj:
            words = self.obj["target_length"]
            if isinstance(words, int) and not isinstance(words, bool) and words >= 1:
                meta["target_length"] = words
            else:
                self.problem(f"target_length must be a positive number of words, got "
                             f"{words!r:.30}", '"target_length": 80')
        return meta

    def gold(self, doc_ids: list[str]) -> dict[str, tuple[int, ...]] | None:
        items = self.obj.get("gold")
        if items is None:
            return None
        if not isinstance(items, list):
            items = [items]
        found: dict[str, set[int]] = {}
        for i, item in enumerate(items):
            spec = {"text": item} if isinstance(item, str) else item
            if not isinstance(spec, dict) or not spec or set(spec) - GOLD_KEYS:
                self.problem(f"gold[{i}] must be a text or an object with text, line(s) or "
                             f"page(s) (and doc_id), got {item!r:.60}",
                             '"gold": ["a key sentence", {"line": 12}, {"page": 3}]')
                continue
            doc_id = self.gold_document(i, spec, doc_ids)
            if doc_id is not None:
                found.setdefault(doc_id, set()).update(self.gold_lines(i, spec, doc_id))
        return {d: tuple(sorted(lines)) for d, lines in found.items() if lines} or None

    def gold_document(self, i: int, spec: dict[str, Any], doc_ids: list[str]) -> str | None:
        if not doc_ids:
            return None  # already a problem of the task's doc_ids
        doc_id = spec.get("doc_id")
        if doc_id is None and len(doc_ids) == 1:
            doc_id = doc_ids[0]
        if doc_id is None and "text" in spec:  # the first of the task's documents holding it
            holding = [d for d in doc_ids if d in self.folder.sentences
                       and locate(self.folder.sentences[d], str(spec["text"]))]
            doc_id = holding[0] if holding else doc_ids[0]
        if doc_id is None:
            self.problem(f"gold[{i}] does not say which of the task's {len(doc_ids)} documents "
                         "it is in", f'add "doc_id" (one of {doc_ids}) to gold[{i}]')
            return None
        if doc_id not in doc_ids:
            self.problem(f"gold[{i}] names document {doc_id!r}, not one of the task's "
                         f"{doc_ids}", "add it to doc_ids or fix gold's doc_id")
            return None
        return doc_id if doc_id in self.folder.sentences else None

    def gold_lines(self, i: int, spec: dict[str, Any], doc_id: str) -> set[int]:
        """Sentence numbers of one gold item (problems and unfound text recorded)."""
        sentences = self.folder.sentences[doc_id]
        if "text" in spec:
            lines = locate(sentences, str(spec["text"]))
            if not lines:
                self.unlocated.append({"doc_id": doc_id, "text": str(spec["text"])})
            return set(lines)
        is_pdf = sentences[0].page is not None
        for unit, keys in (("line", ("line", "lines")), ("page", ("page", "pages"))):
            wanted = [spec[k] for k in keys if k in spec]
            if not wanted:
                continue
            values = wanted[0] if isinstance(wanted[0], list) else [wanted[0]]
            if (unit == "page") != is_pdf:
                self.problem(f"gold[{i}] gives a {unit} of {doc_id!r}, which has "
                             f"{'pages, not lines' if is_pdf else 'lines, not pages'}",
                             f"give {'page' if is_pdf else 'line'} numbers or the text")
                return set()
            return self.positions(i, unit, values, doc_id)
        self.problem(f"gold[{i}] has no text, line(s) or page(s)",
                     '{"text": "..."}, {"line": 12} or {"page": 3}')
        return set()

    def positions(self, i: int, unit: str, values: list[Any], doc_id: str) -> set[int]:
        sentences = self.folder.sentences[doc_id]
        at = {n: (s.page if unit == "page" else s.line) for n, s in enumerate(sentences, 1)}
        present = set(at.values())
        bad = [v for v in values if not isinstance(v, int) or isinstance(v, bool)
               or v not in present]
        if bad:
            last = max(p for p in present if p is not None)
            self.problem(f"gold[{i}]: {unit}(s) {bad} of {doc_id!r} hold no text (the file "
                         f"has text on {unit}s 1-{last})",
                         f"number {unit}s from 1 as the file does, pointing at text")
            return set()
        return {n for n, position in at.items() if position in values}


def read_tasks(folder: Folder, path: Path, source: str
               ) -> tuple[list[Task], dict[str, int], list[dict[str, Any]]]:
    tasks: list[Task] = []
    lines: dict[str, int] = {}
    unlocated: list[dict[str, Any]] = []
    try:
        rows = _rows(folder, path)
    except DatasetError as exc:
        folder.problem(path, None, str(exc).split(": ", 1)[-1], "re-save it as UTF-8 text")
        return [], {}, []
    for n, obj in rows:
        reader = TaskReader(folder, path, n, obj)
        task = reader.read(source)
        if task is None:
            continue
        if task.id in lines:
            folder.problem(path, n, f"duplicate task id {task.id!r} (first at line "
                           f"{lines[task.id]})", "give every task its own id")
            continue
        lines[task.id] = n
        tasks.append(task)
        unlocated += [{"task": task.id, "line": n, **u} for u in reader.unlocated]
    if not tasks and not folder.problems:
        folder.problem(path, None, "no tasks", f"add a task per line, or remove {TASKS_FILE} "
                       "for one summary per document")
    return tasks, lines, unlocated


def _rows(folder: Folder, path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Every JSON object of the file; a malformed line is a problem, the others still read."""
    rows = []
    for n, raw in enumerate(split_lines(read_utf8(path, "file not found")), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw, object_pairs_hook=no_duplicate_keys)
        except json.JSONDecodeError as exc:
            folder.problem(path, n, f"malformed JSON ({exc.msg} at column {exc.colno})",
                           "write each task as one JSON object on one line")
            continue
        except DuplicateKey as exc:
            folder.problem(path, n, f"the key {exc.key!r} appears twice (JSON would silently "
                           "keep the last)", "keep one")
            continue
        if not isinstance(obj, dict):
            folder.problem(path, n, "the line is not a JSON object",
                           'write each task as {"question": ..., "doc_ids": [...]}')
            continue
        rows.append((n, obj))
    return rows


def summary_tasks(folder: Folder, source: str) -> list[Task]:
    """One summarization task per document (no tasks.jsonl), without a reference."""
    return [Task(id=doc_id, task_type="summarization", doc_ids=(doc_id,),
                 question=f"Summarize the key points of the document {doc_id}.", reference="",
                 source=source,
                 meta={"reference_missing": f"no reference summary: {folder.root} has no "
                                            f"{TASKS_FILE}"})
            for doc_id in folder.documents]


# --- the adapter -------------------------------------------------------------------------

def read_options(cfg: Any, project_root: Path) -> Options:
    from arag.datasets.financebench import parse_options

    cache_dir, workers, max_words = parse_options(cfg, project_root, frozenset({"language"}))
    language = (cfg.options or {}).get("language") or "en"
    return Options(str(language), max_words, cache_dir, workers)


@register_adapter("folder")
def load_folder(cfg: Any, project_root: Path) -> Dataset:
    root = resolve_root(str(cfg.root), project_root).resolve()
    if not root.is_dir():
        raise DatasetError(f"dataset.root {root} is not a folder. Fix: dataset.root=<the "
                           "folder that holds your .txt, .md or .pdf files>")
    folder = Folder(root, read_options(cfg, project_root))
    load_documents(folder)
    tasks_path = root / TASKS_FILE
    if tasks_path.exists() and special_file(tasks_path) is None:
        tasks, lines, unlocated = read_tasks(folder, tasks_path, cfg.name)
    else:
        tasks, lines, unlocated = summary_tasks(folder, cfg.name), {}, []
    if folder.problems:
        raise FolderProblems(root, sorted(folder.problems,
                                          key=lambda p: (str(p.file), p.line or 0)))
    dataset = Dataset(cfg.name, Corpus(folder.documents), tasks)
    dataset.task_features = {t.id: {"file_type": file_type(folder, t)} for t in tasks}
    add_reports(dataset, folder, unlocated, tasks_path.exists())
    return validate(dataset, tasks_path, lines)


def file_type(folder: Folder, task: Task) -> str:
    """The suffix of the task's files (``pdf``; ``md + txt`` for a task over mixed ones)."""
    suffixes = dict.fromkeys(folder.files[d].suffix.lower().lstrip(".") for d in task.doc_ids
                             if d in folder.files)
    return " + ".join(suffixes)


def add_reports(dataset: Dataset, folder: Folder, unlocated: list[dict[str, Any]],
                has_tasks: bool) -> None:
    """Where every sentence came from, gold not found, and notes for the console."""
    dataset.reports["positions"] = {
        doc_id: {"file": folder.files[doc_id].relative_to(folder.root).as_posix(),
                 **({"pages": [s.page for s in sentences]} if sentences[0].page is not None
                    else {"lines": [s.line for s in sentences]})}
        for doc_id, sentences in folder.sentences.items()}
    tasks = dataset.tasks
    if unlocated:
        dataset.reports["gold"] = {"n_not_found": len(unlocated), "not_found": unlocated}
        dataset.notes.append(f"{len(unlocated)} gold passage(s) were not found in their "
                             "document and are left out of the retrieval gold (see the gold "
                             "report): " + "; ".join(f"{u['task']}: {u['text'][:60]!r}"
                                                    for u in unlocated[:5]))
    if not has_tasks:
        dataset.notes.append(f"no {TASKS_FILE}: one summary task per document "
                             f"({len(tasks)}), in the run's summarization_style")
    missing = sum(1 for t in tasks if not t.reference)
    if missing:
        dataset.notes.append(
            f"{missing} of {len(tasks)} task(s) have no reference: reference-based metrics "
            "(ROUGE, BERTScore, G-Eval coverage, numeric recall) are null for them with that "
            "reason; reference-free ones still run (numeric precision, citations, context, "
            "cost, latency; faithfulness and factual consistency with a judge)")
    without_gold = sum(1 for t in tasks if not t.gold_lines)
    if without_gold:
        dataset.notes.append(f"{without_gold} of {len(tasks)} task(s) have no gold passages: "
                             "retrieval metrics are null for them")
