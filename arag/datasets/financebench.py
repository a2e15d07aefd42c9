"""FinanceBench: question answering over SEC filings (10-K, 10-Q, 8-K, earnings releases).

Getting the data
----------------
Clone the open-source release and point ``dataset.root`` at the clone::

    git clone https://github.com/patronus-ai/financebench /data/financebench
    python run.py -m system=arag,naive,stuffing dataset=financebench \\
        dataset.root=/data/financebench

Layout read (upstream, unchanged; relative roots resolve against the project root)::

    data/financebench_open_source.jsonl            150 questions
    data/financebench_document_information.jsonl   filings: company, doc_type, doc_period
    pdfs/<doc_name>.pdf                            the filings (some are absent upstream)

What a task is
--------------
One QA task per question (``task_type: qa``), id = ``financebench_id``, reference = the
answer, ``doc_ids = [doc_name]``; ``Task.meta`` keeps question_type, question_reasoning,
justification and the evidence list (without ``evidence_text_full_page``, which is the
page text the document already holds; each item gains its 1-based ``page``). Tasks keep the
file's order. Questions whose PDF is absent are skipped and listed per question in
``Dataset.reports["missing_pdfs"]`` (and a note).

Documents
---------
No text ships upstream: each PDF is parsed with PDFium (the ``pypdfium2`` package), page by
page. A page's text is cleaned (de-hyphenated at line ends, whitespace collapsed) and cut
into sentences by a simple regex splitter (pieces longer than ``max_sentence_words`` --
table rows -- are cut into word windows); one sentence per ``Document.lines`` entry, and
``Document.line_pages`` gives the 1-based page of each line, so a line never spans two
pages. Retrieval gold = every line on the evidence pages (``evidence_page_num`` is 0-based).

Why PDFium: on the 10-Ks ``dataset=financebench_qfs`` reads it parses ~10-15 ms a page, about
20x faster than pypdf (pure Python; a 160-page 10-K took ~35 s on one core, a cold parse of
all 55 10-Ks most of an hour), with the same page counts and text at least as faithful:
FinanceBench's evidence quotes are found on their pages as often as in pypdf's text
(``bench/pdf_parsers.py``, figures in bench/README.md). So a cold load, and the dry run
that a user takes first, costs seconds per filing, not minutes.

Page texts are cached as JSON in ``<cache_dir>/parsed/<sha256 of the PDF>.<engine>.json``
(``engine``: "pdfium"; ``parser`` names the engine's version): another engine's text, or
an entry of an older format, is never read as this one's, it is parsed again. Missing
ones are parsed in parallel processes (PDFium is not thread-safe), each parsing PDF after
PDF, largest first. ``dataset.limit=N`` is
applied here, before parsing: only the PDFs of the first N answerable questions are parsed.

Options (``dataset.options``)
-----------------------------
``cache_dir`` (default ``${cache.dir}`` via conf/dataset/financebench.yaml, else
``data/cache``), ``parse_workers`` (processes; default: number of CPUs),
``max_sentence_words`` (default 60).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from arag.datasets.base import (
    Dataset,
    DatasetError,
    missing_root,
    read_jsonl,
    register_adapter,
    require,
    resolve_root,
    validate,
)
from arag.files import sha256_file, write_text_atomically
from arag.records import Corpus, Document, Task

log = logging.getLogger(__name__)

UPSTREAM = "https://github.com/patronus-ai/financebench"
QUESTIONS = Path("data") / "financebench_open_source.jsonl"
DOC_INFO = Path("data") / "financebench_document_information.jsonl"
PDFS = Path("pdfs")
CACHE_FORMAT = 2  # bump when the cached page extraction changes
DOC_TYPES = {"10k": "10K", "10k_annualreport": "10K", "10q": "10Q", "8k": "8K",
             "earnings": "EARNINGS"}
OPTIONS = {"cache_dir", "parse_workers", "max_sentence_words"}
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds arag/

ABBREVIATIONS = frozenset(
    "u.s. u.k. inc. corp. co. ltd. no. nos. mr. mrs. ms. dr. vs. e.g. i.e. etc. jan. feb. "
    "mar. apr. jun. jul. aug. sep. sept. oct. nov. dec. approx. fig. st. jr. sr. l.p. n.a. "
    "s.a. p.m. a.m.".split())
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[$€£A-Z0-9])"
                          r"|\s+[•●▪■◦]\s+")  # or a bullet


# --- text --------------------------------------------------------------------------------

def clean_page(text: str) -> str:
    """PDF page text -> one line: hyphenation at line ends undone, whitespace collapsed."""
    text = text.replace("\u00ad", "").replace("\x00", " ")
    text = re.sub(r"(?<=[a-z])-\n(?=[a-z])", "", text)
    return " ".join(text.split())


def split_sentences(text: str, max_words: int = 60) -> list[str]:
    """Regex sentence split (not after common abbreviations); long pieces cut into windows."""
    pieces = [p.strip(" •●▪■◦") for p in SENTENCE_END.split(text)]
    pieces = [p for p in pieces if p]
    merged: list[str] = []
    for piece in pieces:
        if merged and merged[-1].split()[-1].lower() in ABBREVIATIONS:
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
    out = []
    for sentence in merged:
        words = sentence.split()
        for i in range(0, len(words), max_words):
            out.append(" ".join(words[i:i + max_words]))
    return out


def page_lines(pages: list[str], max_words: int = 60) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Pages -> (sentences, 1-based page of each sentence); empty pages contribute nothing."""
    return clean_page_lines([clean_page(p) for p in pages], max_words)


