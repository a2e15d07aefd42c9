"""FinanceBench comparisons: how a company's results changed between two of its 10-Ks.

What a task is
--------------
For every company with 10-Ks of two or more fiscal years whose PDFs are present, one
summarization task in the ``comparison`` style over two of them (``doc_ids`` = the older
and the newer filing)::

    How did Adobe's revenue, margins and cash flow change from FY2016 to FY2017?

The pair is the two filings closest in time (the latest such pair on a tie), so most
tasks are year over year. Retrieval gold = every line of both filings' Item 7
(Management's Discussion and Analysis), found as ``dataset=financebench_qfs`` finds it
(same section finder, same ``max_section_pages`` cut). When a filing's MD&A cannot be
found (e.g. incorporated by reference from an exhibit), the next closest pair is tried;
a company with no pair whose two MD&As are both found gets no task. The ``comparisons``
report lists, per company, its filings, the pair chosen and every pair passed over with
the reason.

Silver references are written as for ``financebench_qfs`` (same machinery: the
``dataset/reference_model`` group, the response cache, a spot-check share for a person to
read), from both MD&As, in the ``comparison`` style; reports ``compare_references.json``
and ``compare_spot_check.md``. Without a reference model the tasks, pages and gold are
derived all the same and reference-based metrics are null with the reason.

``dataset.limit=N`` keeps the first N companies' tasks (company order) and parses only the
filings they need. Options: those of ``dataset=financebench_qfs``.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

from arag.datasets.base import Dataset, DatasetError, register_adapter, validate
from arag.datasets.financebench import PDFS, load_filings, open_root
from arag.datasets.financebench_qfs import (
    SECTIONS,
    Options,
    ReferenceSpec,
    attach_references,
    find_in_clean_pages,
    merge_stats,
    read_options,
    section_lines,
)
from arag.records import Corpus, Document, Task

log = logging.getLogger(__name__)

MDNA = next(s for s in SECTIONS if s.key == "operational_highlights")
QUESTION = "How did {company}'s revenue, margins and cash flow change from FY{old} to FY{new}?"
COMPARE_REFERENCES = ReferenceSpec("comparison", "financebench_compare", "compare")

Pair = tuple[str, str]  # (older filing, newer filing), doc_names


def ten_k_filings(root: Path, info: dict[str, dict[str, Any]]) -> dict[str, list[tuple[int, str]]]:
    """company -> [(fiscal year, doc_name)] of its 10-Ks with a PDF, one per year, by year."""
    by_company: dict[str, dict[int, str]] = {}
    for name, meta in sorted(info.items()):
        if not str(meta.get("doc_type", "")).lower().startswith("10k"):
            continue
        if not (root / PDFS / f"{name}.pdf").exists():
            continue
        try:
            year = int(meta.get("doc_period"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue  # no fiscal year to compare by
        by_company.setdefault(str(meta.get("company") or name.split("_")[0]), {}) \
            .setdefault(year, name)
    return {c: sorted(years.items()) for c, years in sorted(by_company.items())}


def candidate_pairs(filings: list[tuple[int, str]]) -> list[tuple[int, int, Pair]]:
    """Every (older year, newer year, pair), closest in time first, the latest on a tie."""
    pairs = [(old[0], new[0], (old[1], new[1])) for old, new in itertools.combinations(filings, 2)]
    return sorted(pairs, key=lambda p: (p[1] - p[0], -p[1]))


def mdna_gold(doc: Document, pages: list[str], opts: Options
              ) -> tuple[tuple[int, int] | None, tuple[int, ...], str]:
    """(MD&A pages, their lines, a note) of one filing (``pages``: through ``clean_page``,
    as ``load_filings`` gives them); pages None when not found."""
    found, note = find_in_clean_pages(pages, MDNA, opts.max_section_pages)
    gold = section_lines(doc, found) if found else ()
    if found and not gold:
        return None, (), f"MD&A pages {found} hold no extractable text"
    return found, gold, note


class Comparisons:
    """Derives the tasks company by company, parsing only the filings a pair needs."""

    def __init__(self, info: dict[str, dict[str, Any]], root: Path, opts: Options, source: str):
        self.info, self.root, self.opts, self.source = info, root, opts, source
        self.documents: dict[str, Document] = {}
        self.gold: dict[str, tuple[tuple[int, int] | None, tuple[int, ...], str]] = {}
        self.stats: dict[str, Any] = {"n_pdfs": 0, "n_from_cache": 0, "n_parsed": 0,
                                      "parse_seconds": {}, "wall_seconds": 0.0}

    def load(self, names: set[str]) -> None:
        todo = sorted(n for n in names if n not in self.documents)
        if not todo:
            return
        docs, pages_of, stats = load_filings([self.root / PDFS / f"{n}.pdf" for n in todo],
                                             self.info, self.opts.cache_dir, self.opts.workers,
                                             self.opts.max_words)
        merge_stats(self.stats, stats)
        for name, doc in docs.items():
            self.documents[name] = doc
            self.gold[name] = mdna_gold(doc, pages_of[name], self.opts)

    def task(self, company: str, old_year: int, new_year: int, pair: Pair) -> tuple[Task | None, str]:
        """The comparison task of a pair (None when an MD&A is missing) and why not."""
        missing = [f"{name}: {self.gold[name][2]}" for name in pair if self.gold[name][0] is None]
        if missing:
            return None, "; ".join(missing)
        pages = {name: list(self.gold[name][0] or ()) for name in pair}
        return Task(
            id=f"{pair[0]}~{pair[1]}:comparison", task_type="summarization", doc_ids=pair,
            question=QUESTION.format(company=company, old=old_year, new=new_year), reference="",
            gold_lines={name: self.gold[name][1] for name in pair}, source=self.source,
            meta={"section": MDNA.title, "company": company, "fiscal_years": [old_year, new_year],
                  "pages_by_doc": pages},
        ), ""

    def derive(self, filings: dict[str, list[tuple[int, str]]], limit: int | None
               ) -> tuple[list[Task], dict[str, Any]]:
        """Tasks (company order) and the per-company report; each round parses the filings
        of every waiting company's next pair at once."""
        report: dict[str, Any] = {c: {"filings": [n for _, n in f], "pair": None, "passed_over": []}
                                  for c, f in filings.items()}
        waiting = {c: candidate_pairs(f) for c, f in filings.items() if len(f) >= 2}
        tasks: dict[str, Task] = {}
        while waiting and (limit is None or len(tasks) < limit):
            room = len(waiting) if limit is None else limit - len(tasks)
            batch = list(waiting)[:room]
            self.load({name for c in batch for name in waiting[c][0][2]})
            for company in batch:
                old_year, new_year, pair = waiting[company].pop(0)
                task, why = self.task(company, old_year, new_year, pair)
                if task is not None:
                    tasks[company] = task
                    report[company]["pair"] = list(pair)
                else:
                    report[company]["passed_over"].append({"pair": list(pair), "why": why})
                if task is not None or not waiting[company]:
                    del waiting[company]
        ordered = [tasks[c] for c in filings if c in tasks]
        return ordered[:limit] if limit is not None else ordered, report


