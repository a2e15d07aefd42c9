"""dataset=folder: the user's own .txt/.md/.pdf documents, tasks optional.

Folders are made in each test: a transcript with a paragraph per line, a hard-wrapped
letter, Markdown with headings, lists and a table, a PDF with pages (fpdf2), with and
without tasks.jsonl, references and gold (by text, by line, by page).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arag.agent.prompts import task_prompt
from arag.datasets import DatasetError, load_dataset
from arag.retrieval.chunking import chunk_document
from report.analyses.caveats import caveat_notes
from runners.job import prepare
from runners.settings import read
from tests.conftest import ROOT, SHARED, all_runs, run_cli

TRANSCRIPT = [  # a paragraph per line, speaker names on lines of their own
    "Operator",
    "Good morning, and welcome to Acme Corp.'s third quarter 2024 earnings call. Today's "
    "call is being recorded.",
    "John Smith -- Chief Executive Officer",
    "Thank you. Revenue rose 8% to $452 million in the quarter, driven by strong demand in "
    "the U.S. market. Adjusted earnings per share were $1.12, compared with $0.98 a year ago.",
    "We expect full-year revenue of $1.80 billion to $1.85 billion.",
]
LETTER = """ACME ANNUAL LETTER

Dear shareholders, this was a year of steady progress for the company and its
employees. Revenue grew 12% to $2.1 billion, and operating margin expanded by
two points to 18.5%. We returned $300 million to shareholders.
"""
NOTES = """# Acme notes

## Results

Revenue rose **8%** to $452 million,
driven by the U.S. market. Margins improved.

- Cash flow was $120 million.
- Debt fell to $1.1 billion.

