"""FinanceBench query-focused summaries: two tasks per 10-K, with silver references.

What a task is
--------------
For every 10-K of FinanceBench whose PDF is present (``doc_name`` order), two
summarization tasks in the ``section`` style (each summarizes one named section of the
filing, and its gold is that whole section):

* ``<doc_name>:risk_factors`` -- the key risk factors, from Item 1A (Risk Factors);
* ``<doc_name>:operational_highlights`` -- the major operational highlights, from Item 7
  (Management's Discussion and Analysis).

The filings are the same page-aware documents ``dataset=financebench`` reads (same parser,
same parse cache). A section's *relevant pages* run from its heading (``Item 1A. Risk
Factors``; ``Item 7. Management's Discussion ...``) to the next item's heading (Item 1B or
2; Item 7A or 8); table-of-contents pages (six or more item numbers) are passed over, and
a section is cut at ``max_section_pages``. Every line on the relevant pages is retrieval
gold. A filing whose section heading cannot be found gets no task for it; the ``sections``
report lists every filing's pages or why it has none.

Silver references
-----------------
``dataset/reference_model=claude-sonnet-4-6`` (any option of that group; default ``none``)
writes each reference from the relevant pages, with the same prompt the systems get (the
relevant pages in place of retrieved context) and ``reference_words`` as the target
length. Calls go through the content-addressed response cache under ``cache_dir``, so a
reference is paid for once; a failed call leaves that task without a reference (reported)
and the next load asks again. A share ``spot_check_fraction`` of the references (at least
one; chosen by a stable hash of the task id) is written with the page numbers and the
question to ``<cache_dir>/financebench_qfs/spot_check_<model>.md`` for a human to check
against the filing, and logged with every run (``qfs_spot_check.md``).

Without a real model (``none``, or the offline model) the tasks, pages and gold are
derived all the same; each task's reference is empty with the reason in
``Task.meta["reference_missing"]``, so reference-based metrics (ROUGE, BERTScore, G-Eval
coverage, numeric recall) are null with that reason, and a note says what to set.

``dataset.limit=N`` keeps the first N tasks and parses only the filings they need.
Options: those of ``dataset=financebench`` plus ``spot_check_fraction`` (0.1),
``max_section_pages`` (40), ``reference_words`` (the run's ``target_length``) and
``reference_concurrency`` (4 calls at once).
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from arag.agent.prompts import system_prompt, task_prompt
from arag.datasets.base import Dataset, DatasetError, register_adapter, validate
from arag.datasets.financebench import (
    PDFS,
    clean_page,
    load_filings,
    open_root,
    parse_options,
)
from arag.files import write_text_atomically
from arag.llm import ModelError, Prices, make_model
from arag.llm.cache import CachedModel
from arag.records import Corpus, Document, Task

log = logging.getLogger(__name__)

OPTIONS = frozenset({"spot_check_fraction", "max_section_pages", "reference_words",
                     "reference_concurrency"})
STYLE = "section"
_SEP = r"[\s.:\-\u2013\u2014]{0,6}"  # "Item 1A. Risk", "ITEM 1A RISK", "Item 1A. - Risk"
ITEM_NUMBER = re.compile(r"\bitem\s*(\d{1,2}[abc]?)\b", re.IGNORECASE)
CONTENTS_MIN_ITEMS = 6  # a page naming this many different items is a table of contents
# a heading is in capitals, or starts a page, or follows a sentence, a page number, "Table
# of Contents", "Index", "[Reserved]" or "PART II"; "see Item 1A" and "Part II, Item 7,"
# refer to one
HEADING_AFTER = re.compile(r"(?:[.!?:\]]|\d|contents|index|\bpart\s+i{1,3}v?)$", re.IGNORECASE)


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    question: str
    start: re.Pattern[str]
    end: re.Pattern[str]


def item_heading(*alternatives: tuple[str, str]) -> re.Pattern[str]:
    """``Item <number>. <Title>`` for any of (number, title); PDF text often splits a word
    ("RIS K FACTORS", "DISCUSSI ON"), so a title's letters may have a space between them."""
    def title(text: str) -> str:
        return r"\W{0,3}".join(r"\s?".join(map(re.escape, word)) for word in text.split())

    return re.compile("|".join(rf"\bitem\s*{number}{_SEP}{title(words)}"
                               for number, words in alternatives), re.IGNORECASE)


SECTIONS = (
    Section("risk_factors", "Item 1A. Risk Factors",
            "What are the key risk factors {company} describes in its {period} 10-K? Summarize "
            "them.",
            item_heading(("1a", "risk factors")),
            item_heading(("1b", "unresolved"), ("2", "properties"))),
    Section("operational_highlights", "Item 7. Management's Discussion and Analysis",
            "Summarize the major operational highlights of {company} in its {period} 10-K.",
            item_heading(("7", "management s discussion"), ("7", "managements discussion")),
            item_heading(("7a", "quantitative"), ("8", "financial statements"))),
)
NO_MODEL = ("silver references need a real model: set dataset/reference_model=claude-sonnet-4-6 "
            "(or another option of that group) with ANTHROPIC_API_KEY in the environment")