@register_adapter("financebench_compare")
def load_financebench_compare(cfg: Any, project_root: Path) -> Dataset:
    root, info = open_root(cfg, project_root)
    opts = read_options(cfg, project_root)
    filings = ten_k_filings(root, info)
    comparable = {c: f for c, f in filings.items() if len(f) >= 2}
    if not comparable:
        raise DatasetError(f"no company has 10-K PDFs of two fiscal years under {root / PDFS}; "
                           "the comparison tasks need two filings of one company")
    limit = cfg.limit if cfg.limit is not None and cfg.limit > 0 else None
    derive = Comparisons(info, root, opts, cfg.name)
    tasks, companies = derive.derive(comparable, limit)
    used = {d for t in tasks for d in t.doc_ids}
    dataset = Dataset(cfg.name, Corpus({k: v for k, v in derive.documents.items() if k in used}),
                      tasks)
    dataset.reports["pdf_parsing"] = derive.stats
    without = sorted(c for c, r in companies.items() if r["pair"] is None and r["passed_over"])
    dataset.reports["comparisons"] = {
        "n_companies_with_two_years": len(comparable), "n_tasks": len(tasks),
        "companies_without_task": without, "companies": companies}
    if without:
        dataset.notes.append(f"{len(without)} compan(y/ies) with two fiscal years got no task: "
                             "no pair of their filings has both MD&As (see the comparisons "
                             "report)")
    if not tasks:
        first = companies[without[0]]["passed_over"][0]["why"] if without else "none tried"
        raise DatasetError(f"no comparison task: no pair of 10-Ks under {root / PDFS} has both "
                           f"MD&A sections (Item 7) found (e.g. {first})")
    attach_references(cfg, opts, dataset, COMPARE_REFERENCES)
    return validate(dataset)