| metric | value |
|---|---|
| EPS | $1.12 |
"""
PAGES = [
    ["Acme Corp. Form 10-K", "Business overview. Acme makes industrial pumps in Ohio."],
    ["Results of operations. Net sales increased 9% to $3.2 billion in fiscal 2024.",
     "Gross margin was 41.5%, up from 39.0%."],
    ["Financial statements follow. Total assets were $5.4 billion."],
]


def write_pdf(path: Path, pages: list[list[str]]) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for paragraphs in pages:
        pdf.add_page()
        for text in paragraphs:
            pdf.multi_cell(0, 6, text)
            pdf.ln(4)
    pdf.output(str(path))
    return path


def write_folder(root: Path, tasks: list[dict] | None = None, pdf: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "acme_q3.txt").write_text("\n".join(TRANSCRIPT) + "\n")
    (root / "letter.txt").write_text(LETTER)
    (root / "notes.md").write_text(NOTES)
    if pdf:
        (root / "filings").mkdir(exist_ok=True)
        write_pdf(root / "filings" / "acme_10k.pdf", PAGES)
    if tasks is not None:
        (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return root


def load(make_cfg, root: Path, *overrides: str):
    cfg = make_cfg("dataset=folder", f"dataset.root={root}", *overrides)
    return load_dataset(cfg.dataset, ROOT), cfg


def test_without_tasks_each_document_is_one_summary_task_without_a_reference(tmp_path,
                                                                              make_cfg):
    ds, cfg = load(make_cfg, write_folder(tmp_path / "my_calls", pdf=False))
    assert cfg.dataset.name == "my_calls"  # the experiment's name: the folder's
    assert [t.id for t in ds.tasks] == ["acme_q3", "letter", "notes"]
    assert all(t.reference == "" and "has no tasks.jsonl" in t.meta["reference_missing"]
               for t in ds.tasks)
    call = ds.corpus.documents["acme_q3"]
    # a paragraph per line is split into sentences; speaker lines stay on their own
    assert call.lines[:4] == (
        "Operator",
        "Good morning, and welcome to Acme Corp.'s third quarter 2024 earnings call.",
        "Today's call is being recorded.", "John Smith -- Chief Executive Officer")
    assert "Adjusted earnings per share were $1.12, compared with $0.98 a year ago." in call.lines
    assert ds.reports["positions"]["acme_q3"]["lines"] == [1, 2, 2, 3, 4, 4, 4, 5]
    # hard-wrapped lines run on; the heading does not
    letter = ds.corpus.documents["letter"].lines
    assert letter[0] == "ACME ANNUAL LETTER"
    assert letter[1] == ("Dear shareholders, this was a year of steady progress for the "
                         "company and its employees.")
    assert ds.reports["positions"]["letter"]["lines"] == [1, 3, 4, 5]
    assert any("3 of 3 task(s) have no reference" in n for n in ds.notes)


def test_markdown_headings_lists_and_tables_become_sentences_without_markup(tmp_path,
                                                                           make_cfg):
    ds, _ = load(make_cfg, write_folder(tmp_path / "f", pdf=False))
    assert ds.corpus.documents["notes"].lines == (
        "Acme notes", "Results", "Revenue rose 8% to $452 million, driven by the U.S. market.",
        "Margins improved.", "Cash flow was $120 million.", "Debt fell to $1.1 billion.",
        "metric | value", "EPS | $1.12")
    assert ds.reports["positions"]["notes"]["lines"] == [1, 3, 5, 6, 8, 9, 11, 13]


def test_a_pdf_keeps_its_pages_and_gold_by_page_and_text(tmp_path, make_cfg):
    root = write_folder(tmp_path / "f", tasks=[{
        "id": "results", "doc_ids": ["filings/acme_10k"],
        "question": "Summarize Acme's fiscal 2024 results.",
        "reference": "net sales rose 9% to $3.2 billion; gross margin 41.5%.",
        "gold": [{"page": 2}, "Total assets were $5.4 billion."]}])
    ds, cfg = load(make_cfg, root)
    doc = ds.corpus.documents["filings/acme_10k"]
    assert doc.line_pages is not None and sorted(set(doc.line_pages)) == [1, 2, 3]
    page_2 = [n for n, p in enumerate(doc.line_pages, start=1) if p == 2]
    assert doc.lines[page_2[0] - 1].startswith("Results of operations.")
    total = doc.lines.index("Total assets were $5.4 billion.") + 1
    assert ds.tasks[0].gold_lines == {"filings/acme_10k": (*page_2, total)}
    chunks = chunk_document(doc, 120)  # chunked as FinanceBench: never across a page
    assert [c.header.endswith(f"| PAGE: {p}]") for c, p in zip(chunks, (1, 2, 3),
                                                                 strict=True)]
    assert ds.reports["positions"]["filings/acme_10k"]["pages"] == list(doc.line_pages)


def test_tasks_file_gives_references_gold_by_text_and_line_style_and_length(tmp_path,
                                                                           make_cfg):
    root = write_folder(tmp_path / "f", pdf=False, tasks=[
        {"id": "q3", "doc_ids": ["acme_q3"], "question": "Summarize Acme's third quarter.",
         "reference": "q3 revenue rose 8% to $452 million.",
         "gold": ["revenue rose 8%   to $452 MILLION in the quarter",  # case, spaces ignored
                  {"line": 5}, "Revenue fell 40% in Antarctica."],
         "style": "earnings_call", "target_length": 30},
        {"doc_id": "letter", "instruction": "What did the letter say about margins?",
         "task_type": "qa", "gold": [{"text": "operating margin expanded by two points"}]},
        {"id": "both", "doc_ids": ["acme_q3", "letter"], "question": "Compare the two.",
         "gold": ["We returned $300 million", {"doc_id": "acme_q3", "line": 1}]}])
    ds, _ = load(make_cfg, root)
    q3, letter, both = ds.tasks
    # text is looked up in each of the task's documents; a line needs its doc_id
    assert both.gold_lines == {"letter": (4,), "acme_q3": (1,)}
    lines = ds.corpus.documents["acme_q3"].lines
    assert [lines[n - 1] for n in q3.gold_lines["acme_q3"]] == [
        "Revenue rose 8% to $452 million in the quarter, driven by strong demand in the U.S. "
        "market.", "We expect full-year revenue of $1.80 billion to $1.85 billion."]
    # the passage that is not in the document is listed, not silently dropped
    assert ds.reports["gold"]["not_found"] == [{"task": "q3", "line": 1, "doc_id": "acme_q3",
                                                "text": "Revenue fell 40% in Antarctica."}]
    assert any("Antarctica" in n for n in ds.notes)
    # gold text across a wrapped line maps to the sentence it is in
    assert letter.id == "task-2" and letter.task_type == "qa" and letter.reference == ""
    assert letter.gold_lines == {"letter": (3,)} and "line 2" in letter.meta["reference_missing"]
    prompt = task_prompt(q3, "query_focused", 80)
    assert "<style>earnings_call</style>" in prompt and "at most 30 words" in prompt


@pytest.mark.slow
def test_five_mistakes_are_reported_in_one_run_that_leaves_no_run(tmp_path):
    root = write_folder(tmp_path / "bad", pdf=False, tasks=[])
    (root / "empty.txt").write_text("\n\n")
    (root / "deck.pptx").write_bytes(b"PK\x03\x04")
    (root / "tasks.jsonl").write_text("\n".join([
        '{"question": "Summarize.", "doc_ids": ["acme_q4"]}',
        '{"question": "Summarize.", "doc_ids": ["acme_q3"], "refrence": "q3 revenue rose."}',
        '{"question": "Summarize.", "doc_ids": ["acme_q3"], "gold": [{"line": 99}]}',
    ]) + "\n")
    done = run_cli(tmp_path, "system=arag,naive,stuffing", "dataset=folder",
                   f"dataset.root={root}")
    assert done.returncode != 0
    err = done.stderr
    assert "5 problem(s) in the folder" in err, err[-3000:]
    for expected in (f"{root / 'deck.pptx'}: .pptx is not a document type",
                     f"{root / 'empty.txt'}: the document is empty",
                     "tasks.jsonl:1: document 'acme_q4' is not in the folder. Fix: did you "
                     "mean 'acme_q3'?",
                     "tasks.jsonl:2: unknown field 'refrence'. Fix: did you mean 'reference'?",
                     "tasks.jsonl:3: gold[0]: line(s) [99] of 'acme_q3' hold no text",
                     ):
        assert expected in err, expected
    assert all_runs(tmp_path) == []


def test_every_mistake_of_a_folder_is_found_in_one_load(tmp_path, make_cfg):
    root = write_folder(tmp_path / "bad", pdf=False, tasks=[])
    (root / "latin1.txt").write_bytes("Caf\xe9 revenue rose.".encode("latin-1"))
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (root / "tasks.jsonl").write_text("\n".join([
        '{"question": "Summarize." "doc_ids": []}',
        '{"doc_ids": ["acme_q3"], "style": "haiku", "target_length": 0}',
        '{"question": "Q", "doc_ids": ["acme_q3", "letter"], "gold": [{"line": 1}]}',
        '{"question": "Q", "doc_ids": ["notes"], "gold": [{"page": 1}]}',
    ]) + "\n")
    with pytest.raises(DatasetError) as caught:
        load(make_cfg, root)
    found = [str(p) for p in caught.value.problems]  # type: ignore[attr-defined]
    expected = ["broken.pdf: pdfium cannot read this PDF", "latin1.txt: not valid UTF-8",
                "tasks.jsonl:1: malformed JSON", "tasks.jsonl:2: missing 'question' or "
                "'instruction'", "tasks.jsonl:2: style 'haiku' is unknown",
                "tasks.jsonl:2: target_length must be a positive number",
                "tasks.jsonl:3: gold[0] does not say which of the task's 2 documents",
                "tasks.jsonl:4: gold[0] gives a page of 'notes', which has lines, not pages"]
    assert len(found) == len(expected), found
    for text, problem in zip(expected, found, strict=True):
        assert text in problem and "Fix: " in problem


def test_a_form_feed_in_a_line_keeps_gold_by_line_and_links_out_and_twice_given_keys_are_refused(
        tmp_path, make_cfg):
    root = write_folder(tmp_path / "ff", pdf=False, tasks=[
        {"id": "q3", "doc_ids": ["acme_q3"], "question": "Summarize.", "gold": [{"line": 5}]}])
    transcript = [*TRANSCRIPT]
    transcript[0] = "Operator\x0c(page 2)\u2028speaking"  # separators inside line 1
    (root / "acme_q3.txt").write_text("\n".join(transcript) + "\n")
    ds, _ = load(make_cfg, root)
    lines = ds.corpus.documents["acme_q3"].lines
    assert [lines[n - 1] for n in ds.tasks[0].gold_lines["acme_q3"]] == [
        "We expect full-year revenue of $1.80 billion to $1.85 billion."]
    (tmp_path / "secret.txt").write_text("A line from outside the folder.\n")
    (root / "linked.txt").symlink_to(tmp_path / "secret.txt")
    (root / "tasks.jsonl").write_text(
        '{"question": "Q", "doc_ids": ["letter"], "question": "Other?"}\n')
    with pytest.raises(DatasetError) as caught:
        load(make_cfg, root)
    found = [str(p) for p in caught.value.problems]  # type: ignore[attr-defined]
    assert any("linked.txt: a link to" in p and "outside dataset.root" in p for p in found)
    assert any("tasks.jsonl:1: the key 'question' appears twice" in p for p in found)


def test_a_missing_root_says_how_to_set_it(tmp_path, make_cfg):
    with pytest.raises(DatasetError, match="dataset.root=<the folder"):
        load(make_cfg, tmp_path / "nowhere")


def test_budget_warning_for_short_documents(tmp_path, make_cfg):
    cfg = make_cfg("dataset=folder", f"dataset.root={write_folder(tmp_path / 'f')}")
    job = prepare(read(cfg), call_models=False)
    assert job.dataset_metrics["docs_within_context_budget_share"] == 1.0
    assert any("4 of 4 documents (100%) fit inside the retrieval context budget of 5 chunks"
               in n for n in job.dataset.notes)
    rows = [{"run": "arag", **job.dataset_metrics}]
    notes = {n.kind: n for n in caveat_notes(rows)}
    assert notes["fits_budget"].counts == {"share": 1.0, "chunks": 5.0}
    assert notes["no_reference"].counts["tasks"] == 4


def test_no_budget_warning_for_ectsum(make_cfg):
    root = SHARED / "ectsum"
    if not root.is_dir():
        pytest.skip(f"ECTSum is not at {root}")
    job = prepare(read(make_cfg("dataset=ectsum", f"dataset.root={root}",
                                   "dataset.limit=20")), call_models=False)
    assert job.dataset_metrics["docs_within_context_budget_share"] < 0.2
    assert not any("context budget" in n for n in job.dataset.notes)
    kinds = {n.kind for n in caveat_notes([{"run": "arag", **job.dataset_metrics}])}
    assert not kinds & {"fits_budget", "no_reference"}


@pytest.mark.slow
def test_sweeps_of_the_three_systems_on_folders_score_what_applies(tmp_path):
    """One folder with tasks (references on some, gold by text, line and page; txt, md and
    PDF), one without tasks.jsonl: every run finishes; what has no reference or gold is
    null with the reason."""
    with_tasks = write_folder(tmp_path / "filings_q3", tasks=[
        {"id": "q3", "doc_ids": ["acme_q3"], "question": "Summarize Acme's third quarter.",
         "reference": "q3 revenue rose 8% to $452 million.\nq3 adjusted eps $1.12.",
         "gold": ["Revenue rose 8% to $452 million", {"line": 5}]},
        {"id": "10k", "doc_ids": ["filings/acme_10k"], "question": "Summarize fiscal 2024.",
         "gold": [{"page": 2}]},
        {"id": "notes", "doc_ids": ["notes"], "question": "Summarize the notes.",
         "reference": "revenue rose 8% to $452 million; cash flow $120 million."}])
    without = write_folder(tmp_path / "letters", pdf=False)
    for root, reference_free in ((with_tasks, {"10k"}), (without, {"acme_q3", "letter",
                                                                    "notes"})):
        done = run_cli(tmp_path, "system=arag,naive,stuffing", "dataset=folder",
                       f"dataset.root={root}")
        assert done.returncode == 0, done.stderr[-3000:]
        assert "fit inside the retrieval context budget" in done.stdout  # a caveat line each
        assert "have no reference: reference metrics null for them" in done.stdout
        check_runs(tmp_path, root.name, reference_free)


def check_runs(tmp: Path, experiment: str, reference_free: set[str]) -> None:
    from tests.conftest import client_for

    client = client_for(tmp)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None and experiment != "sample"
    runs = client.search_runs([exp.experiment_id])
    children = [r for r in runs if r.data.tags.get("role") != "sweep_parent"]
    assert sorted(r.data.tags["system"] for r in children) == ["arag", "naive", "stuffing"]
    for run in children:
        assert run.info.status == "FINISHED"
        assert run.data.metrics["docs_within_context_budget_share"] == 1.0
        path = client.download_artifacts(run.info.run_id, "predictions.eval.jsonl",
                                         str(tmp / run.info.run_id))
        for rec in map(json.loads, Path(path).read_text().splitlines()):
            assert rec["numeric_precision"] is not None and rec["latency_ms"] is not None
            if rec["id"] in reference_free:
                assert rec["rouge2_f1"] is None
                assert "no reference summary" in rec["null_reasons"]["rouge2_f1"]
            else:
                assert rec["rouge2_f1"] is not None
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep_parent")
    report = Path(client.download_artifacts(parent.info.run_id, "report.md", str(tmp / "r")))
    text = report.read_text()
    assert "fit inside the retrieval context budget" in text
    assert "have no reference summary" in text


def test_a_folder_run_without_a_root_is_stopped_with_the_fix(make_cfg):
    from runners.validation import ConfigError, validate_config

    with pytest.raises(ConfigError, match=r"dataset.root must be set. Fix: add dataset.root="):
        validate_config(make_cfg("dataset=folder"))
