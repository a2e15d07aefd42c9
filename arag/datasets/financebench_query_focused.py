"""FinanceBench query-focused summaries (the plan's Type 3): question-driven topics over one
filing, with the question's evidence pages as gold and silver references.

Each FinanceBench question whose PDF is present and whose evidence maps to lines of its
filing becomes one ``summarization`` task in the ``query_focused`` style: "Summarize what
<company>'s <period> <filing> says about the following: <question>". The question's
evidence pages are the retrieval gold (every line on them), as in ``dataset=financebench``;
FinanceBench's short answer is kept in ``Task.meta["short_answer"]`` for reading, not
scored. Questions whose evidence maps to no line are left out (the ``query_focused``
report lists them).

The reference is a silver summary written once by ``dataset.reference_model`` from the
evidence pages (the same machinery, response cache and spot-check file as
``dataset=financebench_qfs``: ``<cache_dir>/financebench_query_focused/spot_check_<model>.md``);
without a model each task's reference is empty with the reason, so reference-based
metrics are null with it. Options: those of ``dataset=financebench`` plus
``spot_check_fraction``, ``reference_words`` and ``reference_concurrency``.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

from arag.datasets.base import Dataset, register_adapter, validate
from arag.datasets.financebench import OPTIONS as FINANCEBENCH_OPTIONS
from arag.datasets.financebench import load_financebench
from arag.datasets.financebench_qfs import ReferenceSpec, attach_references, read_options
from arag.records import Task

STYLE = "query_focused"
REFERENCES = ReferenceSpec(STYLE, "financebench_query_focused", "query_focused")
QUESTION = "Summarize what {company}'s {period} {doc_type} says about the following: {question}"


def topic_task(qa: Task, company: str, period: str, doc_type: str) -> Task:
    """The query-focused summarization task of one FinanceBench question."""
    doc_id = qa.doc_ids[0]
    pages = sorted(e["page"] for e in qa.meta.get("evidence", []))
    return replace(qa, id=f"{qa.id}:topic", task_type="summarization", reference="",
                   question=QUESTION.format(company=company, period=period, doc_type=doc_type,
                                            question=qa.question),
                   meta={"short_answer": qa.reference, "financebench_id": qa.id,
                         "section": "evidence pages", "pages": [pages[0], pages[-1]],
                         "evidence_pages": pages, "pages_by_doc": {doc_id: [pages[0],
                                                                            pages[-1]]}})


@register_adapter("financebench_query_focused")
def load_financebench_query_focused(cfg: Any, project_root: Path) -> Dataset:
    opts = read_options(cfg, project_root)
    # the questions and filings as dataset=financebench reads them (its options only)
    qa_cfg = copy.deepcopy(cfg)
    qa_cfg.options = {k: v for k, v in (cfg.options or {}).items()
                      if k in FINANCEBENCH_OPTIONS}
    qa = load_financebench(qa_cfg, project_root)
    tasks, left_out = [], []
    for task in qa.tasks:
        if not any((task.gold_lines or {}).values()):
            left_out.append(task.id)
            continue
        doc = qa.corpus.documents[task.doc_ids[0]]
        tasks.append(topic_task(task, task.meta.get("company") or doc.company, doc.period,
                                doc.doc_type.replace("10K", "10-K").replace("10Q", "10-Q")))
    dataset = Dataset(cfg.name, qa.corpus, tasks)
    dataset.reports.update(qa.reports)
    dataset.notes.extend(qa.notes)
    dataset.reports["query_focused"] = {"n_tasks": len(tasks), "left_out": left_out,
                                        "why_left_out": "the question's evidence maps to no "
                                                        "line of its filing"}
    if left_out:
        dataset.notes.append(f"{len(left_out)} question(s) left out: their evidence maps to no "
                             "line of the filing (see the query_focused report)")
    attach_references(cfg, opts, dataset, REFERENCES)
    return validate(dataset)