def clean_page_lines(texts: list[str], max_words: int = 60
                     ) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """``page_lines`` of pages already through ``clean_page``."""
    lines: list[str] = []
    line_pages: list[int] = []
    for number, text in enumerate(texts, start=1):
        for sentence in split_sentences(text, max_words):
            lines.append(sentence)
            line_pages.append(number)
    return tuple(lines), tuple(line_pages)


# --- PDF parsing with a content-addressed cache -------------------------------------------

def _pdfium_pages(path: Path) -> list[str]:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(str(path))
    try:
        pages = []
        for page in pdf:
            textpage = page.get_textpage()
            pages.append(textpage.get_text_bounded())
            textpage.close()
            page.close()
    finally:
        pdf.close()
    # PDFium ends lines with \r\n and marks a hyphen that ends a line with \x02; as pypdf's
    # "-\n" they go through the same de-hyphenation in clean_page
    return [text.replace("\r\n", "\n").replace("\x02", "-\n") for text in pages]


def _pypdf_pages(path: Path) -> list[str]:
    import pypdf

    return [page.extract_text() or "" for page in pypdf.PdfReader(str(path)).pages]


PARSERS = {"pdfium": _pdfium_pages, "pypdf": _pypdf_pages}
PARSER = "pdfium"  # the engine runs use; see the module docstring for why


def parser_version(parser: str = PARSER) -> str:
    """What the ``parser`` field of a cache entry says, e.g. "pdfium (pypdfium2 5.15.2)"."""
    if parser == "pdfium":
        from pypdfium2.version import PYPDFIUM_INFO

        return f"pdfium (pypdfium2 {PYPDFIUM_INFO})"
    import pypdf

    return f"pypdf {pypdf.__version__}"


def extract_pages(path: str | Path, parser: str = PARSER) -> tuple[list[str], float]:
    """Text of every page with the given engine; (pages, seconds)."""
    started = time.perf_counter()
    pages = PARSERS[parser](Path(path))
    return pages, time.perf_counter() - started


def _cache_file(cache_dir: Path, sha: str, parser: str = PARSER) -> Path:
    # the engine is in the name: another engine's text is never read as this one's
    return cache_dir / "parsed" / f"{sha}.{parser}.json"


