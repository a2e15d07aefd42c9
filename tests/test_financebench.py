"""dataset=financebench: questions + page-aware documents parsed from PDFs, cached.

Most tests use a tiny upstream-shaped tree with hand-written PDFs (fast, always run); the
real-data tests skip when ../shared/datasets is absent; they parse one large real 10-K
(a few seconds) and three small filings, once per session (the parse cache is content-keyed).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from arag.datasets import DatasetError, forget_loaded, load_dataset
from arag.datasets.financebench import page_lines, split_sentences
from arag.retrieval import chunk_document
from runners.evaluate import gold_chunk_ids
from tests.conftest import ROOT, SHARED

FB = SHARED / "financebench"
needs_data = pytest.mark.skipif(
    not (FB / "data" / "financebench_open_source.jsonl").exists(),
    reason=f"../shared/datasets not present: {FB} (clone github.com/patronus-ai/financebench)")


def load(make_cfg, cache: Path, *overrides: str):
    cfg = make_cfg("dataset=financebench", f"dataset.root={FB}",
                   f"dataset.options.cache_dir={cache}", *overrides)
    return load_dataset(cfg.dataset, ROOT)


# --- a tiny tree with hand-written PDFs -------------------------------------------------------

def make_pdf(pages: list[list[str]]) -> bytes:
    """A minimal valid PDF: one text line per entry, Helvetica, one page per list."""
    n = len(pages)
    objects = ["<< /Type /Catalog /Pages 2 0 R >>",
               "<< /Type /Pages /Kids [" + " ".join(f"{4 + 2 * i} 0 R" for i in range(n))
               + f"] /Count {n} >>",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, lines in enumerate(pages):
        ops = ["BT /F1 11 Tf 14 TL 72 740 Td"]
        for line in lines:
            esc = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"({esc}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                       f"<< /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>")
        objects.append(stream)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        if isinstance(obj, bytes):
            body = b"<< /Length %d >>\nstream\n" % len(obj) + obj + b"\nendstream"
        else:
            body = obj.encode("latin-1")
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    return bytes(out)


ACME_10K = [
    ["ACME Corp Annual Report 2022.", "Part I covers the business of ACME."],
    ["Net revenue was $1,200 million in 2022.", "Capital expenditure was $150 million.",
     "Free cash flow rose 8% to $300 million."],
    ["Risk factors include competition.", "We depend on U.S. suppliers."],
]
ACME_10Q = [["Second quarter net sales were $310 million.", "Gross margin was 41%."]]
BETA_8K = [["On July 1, 2022 Beta Inc. announced a merger."]]

DOCS = [("ACME_2022_10K", "ACME", "10k", 2022), ("ACME_2023Q2_10Q", "ACME", "10q", 2023),
        ("BETA_2022_8K_dated-2022-07-01", "Beta", "8k", 2022),
        ("GAMMA_2021_10K", "Gamma", "10k", 2021)]


def question(qid: str, doc: str, pages: list[int], answer: str = "$150 million") -> dict:
    return {"financebench_id": qid, "company": doc.split("_")[0], "doc_name": doc,
            "question_type": "metrics-generated", "question_reasoning": "Information extraction",
            "question": f"Question {qid}?", "answer": answer, "justification": "From the 10-K.",
            "evidence": [{"evidence_text": "Capital expenditure was $150 million.",
                          "doc_name": doc, "evidence_page_num": p,
                          "evidence_text_full_page": "the whole page"} for p in pages]}


def write_upstream_tree(root: Path, docs: list[tuple[str, str, str, int]],
                        questions: list[dict], pdfs: dict[str, list[list[str]]]) -> Path:
    """An upstream-shaped FinanceBench tree: document information, questions, PDFs."""
    (root / "data").mkdir(parents=True)
    (root / "pdfs").mkdir()
    (root / "data" / "financebench_document_information.jsonl").write_text("".join(
        json.dumps({"doc_name": d, "company": c, "gics_sector": "Industrials", "doc_type": t,
                    "doc_period": y, "doc_link": "https://example.com"}) + "\n"
        for d, c, t, y in docs))
    (root / "data" / "financebench_open_source.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in questions))
    for name, pages in pdfs.items():
        (root / "pdfs" / f"{name}.pdf").write_bytes(make_pdf(pages))
    return root


def write_tree(root: Path) -> Path:
    questions = [question("fb_1", "ACME_2022_10K", [1]), question("fb_2", "GAMMA_2021_10K", [0]),
                 question("fb_3", "ACME_2023Q2_10Q", [0]),
                 question("fb_4", "BETA_2022_8K_dated-2022-07-01", [0, 5])]
    return write_upstream_tree(root, DOCS, questions, {
        "ACME_2022_10K": ACME_10K, "ACME_2023Q2_10Q": ACME_10Q,
        "BETA_2022_8K_dated-2022-07-01": BETA_8K})


@pytest.fixture
def tiny(tmp_path) -> Path:
    return write_tree(tmp_path / "fb")


def test_tiny_tree_tasks_documents_and_pages(make_cfg, tiny, tmp_path):
    ds = load(make_cfg, tmp_path / "c", f"dataset.root={tiny}")
    assert [t.id for t in ds.tasks] == ["fb_1", "fb_3", "fb_4"]  # file order; fb_2 has no PDF
    t = ds.tasks[0]
    assert (t.task_type, t.doc_ids, t.reference) == ("qa", ("ACME_2022_10K",), "$150 million")
    assert set(t.meta) >= {"question_type", "question_reasoning", "justification", "evidence"}
    assert t.meta["evidence"][0]["page"] == 2 and "evidence_text_full_page" not in t.meta[
        "evidence"][0]
    doc = ds.corpus.documents["ACME_2022_10K"]
    assert (doc.company, doc.doc_type, doc.period) == ("ACME", "10K", "FY2022")
    assert doc.line_pages == (1, 1, 2, 2, 2, 3, 3)
    assert doc.lines[3] == "Capital expenditure was $150 million."
    assert doc.lines[6] == "We depend on U.S. suppliers."
    # evidence page 1 (0-based) -> gold = every line of page 2
    assert t.gold_lines == {"ACME_2022_10K": (3, 4, 5)}
    q2 = ds.corpus.documents["ACME_2023Q2_10Q"]
    assert (q2.doc_type, q2.period) == ("10Q", "Q2 2023")
    k8 = ds.corpus.documents["BETA_2022_8K_dated-2022-07-01"]
    assert (k8.doc_type, k8.period) == ("8K", "2022 (dated 2022-07-01)")
    # evidence page beyond the PDF: reported, not silently dropped
    problems = ds.reports["gold_pages"]["tasks"]["fb_4"]["problems"]
    assert problems and "page 6 is beyond" in problems[0]


def test_chunks_are_page_aware_and_evidence_pages_map_to_their_chunks(make_cfg, tiny, tmp_path):
    ds = load(make_cfg, tmp_path / "c", f"dataset.root={tiny}", "dataset.limit=1")
    doc = ds.corpus.documents["ACME_2022_10K"]
    chunks = chunk_document(doc, chunk_size=120)  # the whole filing would fit in one chunk
    assert [c.chunk_id for c in chunks] == ["ACME_2022_10K#L1-2", "ACME_2022_10K#L3-5",
                                            "ACME_2022_10K#L6-7"]
    assert chunks[1].text.splitlines() == [
        "[COMPANY: ACME | TYPE: 10K | PERIOD: FY2022 | PAGE: 2]",
        "Net revenue was $1,200 million in 2022.", "Capital expenditure was $150 million.",
        "Free cash flow rose 8% to $300 million."]
    check_page_chunks(ds.tasks[0], doc, chunks)


def test_missing_pdf_is_skipped_and_reported_per_question(make_cfg, tiny, tmp_path):
    ds = load(make_cfg, tmp_path / "c", f"dataset.root={tiny}")
    report = ds.reports["missing_pdfs"]
    assert report["n_questions_skipped"] == 1 and report["documents"] == ["GAMMA_2021_10K"]
    assert report["questions"][0]["financebench_id"] == "fb_2"
    assert report["questions"][0]["expected_path"].endswith("pdfs/GAMMA_2021_10K.pdf")
    assert any("1 question(s) skipped" in n for n in ds.notes)


def test_parsed_pdfs_are_cached_by_content(make_cfg, tiny, tmp_path):
    cache = tmp_path / "c"
    first = load(make_cfg, cache, f"dataset.root={tiny}")
    assert first.reports["pdf_parsing"]["n_parsed"] == 3
    assert len(list((cache / "parsed").glob("*.json"))) == 3
    forget_loaded()  # the next run's process
    again = load(make_cfg, cache, f"dataset.root={tiny}")
    assert again.reports["pdf_parsing"]["n_parsed"] == 0
    assert again.reports["pdf_parsing"]["n_from_cache"] == 3
    assert again.corpus.documents["ACME_2022_10K"] == first.corpus.documents["ACME_2022_10K"]


def test_a_parse_cache_entry_names_its_engine_and_no_other_engines_text_is_read(
        make_cfg, tiny, tmp_path):
    cache = tmp_path / "c"
    first = load(make_cfg, cache, f"dataset.root={tiny}", "dataset.limit=1")
    entry = next((cache / "parsed").glob("*.json"))
    data = json.loads(entry.read_text())
    assert entry.name.endswith(".pdfium.json") and data["engine"] == "pdfium"
    assert data["parser"].startswith("pdfium (pypdfium2 5.")
    sha = entry.name.split(".")[0]
    stale = ["Stale text that another engine wrote."] * len(data["pages"])
    # an entry of the older pypdf format under the old name, and pypdf's text under this name
    (cache / "parsed" / f"{sha}.json").write_text(json.dumps(
        {"format": 1, "sha256": sha, "parser": "pypdf 7.1.1", "pages": stale}))
    entry.write_text(json.dumps(data | {"engine": "pypdf", "pages": stale}))
    forget_loaded()  # the next run's process
    again = load(make_cfg, cache, f"dataset.root={tiny}", "dataset.limit=1")
    assert again.reports["pdf_parsing"]["n_parsed"] == 1  # parsed again, not read
    assert again.corpus.documents == first.corpus.documents
    assert json.loads(entry.read_text())["engine"] == "pdfium"


def test_limit_parses_only_the_pdfs_of_the_first_questions(make_cfg, tiny, tmp_path):
    ds = load(make_cfg, tmp_path / "c", f"dataset.root={tiny}", "dataset.limit=1")
    assert [t.id for t in ds.tasks] == ["fb_1"]
    assert ds.reports["pdf_parsing"]["n_pdfs"] == 1
    assert "missing_pdfs" not in ds.reports  # fb_2 lies beyond the first answerable question
    ds = load(make_cfg, tmp_path / "c", f"dataset.root={tiny}", "dataset.limit=2")
    assert [t.id for t in ds.tasks] == ["fb_1", "fb_3"]
    assert ds.reports["missing_pdfs"]["n_questions_skipped"] == 1


def test_damaged_pdf_and_bad_records_are_named(make_cfg, tiny, tmp_path):
    (tiny / "pdfs" / "ACME_2022_10K.pdf").write_bytes(b"%PDF-1.4 garbage")
    with pytest.raises(DatasetError, match="ACME_2022_10K.pdf.*pdfium cannot parse"):
        load(make_cfg, tmp_path / "c", f"dataset.root={tiny}", "dataset.limit=1")
    path = tiny / "data" / "financebench_open_source.jsonl"
    path.write_text(path.read_text().replace('"answer": "$150 million", ', "", 1))
    with pytest.raises(DatasetError, match=r"open_source.jsonl:1 \(field 'answer'\)"):
        load(make_cfg, tmp_path / "c", f"dataset.root={tiny}")
    with pytest.raises(DatasetError, match="does not exist. Fix: `make data`"):
        load(make_cfg, tmp_path / "c", f"dataset.root={tmp_path / 'nope'}")


def test_sentence_splitter():
    text = ("Revenue rose 5% to $1.5 billion. The U.S. business grew. EPS was $2.10! "
            "• Net sales of $14 million • Adjusted EPS of 73.3 cps")
    assert split_sentences(text) == [
        "Revenue rose 5% to $1.5 billion.", "The U.S. business grew.", "EPS was $2.10!",
        "Net sales of $14 million", "Adjusted EPS of 73.3 cps"]
    long_row = " ".join(str(i) for i in range(130))
    assert [len(s.split()) for s in split_sentences(long_row, max_words=60)] == [60, 60, 10]
    lines, pages = page_lines(["First page. Still one.", "", "Hyphen-\nated word here."])
    assert lines == ("First page.", "Still one.", "Hyphenated word here.")
    assert pages == (1, 1, 3)


# --- the real data -------------------------------------------------------------------------

def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+|\d[\d,.]*", text.lower()))


def check_evidence_gold(task, row, doc) -> None:
    assert task.reference == row["answer"] and task.question == row["question"]
    assert doc.line_pages is not None and len(doc.line_pages) == len(doc.lines)
    assert list(doc.line_pages) == sorted(doc.line_pages)
    pages = {e["evidence_page_num"] + 1 for e in row["evidence"]}  # 0-based -> 1-based
    gold = task.gold_lines[doc.doc_id]
    assert {doc.line_pages[g - 1] for g in gold} == pages
    assert len(gold) == sum(doc.line_pages.count(p) for p in pages)  # every line of them
    for ev in row["evidence"]:
        # the evidence text is (nearly all) on its page, much less so on the next one
        page = ev["evidence_page_num"] + 1
        evidence = words(ev["evidence_text"])
        on_page = words(" ".join(line for line, p in zip(doc.lines, doc.line_pages, strict=True)
                                 if p == page))
        nxt = words(" ".join(line for line, p in zip(doc.lines, doc.line_pages, strict=True)
                             if p == page + 1))
        assert len(evidence & on_page) / len(evidence) > 0.9, (task.id, page)
        assert len(evidence & nxt) < len(evidence & on_page), (task.id, page)


def check_page_chunks(task, doc, chunks) -> None:
    """Every chunk lies on one page and names it; the gold chunks are those on evidence pages."""
    for c in chunks:
        (page,) = set(doc.line_pages[c.line_start - 1:c.line_end])
        assert c.header == doc.header_for(page)
    evidence = {doc.line_pages[g - 1] for g in task.gold_lines[doc.doc_id]}
    assert gold_chunk_ids(task, {doc.doc_id: chunks}) == {
        c.chunk_id for c in chunks if doc.line_pages[c.line_start - 1] in evidence}


def real_rows() -> list[dict]:
    return [json.loads(x) for x in
            (FB / "data" / "financebench_open_source.jsonl").read_text().splitlines() if x]


@needs_data
def test_real_data_pages_and_evidence_gold(make_cfg, shared_cache):
    ds = load(make_cfg, shared_cache, "dataset.limit=2")  # both on 3M_2018_10K (~35 s to parse)
    assert [t.id for t in ds.tasks] == ["financebench_id_03029", "financebench_id_04672"]
    assert list(ds.corpus.documents) == ["3M_2018_10K"]
    doc = ds.corpus.documents["3M_2018_10K"]
    assert (doc.company, doc.doc_type, doc.period) == ("3M", "10K", "FY2018")
    assert doc.line_pages[0] == 1 and doc.line_pages[-1] == 160
    chunks = chunk_document(doc, chunk_size=120)
    for task, row in zip(ds.tasks, real_rows()[:2], strict=True):
        check_evidence_gold(task, row, doc)
        check_page_chunks(task, doc, chunks)


@needs_data
def test_real_limit_3_multi_page_evidence_and_missing(make_cfg, shared_cache, tmp_path):
    # a view of the real tree: real PDFs and filing list (symlinks), a question file holding
    # five real questions chosen for small PDFs, multi-page evidence and a missing PDF
    rows = {r["financebench_id"]: r for r in real_rows()}
    chosen = ["financebench_id_01912", "financebench_id_00807", "financebench_id_02024",
              "financebench_id_00215", "financebench_id_03856"]
    view = tmp_path / "fb"
    (view / "data").mkdir(parents=True)
    (view / "pdfs").symlink_to(FB / "pdfs")
    info = "financebench_document_information.jsonl"
    (view / "data" / info).symlink_to(FB / "data" / info)
    (view / "data" / "financebench_open_source.jsonl").write_text(
        "".join(json.dumps(rows[i]) + "\n" for i in chosen))
    ds = load(make_cfg, shared_cache, f"dataset.root={view}", "dataset.limit=3")
    assert [t.id for t in ds.tasks] == [chosen[0], chosen[2], chosen[3]]
    assert ds.reports["pdf_parsing"]["n_pdfs"] == 3  # ADOBE_2017_10K (5th) is not parsed
    assert [q["financebench_id"] for q in ds.reports["missing_pdfs"]["questions"]] == [
        "financebench_id_00807"]  # 3M_2023Q2_10Q is absent upstream
    for task in ds.tasks:
        check_evidence_gold(task, rows[task.id], ds.corpus.documents[task.doc_ids[0]])
    mgm = ds.corpus.documents["MGMRESORTS_2022Q4_EARNINGS"]
    assert (mgm.doc_type, mgm.period) == ("EARNINGS", "Q4 2022")
    assert ds.tasks[0].gold_lines[mgm.doc_id]  # evidence pages [2, 3, 3]: 3 and 4, once each


@needs_data
def test_real_missing_pdfs_reported(make_cfg, shared_cache, tmp_path):
    # a view of the real tree (symlinks, nothing copied) holding only 3M_2018_10K.pdf
    view = tmp_path / "fb"
    (view / "pdfs").mkdir(parents=True)
    (view / "data").symlink_to(FB / "data")
    (view / "pdfs" / "3M_2018_10K.pdf").symlink_to(FB / "pdfs" / "3M_2018_10K.pdf")
    ds = load(make_cfg, shared_cache, f"dataset.root={view}", "dataset.limit=3")
    assert len(ds.tasks) == 2  # only two questions use the one PDF present
    report = ds.reports["missing_pdfs"]
    assert report["n_questions_skipped"] == 148
    ids = [q["financebench_id"] for q in report["questions"]]
    assert ids[:3] == ["financebench_id_00499", "financebench_id_01226",
                       "financebench_id_01865"]
    # the real tree itself lacks 10 filings, named in the report of a full scan
    missing_upstream = {"3M_2023Q2_10Q", "AES_2022_10K", "AMCOR_2020_10K", "AMD_2022_10K",
                        "COCACOLA_2021_10K", "COCACOLA_2022_10K", "JPMORGAN_2022_10K",
                        "PAYPAL_2022_10K", "ULTABEAUTY_2023_10K", "WALMART_2019_10K"}
    assert missing_upstream <= set(report["documents"])


def test_pdfs_are_parsed_largest_first_and_a_damaged_one_is_named(tmp_path):
    """A worker process parses PDF after PDF, largest first: the damaged (smallest) PDF
    fails last, with its name, and what was parsed before it stays cached."""
    from arag.datasets.financebench import parse_pdfs

    good = [tmp_path / f"GOOD{i}_2022_10K.pdf" for i in range(3)]
    for i, pdf in enumerate(good):
        pdf.write_bytes(make_pdf([[f"Filing {i} page one."], [f"Filing {i} page two."]]))
    bad = tmp_path / "BAD_2022_10K.pdf"
    bad.write_bytes(b"%PDF-1.4 garbage")
    with pytest.raises(DatasetError, match="BAD_2022_10K.pdf.*pdfium cannot parse"):
        parse_pdfs([bad, *good], tmp_path / "cache", workers=1)
    pages, stats = parse_pdfs(good, tmp_path / "cache", workers=1)
    assert stats["n_from_cache"] == 3
    assert [pages[pdf] for pdf in good] == [[f"Filing {i} page one.", f"Filing {i} page two."]
                                            for i in range(3)]