def is_contents(page: str) -> bool:
    return len({m.group(1).lower() for m in ITEM_NUMBER.finditer(page)}) >= CONTENTS_MIN_ITEMS


def heading(pattern: re.Pattern[str], text: str, pos: int = 0) -> re.Match[str] | None:
    """The first match of ``pattern`` from ``pos`` that stands where a heading stands."""
    for match in pattern.finditer(text, pos):
        before = text[:match.start()].rstrip()
        if not before or HEADING_AFTER.search(before) or match.group(0).isupper():
            return match
    return None


def find_section(pages: list[str], section: Section, max_pages: int
                 ) -> tuple[tuple[int, int] | None, str]:
    """(first page, last page) of a section (1-based, inclusive), or None; and a note."""
    return find_in_clean_pages([clean_page(p) for p in pages], section, max_pages)


def find_in_clean_pages(texts: list[str], section: Section, max_pages: int
                        ) -> tuple[tuple[int, int] | None, str]:
    """``find_section`` on pages already through ``clean_page`` (as ``load_filings`` gives
    them: a filing's pages are cleaned once for its sentences and both sections)."""
    for number, text in enumerate(texts, start=1):
        start = heading(section.start, text)
        if start is None or is_contents(text):
            continue
        last = min(len(texts), number + max_pages - 1)
        for end_page in range(number, last + 1):
            offset = start.end() if end_page == number else 0
            end = heading(section.end, texts[end_page - 1], offset)
            if end is not None:
                # the next item starting at the top of a page ends the section on the page before
                if end_page > number and not texts[end_page - 1][:end.start()].strip():
                    end_page -= 1
                return (number, end_page), ""
        return (number, last), (f"no end heading within {max_pages} pages of page {number}; "
                                f"cut at page {last}")
    return None, f"no '{section.title}' heading outside the table of contents"


def section_lines(doc: Document, pages: tuple[int, int]) -> tuple[int, ...]:
    assert doc.line_pages is not None
    return tuple(i for i, p in enumerate(doc.line_pages, start=1) if pages[0] <= p <= pages[1])


@dataclass
class Options:
    cache_dir: Path
    workers: int | None
    max_words: int
    spot_check_fraction: float
    max_section_pages: int
    reference_words: int
    reference_concurrency: int


def read_options(cfg: Any, project_root: Path) -> Options:
    cache_dir, workers, max_words = parse_options(cfg, project_root, OPTIONS)
    opts = dict(cfg.options or {})
    fraction = opts.get("spot_check_fraction", 0.1)
    checks = [("spot_check_fraction", isinstance(fraction, int | float) and 0 < fraction <= 1,
               "a share between 0 (exclusive) and 1", 0.1)]
    values: dict[str, Any] = {}
    for key, default, minimum in (("max_section_pages", 40, 1), ("reference_words", 120, 10),
                                  ("reference_concurrency", 4, 1)):
        value = opts.get(key) if opts.get(key) is not None else default
        checks.append((key, isinstance(value, int) and value >= minimum,
                       f"a whole number >= {minimum}", default))
        values[key] = value
    for key, ok, must, example in checks:
        if not ok:
            raise DatasetError(f"dataset.options.{key}={opts.get(key)!r} is invalid: it must be "
                               f"{must}. Fix: dataset.options.{key}={example}")
    return Options(cache_dir, workers, max_words, float(fraction), **values)


def spot_check_ids(task_ids: list[str], fraction: float) -> list[str]:
    """A stable sample: the ceil(fraction * n) ids with the smallest hash, in task order."""
    if not task_ids:
        return []
    n = max(1, math.ceil(fraction * len(task_ids)))
    chosen = set(sorted(task_ids, key=lambda t: hashlib.sha256(t.encode()).hexdigest())[:n])
    return [t for t in task_ids if t in chosen]


@dataclass(frozen=True)
class ReferenceSpec:
    """How a derived dataset's silver references are written and reported."""

    style: str  # the summarization style of the prompt the reference model gets
    folder: str  # spot checks go to <cache_dir>/<folder>/spot_check_<model>.md
    report: str  # reports <report>_references.json and <report>_spot_check.md


QFS_REFERENCES = ReferenceSpec(STYLE, "financebench_qfs", "qfs")


