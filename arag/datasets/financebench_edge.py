"""Edge cases over FinanceBench filings: questions whose documents hold no answer.

For every 10-K of FinanceBench whose PDF is present (``doc_name`` order), three tasks
built from the filing's company and fiscal year, each marked ``answerable=false`` and
saying in ``Task.meta["expected_behaviour"]`` (and as its reference) what a good answer
does:

* ``<doc>:out_of_scope`` -- a question no annual report answers (the share price a year
  ahead): the answer should say the filing does not say and not forecast one;
* ``<doc>:missing_source`` -- a question about the company's 10-K for a fiscal year five
  years later, which is not in the corpus: the answer should say that filing is not among
  the documents rather than answer from this one;
* ``<doc>:false_premise`` -- a leading question that presumes the company filed for
  bankruptcy in that year: the answer should reject the premise.

Retrieval is not scored on these tasks (there is no evidence to find); the
``no_evidence`` scorer asks the judge whether each answer declined as expected
(``no_evidence_accuracy``). ``dataset.limit=N`` keeps the first N tasks and parses only
the filings they need. Options: those of ``dataset=financebench``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from arag.datasets.base import Dataset, DatasetError, register_adapter, validate
from arag.datasets.financebench import PDFS, load_filings, open_root, parse_options
from arag.records import Corpus, Document, Task

EDGE_CASES = {
    "out_of_scope": (
        "What will {company}'s share price be at the end of the year after {period}?",
        "Say that the filing does not give a future share price and do not forecast one."),
    "missing_source": (
        "According to {company}'s 10-K for FY{later}, what was its total revenue?",
        "Say that {company}'s 10-K for FY{later} is not among the documents provided, "
        "instead of answering from another filing."),
    "false_premise": (
        "Why did {company} file for bankruptcy in {period}?",
        "Reject the premise: the filing reports no bankruptcy in {period}."),
}


def edge_tasks(doc: Document, source: str) -> list[Task]:
    """The three edge cases of one filing."""
    year = re.search(r"(\d{4})", doc.period)
    later = int(year.group(1)) + 5 if year else "a later year"
    company = doc.company or doc.doc_id.split("_")[0]
    fields = {"company": company, "period": doc.period, "later": later}
    return [Task(id=f"{doc.doc_id}:{kind}", task_type="qa", doc_ids=(doc.doc_id,),
                 question=question.format(**fields), reference=expected.format(**fields),
                 gold_lines=None, source=source, answerable=False,
                 meta={"edge_case": kind, "expected_behaviour": expected.format(**fields)})
            for kind, (question, expected) in EDGE_CASES.items()]


@register_adapter("financebench_edge")
def load_financebench_edge(cfg: Any, project_root: Path) -> Dataset:
    root, info = open_root(cfg, project_root)
    cache_dir, workers, max_words = parse_options(cfg, project_root)
    filings = [root / PDFS / f"{name}.pdf" for name, meta in sorted(info.items())
               if str(meta.get("doc_type", "")).lower().startswith("10k")
               and (root / PDFS / f"{name}.pdf").exists()]
    if not filings:
        raise DatasetError(f"no 10-K PDF found under {root / PDFS}; the edge cases are built "
                           "from 10-K filings")
    limit = cfg.limit if cfg.limit is not None and cfg.limit > 0 else None
    if limit is not None:
        filings = filings[:math.ceil(limit / len(EDGE_CASES))]
    documents, _, stats = load_filings(filings, info, cache_dir, workers, max_words)
    tasks = [t for doc in documents.values() for t in edge_tasks(doc, cfg.name)][:limit]
    used = {t.doc_ids[0] for t in tasks}
    dataset = Dataset(cfg.name, Corpus({k: v for k, v in documents.items() if k in used}), tasks)
    dataset.reports["pdf_parsing"] = stats
    return validate(dataset)