def _read_cache(file: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("format") != CACHE_FORMAT or not isinstance(data.get("pages"), list):
        return None
    if data.get("engine") != file.name.split(".")[-2]:
        return None
    return data


def parse_to_cache(pdf: Path, sha: str, file: Path) -> None:
    """Parse one PDF and store its pages atomically (parallel jobs never see half a file)."""
    pages, seconds = extract_pages(pdf)
    payload = {"format": CACHE_FORMAT, "sha256": sha, "source": pdf.name, "engine": PARSER,
               "parser": parser_version(), "parse_seconds": round(seconds, 2), "pages": pages}
    write_text_atomically(file, json.dumps(payload, ensure_ascii=False))


class _ParseWorkers:
    """One worker process per parsing thread, each parsing PDF after PDF: PDFium is not
    thread-safe, so threads cannot share it, and an interpreter start (~0.5 s of imports)
    per PDF cost about a fifth of parsing 55 10-Ks.

    A fresh interpreter (not a fork, not multiprocessing's re-import of ``__main__``) is
    safe from any caller: Hydra jobs, scripts without a main guard, threaded runners. A
    worker that dies (a PDF that crashes PDFium) fails that PDF and is started anew.
    """

    def __init__(self) -> None:
        self._mine = threading.local()
        self._all: list[subprocess.Popen[str]] = []
        self._lock = threading.Lock()

    def parse(self, pdf: Path, sha: str, file: Path) -> None:
        worker = self._worker()
        assert worker.stdin is not None and worker.stdout is not None
        try:
            worker.stdin.write(json.dumps([str(pdf), sha, str(file)]) + "\n")
            worker.stdin.flush()
            reply = worker.stdout.readline().strip()
        except OSError:  # the worker died before it read the job
            reply = ""
        if reply != "ok":
            raise DatasetError(f"{PARSER} cannot parse this PDF ({self._why(worker, reply)}); "
                               "replace it with an intact copy, or delete it (its questions "
                               "are then skipped and reported)", pdf)

    def _worker(self) -> subprocess.Popen[str]:
        worker = getattr(self._mine, "worker", None)
        if worker is None or worker.poll() is not None:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
            errors = tempfile.TemporaryFile("w+")  # read when the worker dies
            worker = subprocess.Popen([sys.executable, "-m", __name__], env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=errors)
            worker.stderr = errors
            self._mine.worker = worker
            with self._lock:
                self._all.append(worker)
        return worker

    @staticmethod
    def _why(worker: subprocess.Popen[str], reply: str) -> str:
        if reply.startswith("error "):
            return reply.removeprefix("error ")
        worker.wait()
        assert worker.stderr is not None
        worker.stderr.seek(0)
        tail = worker.stderr.read().strip().splitlines()
        return tail[-1] if tail else f"the parser exited with status {worker.returncode}"

    def close(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            if worker.stdin is not None:
                worker.stdin.close()  # end of jobs: the worker exits
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            if worker.stderr is not None:
                worker.stderr.close()


def serve_parse_jobs() -> None:
    """The worker's loop: a JSON ``[pdf, sha256, cache file]`` a line on stdin, ``ok`` or
    ``error <why>`` a line on stdout, until stdin closes."""
    for line in sys.stdin:
        pdf, sha, file = json.loads(line)
        try:
            parse_to_cache(Path(pdf), sha, Path(file))
            reply = "ok"
        except Exception as exc:  # reported to the parent, which names the PDF
            reply = " ".join(f"error {type(exc).__name__}: {exc}".split())
        print(reply, flush=True)


def parse_pdfs(pdfs: list[Path], cache_dir: Path, workers: int | None = None
               ) -> tuple[dict[Path, list[str]], dict[str, Any]]:
    """Page texts of each PDF, from the cache or parsed (in parallel) and cached; + stats."""
    started = time.perf_counter()
    pages: dict[Path, list[str]] = {}
    todo: list[tuple[Path, str, Path]] = []
    for pdf in pdfs:
        sha = sha256_file(pdf)
        cached = _read_cache(_cache_file(cache_dir, sha))
        if cached is None:
            todo.append((pdf, sha, _cache_file(cache_dir, sha)))
        else:
            pages[pdf] = cached["pages"]
    parse_seconds: dict[str, float] = {}
    if todo:
        n = max(1, min(len(todo), workers or os.cpu_count() or 1))
        log.info("parsing %d PDF(s) with %s in %d process(es); cached under %s", len(todo),
                 PARSER, n, cache_dir / "parsed")
        parsers = _ParseWorkers()
        with ThreadPoolExecutor(n) as pool:
            # largest first: the last PDFs to finish are small ones, so no process waits
            # long on another (the order of the result does not depend on it)
            largest_first = sorted(todo, key=lambda job: -job[0].stat().st_size)
            futures = {pool.submit(parsers.parse, *job): job for job in largest_first}
            try:
                for future in as_completed(futures):
                    future.result()
                    pdf, _, file = futures[future]
                    data = _read_cache(file)
                    if data is None:
                        raise DatasetError(f"the parsed text was not stored in {file}", pdf)
                    pages[pdf] = data["pages"]
                    parse_seconds[pdf.name] = data["parse_seconds"]
                    log.info("parsed %s (%d pages) in %.1fs", pdf.name,
                             len(data["pages"]), data["parse_seconds"])
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
            finally:
                pool.shutdown(wait=True)
                parsers.close()
    stats = {"n_pdfs": len(pdfs), "n_from_cache": len(pdfs) - len(todo), "n_parsed": len(todo),
             "parse_seconds": parse_seconds,
             "wall_seconds": round(time.perf_counter() - started, 2)}
    return pages, stats


# --- the adapter ----------------------------------------------------------------------------

def period_of(doc_name: str, info: dict[str, Any]) -> str:
    """``3M_2023Q2_10Q`` -> "Q2 2023"; 10-K -> "FY2022"; 8-K -> "2022 (dated 2022-07-01)"."""
    year = info.get("doc_period")
    quarter = re.search(r"_(\d{4})Q([1-4])_", doc_name)
    if quarter:
        return f"Q{quarter[2]} {quarter[1]}"
    dated = re.search(r"dated[-_](\d{4}-\d{2}-\d{2})", doc_name)
    if dated:
        return f"{year} (dated {dated[1]})"
    doc_type = str(info.get("doc_type", "")).lower()
    return f"FY{year}" if doc_type.startswith("10k") else str(year or "")


def read_doc_info(path: Path) -> dict[str, dict[str, Any]]:
    info = {}
    for n, obj in read_jsonl(path):
        name = require(obj, "doc_name", str, path, n)
        if Path(name).name != name or name.startswith("."):
            raise DatasetError(f"{name!r} is not a plain file name: each filing is read from "
                               f"{PDFS}/<doc_name>.pdf under dataset.root. Fix: give the PDF's "
                               "name without folders or '..'", path, n, "doc_name")
        doc_type = str(obj.get("doc_type", "")).lower()
        if doc_type not in DOC_TYPES:
            raise DatasetError(f"doc_type {obj.get('doc_type')!r} is unknown; expected one of "
                               f"{sorted(DOC_TYPES)}", path, n, "doc_type")
        info[name] = obj
    return info


def parse_options(cfg: Any, project_root: Path, extra: frozenset[str] = frozenset()
                  ) -> tuple[Path, int | None, int]:
    """(cache dir, parse workers, max sentence words); ``extra`` names the caller's own
    options, so an unknown one fails here, naming the known ones."""
    options = dict(cfg.options or {})
    known = OPTIONS | extra
    unknown = set(options) - known
    if unknown:
        raise DatasetError(f"unknown dataset.options {sorted(unknown)} for {cfg.name}; known: "
                           f"{sorted(known)}")
    cache_dir = resolve_root(str(options.get("cache_dir") or "data/cache"), project_root)
    workers = options.get("parse_workers")
    max_words = options.get("max_sentence_words") or 60
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise DatasetError(f"dataset.options.parse_workers must be >= 1 (got {workers!r})")
    if not isinstance(max_words, int) or max_words < 5:
        raise DatasetError(f"dataset.options.max_sentence_words must be an integer >= 5 (got "
                           f"{max_words!r})")
    return cache_dir, workers, max_words


def load_filings(pdfs: list[Path], info: dict[str, dict[str, Any]], cache_dir: Path,
                 workers: int | None, max_words: int
                 ) -> tuple[dict[str, Document], dict[str, list[str]], dict[str, Any]]:
    """Page-aware documents of the given filings (parsed or from the cache), the text of
    each one's pages through ``clean_page`` (cleaned once, here), and the parsing stats."""
    pages_by_pdf, stats = parse_pdfs(pdfs, cache_dir, workers)
    documents: dict[str, Document] = {}
    texts: dict[str, list[str]] = {}
    for pdf in pdfs:
        texts[pdf.stem] = [clean_page(p) for p in pages_by_pdf[pdf]]
        lines, line_pages = clean_page_lines(texts[pdf.stem], max_words)
        if not lines:
            raise DatasetError("no text could be extracted from this PDF (scanned images?); "
                               "delete it to skip its tasks, or supply a text PDF", pdf)
        meta = info[pdf.stem]
        documents[pdf.stem] = Document(
            doc_id=pdf.stem, lines=lines, company=str(meta.get("company", "")),
            doc_type=DOC_TYPES[str(meta["doc_type"]).lower()], period=period_of(pdf.stem, meta),
            line_pages=line_pages,
        )
    return documents, texts, stats


def open_root(cfg: Any, project_root: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The upstream tree's root and its filings (doc_name -> document information)."""
    root = resolve_root(cfg.root, project_root).resolve()
    if not root.is_dir():
        raise missing_root(root, UPSTREAM)
    return root, read_doc_info(root / DOC_INFO)


def check_question(obj: dict[str, Any], path: Path, line: int, seen: dict[str, int],
                   info: dict[str, dict[str, Any]]) -> str:
    """The question's id, once its fields are checked; ``seen`` maps ids to their lines."""
    qid = require(obj, "financebench_id", str, path, line)
    if qid in seen:
        raise DatasetError(f"duplicate financebench_id {qid!r} (first at line {seen[qid]})",
                           path, line, "financebench_id")
    seen[qid] = line
    for key in ("question", "answer", "doc_name"):
        require(obj, key, str, path, line)
    require(obj, "evidence", list, path, line)
    if obj["doc_name"] not in info:
        raise DatasetError(f"doc_name {obj['doc_name']!r} is not in {DOC_INFO.name}",
                           path, line, "doc_name")
    return qid


def choose_questions(path: Path, root: Path, info: dict[str, dict[str, Any]], limit: int | None
                     ) -> tuple[list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
    """The questions to load (line number, question) in file order, and the questions
    skipped because their PDF is absent. The limit counts loadable questions, so it applies
    before any PDF is parsed."""
    chosen: list[tuple[int, dict[str, Any]]] = []
    missing: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for n, obj in read_jsonl(path):
        if limit is not None and len(chosen) >= limit:
            break
        qid = check_question(obj, path, n, seen, info)
        pdf = root / PDFS / f"{obj['doc_name']}.pdf"
        if pdf.exists():
            chosen.append((n, obj))
        else:
            missing.append({"financebench_id": qid, "doc_name": obj["doc_name"], "line": n,
                            "expected_path": str(pdf)})
    return chosen, missing


def read_evidence(items: list[Any], doc: Document, n_pages: int, path: Path, line: int
                  ) -> tuple[list[dict[str, Any]], set[int], list[str]]:
    """The question's evidence as Task.meta keeps it (1-based ``page`` added, the page's
    full text dropped), the pages of its own filing it points to, and why any is not gold."""
    evidence: list[dict[str, Any]] = []
    pages: set[int] = set()
    problems: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("evidence_page_num"), int):
            raise DatasetError(f"evidence[{i}] needs an integer 'evidence_page_num' (0-based)",
                               path, line, "evidence")
        page = item["evidence_page_num"] + 1
        ev_doc = item.get("doc_name", doc.doc_id)
        evidence.append({k: v for k, v in item.items() if k != "evidence_text_full_page"}
                        | {"page": page})
        if ev_doc != doc.doc_id:
            problems.append(f"evidence[{i}] is in another document ({ev_doc}); not gold")
        elif not 1 <= page <= n_pages:
            problems.append(f"evidence[{i}] page {page} is beyond the PDF's {n_pages} pages")
        else:
            pages.add(page)
    return evidence, pages, problems


def qa_task(obj: dict[str, Any], doc: Document, n_pages: int, path: Path, line: int,
            source: str) -> tuple[Task, dict[str, Any]]:
    """One question's task (gold: every line on its evidence pages) and its entry in the
    gold_pages report."""
    evidence, pages, problems = read_evidence(obj["evidence"], doc, n_pages, path, line)
    assert doc.line_pages is not None
    gold = tuple(i for i, p in enumerate(doc.line_pages, start=1) if p in pages)
    empty = sorted(p for p in pages if p not in set(doc.line_pages))
    if empty:
        problems.append(f"evidence page(s) {empty} have no extractable text")
    task = Task(
        id=obj["financebench_id"], task_type="qa", doc_ids=(doc.doc_id,),
        question=obj["question"], reference=obj["answer"], gold_lines={doc.doc_id: gold},
        source=source,
        meta={"company": obj.get("company"), "question_type": obj.get("question_type"),
              "question_reasoning": obj.get("question_reasoning"),
              "justification": obj.get("justification"), "evidence": evidence},
    )
    return task, {"doc_name": doc.doc_id, "pages": sorted(pages), "n_gold_lines": len(gold),
                  "problems": problems}


def gold_pages_report(gold: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "totals": {"n_tasks": len(gold),
                   "n_without_gold_lines": sum(1 for r in gold.values() if not r["n_gold_lines"]),
                   "n_with_problems": sum(1 for r in gold.values() if r["problems"])},
        "tasks": gold,
    }


def report_missing_pdfs(dataset: Dataset, missing: list[dict[str, Any]], pdf_dir: Path) -> None:
    if not missing:
        return
    docs_missing = sorted({m["doc_name"] for m in missing})
    dataset.reports["missing_pdfs"] = {
        "n_questions_skipped": len(missing), "n_documents_missing": len(docs_missing),
        "documents": docs_missing, "questions": missing,
    }
    dataset.notes.append(
        f"{len(missing)} question(s) skipped: their PDFs ({len(docs_missing)} filings) are "
        f"absent from {pdf_dir} (see the missing_pdfs report)")


def note_evidence_problems(dataset: Dataset) -> None:
    bad = dataset.reports["gold_pages"]["totals"]["n_with_problems"]
    if bad:
        dataset.notes.append(f"{bad} task(s) have evidence that does not map to gold lines "
                             "(see the gold_pages report)")


@register_adapter("financebench")
def load_financebench(cfg: Any, project_root: Path) -> Dataset:
    root, info = open_root(cfg, project_root)
    cache_dir, workers, max_words = parse_options(cfg, project_root)
    questions_path = root / QUESTIONS
    limit = cfg.limit if cfg.limit is not None and cfg.limit > 0 else None
    chosen, missing = choose_questions(questions_path, root, info, limit)
    pdfs = sorted({root / PDFS / f"{obj['doc_name']}.pdf" for _, obj in chosen})
    documents, pages_of, stats = load_filings(pdfs, info, cache_dir, workers, max_words)
    built = [qa_task(obj, documents[obj["doc_name"]], len(pages_of[obj["doc_name"]]),
                     questions_path, n, cfg.name) for n, obj in chosen]
    dataset = Dataset(cfg.name, Corpus(documents), [task for task, _ in built])
    dataset.reports["pdf_parsing"] = stats
    dataset.reports["gold_pages"] = gold_pages_report({task.id: gold for task, gold in built})
    report_missing_pdfs(dataset, missing, root / PDFS)
    note_evidence_problems(dataset)
    if limit is not None:
        dataset.notes.append(f"dataset.limit={limit}: the first {len(dataset.tasks)} "
                             f"answerable questions; {len(pdfs)} PDF(s) loaded")
    task_lines = {obj["financebench_id"]: n for n, obj in chosen}
    return validate(dataset, questions_path, task_lines)


if __name__ == "__main__":  # a PDF-parsing worker (_ParseWorkers)
    serve_parse_jobs()
