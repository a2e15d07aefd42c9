"""Chunking, the FAISS index and its on-disk cache."""

from __future__ import annotations

from dataclasses import replace

import pytest

from arag.datasets import load_dataset
from arag.records import Document
from arag.retrieval import chunk_document, load_or_build_index
from tests.conftest import ROOT


def _doc(n_lines: int = 30) -> Document:
    lines = tuple(f"Sentence number {i} says something about revenue and margins here." for i in
                  range(1, n_lines + 1))
    return Document("DOC_q1_2024", lines, company="Doc Co", ticker="DOC", period="Q1 2024")


def test_chunks_are_whole_sentences_with_header_and_line_span():
    doc = _doc()
    chunks = chunk_document(doc, chunk_size=40, overlap=0)
    covered = [line for c in chunks for line in range(c.line_start, c.line_end + 1)]
    assert covered == list(range(1, 31)), "every line in exactly one chunk, in order"
    for c in chunks:
        assert c.lines == doc.lines[c.line_start - 1:c.line_end]
        assert sum(len(s.split()) for s in c.lines) <= 40
        assert c.text.startswith("[COMPANY: DOC | TYPE: EARNINGS_CALL | PERIOD: Q1 2024]\n")
        assert c.chunk_id == f"DOC_q1_2024#L{c.line_start}-{c.line_end}"


def test_overlap_repeats_sentences_and_long_lines_stand_alone():
    doc = _doc()
    chunks = chunk_document(doc, chunk_size=40, overlap=1)
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.line_start == a.line_end
    long = Document("L", ("word " * 100, "short line"), period="Q1")
    assert [c.line_end - c.line_start + 1 for c in chunk_document(long, 20)] == [1, 1]


def test_documents_without_pages_chunk_as_before():
    # the ids and text earlier versions gave, so index caches and gold mappings stay valid
    chunks = chunk_document(_doc(), chunk_size=40, overlap=1)
    assert [c.chunk_id for c in chunks] == [f"DOC_q1_2024#L{a}-{a + 3}" for a in range(1, 26, 3)] + [
        "DOC_q1_2024#L28-30"]
    assert all(c.header == "[COMPANY: DOC | TYPE: EARNINGS_CALL | PERIOD: Q1 2024]" for c in chunks)


def _paged_doc() -> Document:
    doc = _doc(12)  # 9 words a line
    return Document("ACME_2022_10K", doc.lines, company="ACME", doc_type="10K", period="FY2022",
                    line_pages=(1, 1, 1, 1, 1, 2, 2, 4, 4, 4, 4, 4))


def test_chunks_of_a_paginated_document_stay_on_one_page_and_name_it():
    doc = _paged_doc()
    chunks = chunk_document(doc, chunk_size=40, overlap=0)
    # page 1 (5 lines, 45 words) needs two chunks; page 2 fits one; page 3 has no text
    assert [c.chunk_id for c in chunks] == ["ACME_2022_10K#L1-4", "ACME_2022_10K#L5-5",
                                            "ACME_2022_10K#L6-7", "ACME_2022_10K#L8-11",
                                            "ACME_2022_10K#L12-12"]
    for c in chunks:
        pages = set(doc.line_pages[c.line_start - 1:c.line_end])
        assert len(pages) == 1
        assert c.header == f"[COMPANY: ACME | TYPE: 10K | PERIOD: FY2022 | PAGE: {pages.pop()}]"
        assert c.lines == doc.lines[c.line_start - 1:c.line_end]
    assert chunks[2].text.startswith("[COMPANY: ACME | TYPE: 10K | PERIOD: FY2022 | PAGE: 2]\n")
    # without the page break lines 5-7 would share a chunk; overlap stays within a page
    overlapped = chunk_document(doc, chunk_size=40, overlap=2)
    assert [(c.line_start, c.line_end) for c in overlapped] == [
        (1, 4), (3, 5), (6, 7), (8, 11), (10, 12)]


def test_bad_line_pages_are_named():
    doc = _paged_doc()
    bad = Document(doc.doc_id, doc.lines, line_pages=doc.line_pages[:-1])
    with pytest.raises(ValueError, match="ACME_2022_10K: line_pages has 11 entries for 12"):
        chunk_document(bad, 40)


def _sample(make_cfg, tmp_path, mini_dataset):
    cfg = make_cfg(f"dataset.root={mini_dataset}", fresh_cache=True)
    ds = load_dataset(cfg.dataset, ROOT)
    return cfg, ds


