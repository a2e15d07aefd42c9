"""Sentence-aware chunking: whole lines (one sentence each), never split mid-sentence.

Chunks of a paginated document (``Document.line_pages``, e.g. a PDF filing) never cross a
page boundary and name their page in the header, so a reader (and the model) can cite it
and page-level gold maps to chunks exactly. Documents without pages (earnings calls) are
chunked as one run of lines.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from cachetools import LRUCache, cached

from arag.records import Chunk, Document


def chunk_document(doc: Document, chunk_size: int, overlap: int = 0) -> list[Chunk]:
    """Group consecutive lines into chunks of about ``chunk_size`` words.

    A chunk closes before the line that would take it past ``chunk_size`` (a single
    longer line is a chunk of its own) or at the end of a page; the next chunk repeats the
    last ``overlap`` lines of the same page. Chunk ids are ``<doc_id>#L<start>-<end>``
    (1-based, inclusive): stable, and readable in traces.
    """
    if chunk_size <= 0:
        raise ValueError(f"retrieval.chunk_size must be positive (got {chunk_size})")
    if overlap < 0:
        raise ValueError(f"retrieval.chunk_overlap must be >= 0 (got {overlap})")
    hashable = isinstance(doc.lines, tuple) and not isinstance(doc.line_pages, list)
    chunk = _chunks if hashable else _chunks.__wrapped__
    return list(chunk(doc, chunk_size, overlap))


# a sweep's jobs (and a job's index, scoring and dataset metrics) chunk the same documents
# with the same settings: each document is chunked once per process (chunks are frozen).
# Bounded by the documents' characters, not by a count: a run reads its corpus in order,
# and ECTSum train's 1,681 documents through a cache of 1,024 kept none of them (each
# read pushed out the one the next job needed first)
CHARS_KEPT = 64_000_000  # ECTSum train is 29 M; the chunks share the documents' lines


def _characters(chunks: tuple[Chunk, ...]) -> int:
    return max(1, sum(len(line) for chunk in chunks for line in chunk.lines))


@cached(LRUCache(CHARS_KEPT, getsizeof=_characters), lock=threading.Lock())
def _chunks(doc: Document, chunk_size: int, overlap: int) -> tuple[Chunk, ...]:
    chunks: list[Chunk] = []
    for first, stop, page in _page_runs(doc):
        header = doc.header_for(page)
        for start, end in _windows(doc.lines, first, stop, chunk_size, overlap):
            chunks.append(Chunk(
                chunk_id=f"{doc.doc_id}#L{start + 1}-{end}", doc_id=doc.doc_id,
                line_start=start + 1, line_end=end, header=header,
                lines=tuple(doc.lines[start:end]),
            ))
    return tuple(chunks)


def _page_runs(doc: Document) -> Iterator[tuple[int, int, int | None]]:
    """``(first, stop, page)`` of each run of lines on one page (0-based, ``stop``
    exclusive); a document without pages is one run with page None."""
    pages = doc.line_pages
    if pages is None:
        if doc.lines:
            yield 0, len(doc.lines), None
        return
    if len(pages) != len(doc.lines):
        raise ValueError(f"document {doc.doc_id}: line_pages has {len(pages)} entries for "
                         f"{len(doc.lines)} lines (one page number per line is needed)")
    first = 0
    for i in range(1, len(pages) + 1):
        if i == len(pages) or pages[i] != pages[first]:
            yield first, i, pages[first]
            first = i


def _windows(lines: tuple[str, ...], first: int, stop: int, chunk_size: int,
             overlap: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` line windows (0-based, ``end`` exclusive) over ``lines[first:stop]``."""
    # each line's words counted once (overlapping windows revisit lines; a 10-K has ~3,000)
    n_words = [len(line.split()) for line in lines[first:stop]]
    start = first
    while start < stop:
        end = start
        words = 0
        while end < stop and (end == start or words + n_words[end - first] <= chunk_size):
            words += n_words[end - first]
            end += 1
        yield start, end
        if end >= stop:
            return
        start = max(end - overlap, start + 1)
