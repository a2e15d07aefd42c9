"""Document sections (an earnings call's prepared remarks and Q&A, a filing's Items) and
which of them the chunks a system used touched."""

from __future__ import annotations

from pathlib import Path

from arag.datasets.sections import Section, call_sections, document_sections, filing_sections
from arag.records import Chunk, Document, Prediction, Task
from metrics.base import ScoringItem
from metrics.sections import NO_SECTIONS, SectionCoverageScorer
from tests.conftest import ROOT

REMARKS = tuple(f"Remark {i} about revenue and margins." for i in range(20))


def test_a_call_splits_at_the_hand_over_to_questions():
    lines = (*REMARKS, "With that, operator, please open the line for questions.",
             *(f"Analyst question {i}?" for i in range(6)))
    assert call_sections(lines) == (Section("Prepared remarks", 1, 21), Section("Q&A", 22, 27))
    # an announcement in the opening and a "before we move to Q&A" are not the hand-over
    early = ("We will take questions after the prepared remarks.", *lines)
    assert call_sections(early)[0].last == 22
    before = (*REMARKS[:10], "Before we move to Q&A, let me cover the outlook.", *REMARKS[10:])
    assert call_sections(before) == ()
    # a transcript that ends at its hand-over (ECTSum keeps prepared remarks only)
    assert call_sections((*REMARKS, "Operator, who has our first question?")) == ()
    sample = (ROOT / "data/sample/documents/CLVX_q3_2023.txt").read_text().splitlines()
    first, qa = call_sections(tuple(sample))
    assert "open the line for questions" in sample[first.last - 1] and qa.last == len(sample)


def test_a_filing_splits_at_its_item_headings_not_its_table_of_contents():
    lines = ("Annual report.", "Table of contents", "Item 1A. Risk Factors 12",
             "Item 7. Management's Discussion and Analysis 30", "Item 8. Financial Statements 50",
             "Intro text.", "Item 1A. Risk Factors", "Rates may rise.", "As described in Item 7, "
             "margins fell.", "Item 7. Management's Discussion and Analysis", "Revenue grew.",
             "Item 8. Financial Statements and Supplementary Data", "Balance sheet.")
    doc = Document("F", lines, doc_type="10K")
    assert [(s.name, s.first, s.last) for s in document_sections(doc)] == [
        ("Front matter", 1, 6), ("Item 1A Risk Factors", 7, 9),
        ("Item 7 Management's Discussion and Analysis", 10, 11),
        ("Item 8 Financial Statements and Supplementary Data", 12, 13)]
    assert filing_sections(("No headings here.",)) == ()
    assert document_sections(Document("E", lines, doc_type="EARNINGS")) == ()  # a release


def _item(read: list[str], sections, retrieves: bool = True) -> ScoringItem:
    task = Task("t", "summarization", ("D",), "Summarize.", "ref")
    pred = Prediction("t", "s", "naive", "m", "summarization", "Summarize.", ["D"], "ref",
                      predicted="an answer", retrieved_chunk_ids=read)
    chunks = {"D#L1-5": Chunk("D#L1-5", "D", 1, 5, "", ("a",) * 5)}
    return ScoringItem(pred, task, None, "", 50, retrieves, chunks=chunks,
                       sections={"D": sections})


def test_section_coverage_is_the_share_of_sections_a_used_chunk_overlaps():
    parts = (Section("Prepared remarks", 1, 20), Section("Q&A", 21, 40))
    remarks_only, both = SectionCoverageScorer().score([
        _item(["D#L1-5", "D#L6-12"], parts), _item(["D#L18-24"], parts)])
    assert remarks_only.values["section_coverage"] == 0.5
    assert [s["touched"] for s in remarks_only.values["sections_touched"]] == [True, False]
    assert both.values["section_coverage"] == 1.0  # one chunk across the hand-over
    unsplit, whole = SectionCoverageScorer().score([_item(["D#L1-5"], ()),
                                                    _item([], parts, retrieves=False)])
    assert unsplit.values["section_coverage"] is None
    assert unsplit.null_reasons["section_coverage"] == NO_SECTIONS
    assert "does not retrieve" in whole.null_reasons["section_coverage"]


def test_the_sample_sweep_records_sections_touched(make_cfg, tmp_path):
    from arag.datasets import load_dataset
    from arag.retrieval import build_chunks
    from arag.systems import SYSTEMS
    from runners.evaluate import evaluate

    cfg = make_cfg("dataset.limit=1")
    ds = load_dataset(cfg.dataset, ROOT)
    task = ds.tasks[0]
    pred = Prediction(task.id, "s", "naive", "m", "summarization", task.question,
                      list(task.doc_ids), task.reference, predicted="x",
                      retrieved_chunk_ids=[f"{task.doc_ids[0]}#L50-52"])
    chunks = build_chunks(ds.corpus, cfg.retrieval.chunk_size, cfg.retrieval.chunk_overlap)
    (record,) = evaluate([pred], {task.id: task}, ds.corpus, chunks,
                         [SectionCoverageScorer()], 50, SYSTEMS["naive"])
    assert record["section_coverage"] == 0.5
    assert [s["section"] for s in record["sections_touched"]] == ["Prepared remarks", "Q&A"]
    assert Path(ROOT / "conf/metrics/default.yaml").read_text().count("section_coverage") == 1