def test_index_is_built_once_then_loaded_from_cache(make_cfg, tmp_path, mini_dataset, caplog):
    cfg, ds = _sample(make_cfg, tmp_path, mini_dataset)
    first = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    encoded = first.embedder.sentences_encoded
    assert not first.loaded_from_cache
    second = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    assert second.loaded_from_cache
    assert second.embedder.sentences_encoded == encoded, "loading must not embed the corpus"
    assert [c.chunk_id for c in second.chunks] == [c.chunk_id for c in first.chunks]
    q = "What was third quarter revenue?"
    assert second.semantic_search(q, 3) == first.semantic_search(q, 3)


def test_corrupt_index_cache_is_rebuilt_not_trusted(make_cfg, tmp_path, mini_dataset, caplog):
    cfg, ds = _sample(make_cfg, tmp_path, mini_dataset)
    built = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    faiss_file = next((tmp_path / "cache" / "index").glob("*/index.faiss"))
    faiss_file.write_bytes(faiss_file.read_bytes()[:100])  # truncated
    again = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    assert not again.loaded_from_cache
    assert "unreadable" in caplog.text and "rebuilding" in caplog.text
    assert again.n_vectors == built.n_vectors
    assert load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir).loaded_from_cache


def test_an_index_damaged_at_the_same_size_is_rebuilt(make_cfg, tmp_path, mini_dataset, caplog):
    """Bytes changed inside the vectors load fine in FAISS; only the checksum notices."""
    cfg, ds = _sample(make_cfg, tmp_path, mini_dataset)
    built = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    faiss_file = next((tmp_path / "cache" / "index").glob("*/index.faiss"))
    data = bytearray(faiss_file.read_bytes())
    data[-4000:-8] = bytes(len(data[-4000:-8]))  # zero a stretch of vectors, same size
    faiss_file.write_bytes(bytes(data))
    again = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    assert not again.loaded_from_cache
    assert "checksum mismatch in index.faiss" in caplog.text and "rebuilding" in caplog.text
    q = "What was third quarter revenue?"
    assert again.semantic_search(q, 3) == built.semantic_search(q, 3)
    assert load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir).loaded_from_cache


def test_cache_key_changes_with_content_and_config(make_cfg, tmp_path, mini_dataset):
    from arag.retrieval import index_key

    cfg, ds = _sample(make_cfg, tmp_path, mini_dataset)
    base = index_key(ds.corpus, cfg.retrieval)
    other = make_cfg(f"dataset.root={mini_dataset}", "retrieval.chunk_size=60")
    assert index_key(ds.corpus, other.retrieval) != base
    doc = ds.corpus.documents["T0X_q3_2024"]
    ds.corpus.documents["T0X_q3_2024"] = Document(doc.doc_id, doc.lines[:-1], doc.company,
                                                  doc.doc_type, doc.period, doc.ticker)
    assert index_key(ds.corpus, cfg.retrieval) != base
    # chunks follow the pages: pagination is part of the key
    unpaged = index_key(ds.corpus, cfg.retrieval)
    doc = ds.corpus.documents["T0X_q3_2024"]
    for last_page in (1, 2):
        pages = (1,) * (len(doc.lines) - 1) + (last_page,)
        ds.corpus.documents["T0X_q3_2024"] = replace(doc, line_pages=pages)
        assert index_key(ds.corpus, cfg.retrieval) not in (base, unpaged)
        unpaged = index_key(ds.corpus, cfg.retrieval)


def test_semantic_and_keyword_search_find_the_fact_within_scope(make_cfg, tmp_path, mini_dataset):
    cfg, ds = _sample(make_cfg, tmp_path, mini_dataset)
    index = load_or_build_index(ds.corpus, cfg.retrieval, cfg.cache.dir)
    hits = index.semantic_search("adjusted earnings per share", 2, ["T1X_q3_2024"])
    assert hits and all(h.chunk_id.startswith("T1X_q3_2024#") for h in hits)
    assert "earnings per share" in hits[0].snippet
    kw = index.keyword_search(["earnings per share"], 5, ["T0X_q3_2024"])
    assert len(kw) == 1 and "$1.10" in kw[0].snippet
    everywhere = index.keyword_search(["earnings per share"], 5, None)
    assert {h.chunk_id.split("#")[0] for h in everywhere} == {"T0X_q3_2024", "T1X_q3_2024"}
