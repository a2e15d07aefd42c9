"""Sentence-aware chunking: whole lines (one sentence each), never split mid-sentence."""

from __future__ import annotations

from arag.records import Chunk, Document


def chunk_document(doc: Document, chunk_size: int, overlap: int = 0) -> list[Chunk]:
    """Group consecutive lines into chunks of about ``chunk_size`` words.

    A chunk closes before the line that would take it past ``chunk_size`` (a single
    longer line is a chunk of its own); the next chunk repeats the last ``overlap``
    lines. Chunk ids are ``<doc_id>#L<start>-<end>`` (1-based, inclusive): stable, and
    readable in traces.
    """
    if chunk_size <= 0:
        raise ValueError(f"retrieval.chunk_size must be positive (got {chunk_size})")
    if overlap < 0:
        raise ValueError(f"retrieval.chunk_overlap must be >= 0 (got {overlap})")
    chunks: list[Chunk] = []
    lines = doc.lines
    start = 0
    while start < len(lines):
        end = start
        words = 0
        while end < len(lines) and (end == start or words + len(lines[end].split()) <= chunk_size):
            words += len(lines[end].split())
            end += 1
        chunks.append(
            Chunk(
                chunk_id=f"{doc.doc_id}#L{start + 1}-{end}",
                doc_id=doc.doc_id,
                line_start=start + 1,
                line_end=end,
                header=doc.header,
                lines=tuple(lines[start:end]),
            )
        )
        if end >= len(lines):
            break
        start = max(end - overlap, start + 1)
    return chunks