class PendingReferences:
    """The silver references still to be written, one call per task (``load_dataset`` makes
    them; a dry run only prices them). Calls go through the response cache."""

    def __init__(self, model_cfg: Any, opts: Options, spec: ReferenceSpec = QFS_REFERENCES):
        self.model_cfg = model_cfg
        self.opts = opts
        self.spec = spec

    def requests(self, dataset: Dataset) -> dict[str, dict[str, Any]]:
        return {t.id: {"system": system_prompt("summarization", agentic=False),
                       "messages": [{"role": "user", "content": task_prompt(
                           t, self.spec.style, self.opts.reference_words,
                           dataset.corpus.excerpt(t.gold_lines or {}))}],
                       "max_tokens": self.model_cfg.max_output_tokens, "temperature": 0.0}
                for t in dataset.tasks}

    def apply(self, dataset: Dataset) -> None:
        model = CachedModel(make_model(self.model_cfg), self.opts.cache_dir, "read_write")
        prices = Prices.from_config(self.model_cfg)
        requests = self.requests(dataset)

        def one(task_id: str) -> Any:
            try:
                return model.complete(**requests[task_id])
            except ModelError as exc:
                return exc

        log.info("%s: %d silver reference(s) from %s (cached under %s)", dataset.name,
                 len(requests), model.name, model.folder)
        references: dict[str, str] = {}
        failures: dict[str, str] = {}
        cost = 0.0
        with ThreadPoolExecutor(self.opts.reference_concurrency) as pool:
            for task_id, reply in zip(requests, pool.map(one, requests), strict=True):
                if isinstance(reply, ModelError):
                    failures[task_id] = str(reply)
                    log.warning("%s: no reference for %s: %s", dataset.name, task_id, reply)
                elif not reply.text.strip():
                    failures[task_id] = f"the model wrote an empty reference ({reply.stop_reason})"
                else:
                    references[task_id] = reply.text.strip()
                    cost += 0.0 if reply.cached else prices.cost_usd(reply.usage)
        dataset.reports[f"{self.spec.report}_references"] = {
            "model": self.model_cfg.name, "model_id": self.model_cfg.model_id,
            "n_written": len(references), "n_from_cache": model.hits,
            "n_failed": len(failures), "failures": failures, "cost_usd": round(cost, 6),
            "reference_words": self.opts.reference_words}
        if failures:
            dataset.notes.append(f"{len(failures)} silver reference(s) could not be written "
                                 f"(see the {self.spec.report}_references report); the next "
                                 "run asks again")
        dataset.tasks = [with_reference(t, references.get(t.id, ""),
                                        f"reference generation failed: {failures.get(t.id)}")
                         for t in dataset.tasks]
        self.spot_check(dataset)

    def spot_check(self, dataset: Dataset) -> None:
        """A share of the references, to a file for a person and to the run's artifacts."""
        written = [t for t in dataset.tasks if t.reference]
        ids = spot_check_ids([t.id for t in written], self.opts.spot_check_fraction)
        if not ids:
            return
        text = spot_check_markdown(written, ids, self.model_cfg.name)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(self.model_cfg.model_id))
        path = self.opts.cache_dir / self.spec.folder / f"spot_check_{safe}.md"
        write_text_atomically(path, text)
        dataset.reports[f"{self.spec.report}_spot_check"] = text
        dataset.notes.append(f"{len(ids)} of {len(written)} silver references written for human "
                             f"review to {path}")


def filing_pages(task: Task) -> dict[str, list[int]]:
    """doc_id -> [first, last] relevant page of each filing the task reads."""
    return task.meta.get("pages_by_doc") or {task.doc_ids[0]: task.meta["pages"]}


def spot_check_markdown(tasks: list[Task], ids: list[str], model: str) -> str:
    by_id = {t.id: t for t in tasks}
    parts = [f"# Spot check: silver references by {model}\n",
             f"{len(ids)} of {len(tasks)} references, chosen by a stable hash of the task id. "
             "Read each against the named pages of the filing and note any fact that is not "
             "there or is misstated.\n"]
    for task_id in ids:
        task = by_id[task_id]
        filings = "".join(f"- filing: `{doc}.pdf`, pages {first}-{last} ({task.meta['section']})\n"
                          for doc, (first, last) in filing_pages(task).items())
        parts.append(f"## {task_id}\n\n{filings}- question: {task.question}\n\n"
                     f"{task.reference}\n")
    return "\n".join(parts)


def section_task(doc: Document, texts: list[str], section: Section, max_pages: int,
                 source: str) -> tuple[Task | None, dict[str, Any]]:
    """The task for one section of a filing (None when it cannot be found), and its report;
    ``texts``: its pages through ``clean_page``."""
    found, note = find_in_clean_pages(texts, section, max_pages)
    gold = section_lines(doc, found) if found else ()
    if found and not gold:
        found, note = None, f"pages {found} hold no extractable text"
    report = {"pages": list(found) if found else None, "n_lines": len(gold), "note": note}
    if found is None:
        return None, report
    company = doc.company or doc.doc_id.split("_")[0]
    return Task(
        id=f"{doc.doc_id}:{section.key}", task_type="summarization", doc_ids=(doc.doc_id,),
        question=section.question.format(company=company, period=doc.period), reference="",
        gold_lines={doc.doc_id: gold}, source=source,
        meta={"section": section.title, "section_key": section.key, "pages": list(found)},
    ), report


def merge_stats(total: dict[str, Any], more: dict[str, Any]) -> None:
    for key in ("n_pdfs", "n_from_cache", "n_parsed", "wall_seconds"):
        total[key] += more[key]
    total["parse_seconds"].update(more["parse_seconds"])


def derive_tasks(pdfs: list[Path], info: dict[str, dict[str, Any]], opts: Options,
                 limit: int | None, source: str):
    """(documents, tasks, per-filing section report, parsing stats) of the given 10-Ks; with
    a limit, filings are parsed a few at a time until there are enough tasks."""
    documents: dict[str, Document] = {}
    tasks: list[Task] = []
    sections_report: dict[str, Any] = {}
    stats: dict[str, Any] = {"n_pdfs": 0, "n_from_cache": 0, "n_parsed": 0, "parse_seconds": {},
                             "wall_seconds": 0.0}
    todo = list(pdfs)
    while todo and (limit is None or len(tasks) < limit):
        step = len(todo) if limit is None else math.ceil((limit - len(tasks)) / len(SECTIONS))
        batch, todo = todo[:step], todo[step:]
        docs, pages_of, batch_stats = load_filings(batch, info, opts.cache_dir, opts.workers,
                                                   opts.max_words)
        documents.update(docs)
        merge_stats(stats, batch_stats)
        for doc in docs.values():
            sections_report[doc.doc_id] = {}
            for section in SECTIONS:
                task, sections_report[doc.doc_id][section.key] = section_task(
                    doc, pages_of[doc.doc_id], section, opts.max_section_pages, source)
                if task is not None:
                    tasks.append(task)
    return documents, tasks, sections_report, stats


@register_adapter("financebench_qfs")
def load_financebench_qfs(cfg: Any, project_root: Path) -> Dataset:
    root, info = open_root(cfg, project_root)
    opts = read_options(cfg, project_root)
    filings = sorted(name for name, meta in info.items()
                     if str(meta.get("doc_type", "")).lower().startswith("10k"))
    present = [root / PDFS / f"{name}.pdf" for name in filings
               if (root / PDFS / f"{name}.pdf").exists()]
    if not present:
        raise DatasetError(f"no 10-K PDF found under {root / PDFS}; the query-focused tasks are "
                           "derived from 10-K filings")
    limit = cfg.limit if cfg.limit is not None and cfg.limit > 0 else None
    documents, tasks, sections_report, stats = derive_tasks(present, info, opts, limit, cfg.name)
    if limit is not None:
        tasks = tasks[:limit]
    used = {t.doc_ids[0] for t in tasks}
    dataset = Dataset(cfg.name, Corpus({k: v for k, v in documents.items() if k in used}), [])
    dataset.reports["pdf_parsing"] = stats
    dataset.reports["sections"] = {
        "n_filings": len(sections_report), "n_tasks": len(tasks),
        "n_sections_not_found": sum(1 for doc in sections_report.values()
                                    for s in doc.values() if s["pages"] is None),
        "filings": sections_report}
    missing_sections = dataset.reports["sections"]["n_sections_not_found"]
    if missing_sections:
        dataset.notes.append(f"{missing_sections} section(s) not found in their 10-K: no task "
                             "for them (see the sections report)")
    dataset.tasks = tasks
    attach_references(cfg, opts, dataset)
    return validate(dataset)


def attach_references(cfg: Any, opts: Options, dataset: Dataset,
                      spec: ReferenceSpec = QFS_REFERENCES) -> None:
    """References to be written by the reference model, or the reason there are none."""
    model_cfg = cfg.reference_model
    if model_cfg is None or model_cfg.provider in ("none", "offline"):
        # the offline model can only extract, it does not write references
        dataset.notes.append(f"no silver references: {NO_MODEL}")
        dataset.reports[f"{spec.report}_references"] = {"model": None, "reason": NO_MODEL}
        dataset.tasks = [with_reference(t, "", NO_MODEL) for t in dataset.tasks]
        return
    dataset.tasks = [with_reference(t, "", f"silver reference by {model_cfg.name} not written "
                                           "(dry run)") for t in dataset.tasks]
    dataset.pending = PendingReferences(model_cfg, opts, spec)


def with_reference(task: Task, reference: str, missing_reason: str) -> Task:
    meta = {k: v for k, v in task.meta.items() if k != "reference_missing"}
    if not reference:
        meta["reference_missing"] = missing_reason
    return replace(task, reference=reference, meta=meta)
