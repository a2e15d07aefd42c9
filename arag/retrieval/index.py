"""The search index: chunks, sentence embeddings in FAISS, and exact keyword scoring.

semantic_search ranks chunks by their best-matching sentence (A-RAG semantics);
keyword_search scores chunks by exact keyword matches weighted by keyword length.
An index is built once per (corpus content, retrieval config, embedder) and persisted
under ``<cache.dir>/index/<key>/``; a later run with the same key loads it instead of
embedding again. ``meta.json`` holds a SHA-256 of every other file of the entry, checked
on load like the embedding shards' checksums: a truncated, corrupt or same-size damaged
entry is rebuilt, never trusted.

Building an index embeds only the sentences the embedding store (``arag.retrieval.store``,
``<cache.dir>/embeddings/``) lacks and assembles FAISS from stored vectors, so another
chunking, a larger ``dataset.limit`` or another split over the same sentences embeds
nothing again. ``SearchIndex.stats`` says how the index came to be.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import faiss
import numpy as np

from arag.config import CacheMode, option_value
from arag.files import sha256_file
from arag.records import Chunk, Corpus, content_hash
from arag.retrieval.chunk_context import contexts_key
from arag.retrieval.chunking import chunk_document
from arag.retrieval.embedder import (
    Embedder,
    device_kind,
    get_embedder,
    resolve_device,
    resolve_embedder_path,
)
from arag.retrieval.store import EmbeddingStore, text_key

log = logging.getLogger(__name__)
INDEX_FORMAT = 1
INDEX_FILES = ("chunks.jsonl", "row_chunk.npy", "index.faiss")  # checksummed in meta.json


@dataclass(frozen=True)
class Hit:
    chunk_id: str
    score: float
    snippet: str


@dataclass
class IndexStats:
    """How an index came to be, counted in distinct sentence texts.

    Built: ``sentences_embedded`` were embedded now, ``sentences_reused`` came from the
    embedding store. Loaded from the index cache: nothing embedded, every distinct sentence
    of the index reused. Either way embedded + reused = the index's distinct sentences.
    """

    sentences_embedded: int = 0
    sentences_reused: int = 0
    embed_seconds: float = 0.0
    loaded_from_cache: bool = False

    def metrics(self) -> dict[str, float]:
        """The run metrics (``index_*``) a tracker logs."""
        return {"index_sentences_embedded": float(self.sentences_embedded),
                "index_sentences_reused": float(self.sentences_reused),
                "index_embed_seconds": self.embed_seconds}


def build_chunks(corpus: Corpus, chunk_size: int, overlap: int) -> list[Chunk]:
    return [c for doc in corpus.documents.values() for c in chunk_document(doc, chunk_size, overlap)]


class SearchIndex:
    # sentences were embedded (and chunks are BM25-indexed) under their metadata header
    contextual_headers: bool = False
    # chunk id -> the context a model wrote for it (retrieval.llm_context), indexed with it
    chunk_contexts: dict[str, str] | None = None

    def __init__(self, chunks: list[Chunk], flat: faiss.Index, row_chunk: np.ndarray,
                 embedder: Embedder | None, key: str, stats: IndexStats | None = None):
        self.chunks = chunks
        self.stats = stats or IndexStats()
        self.by_id = {c.chunk_id: c for c in chunks}
        self.key = key
        self.embedder = embedder
        self.row_chunk = row_chunk  # faiss row -> chunk position
        self.faiss = flat
        self._doc_rows: dict[str, tuple[int, int]] = {}
        for row, pos in enumerate(row_chunk):
            doc = chunks[int(pos)].doc_id
            lo, _ = self._doc_rows.get(doc, (row, row))
            self._doc_rows[doc] = (lo, row + 1)

    @property
    def loaded_from_cache(self) -> bool:
        return self.stats.loaded_from_cache

    @property
    def n_vectors(self) -> int:
        return int(self.faiss.ntotal)

    def chunks_of(self, doc_ids: list[str] | None) -> list[Chunk]:
        if doc_ids is None:
            return self.chunks
        return [self.chunks[i] for i in self._positions_of(doc_ids)]

    # worked out once per index, not per search: the 55 10-Ks make 47,777 chunks
    # and an agent searches its one filing's ~900 many times
    @cached_property
    def positions(self) -> dict[str, int]:
        """Each chunk's position in ``chunks``, by chunk id."""
        return {c.chunk_id: i for i, c in enumerate(self.chunks)}

    @cached_property
    def _doc_positions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, c in enumerate(self.chunks):
            out.setdefault(c.doc_id, []).append(i)
        return out

    @cached_property
    def _lower_bodies(self) -> list[str]:
        return [c.body.lower() for c in self.chunks]

    def _positions_of(self, doc_ids: list[str] | None) -> Sequence[int]:
        """Positions of the chunks of these documents (all: None), in ``chunks`` order."""
        if doc_ids is None:
            return range(len(self.chunks))
        return sorted(i for d in set(doc_ids) for i in self._doc_positions.get(d, ()))

    def semantic_search(self, query: str, top_k: int, doc_ids: list[str] | None = None) -> list[Hit]:
        if self.embedder is None:
            raise RuntimeError("this index was built without an embedder")
        q = self.embedder.encode([query])
        params, n_scope = self._selector(doc_ids)
        if n_scope == 0:
            return []
        k = min(n_scope, max(top_k * 30, 200))
        scores, rows = self.faiss.search(q, k, params=params)
        best: dict[int, tuple[float, int]] = {}
        for score, row in zip(scores[0], rows[0], strict=True):
            if row < 0:
                continue
            pos = int(self.row_chunk[row])
            if pos not in best or score > best[pos][0]:
                best[pos] = (float(score), int(row))
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top_k]
        hits = []
        for pos, (score, row) in ranked:
            chunk = self.chunks[pos]
            line = chunk.lines[self._row_line(row, pos)]
            hits.append(Hit(chunk.chunk_id, score, line))
        return hits

    def keyword_search(self, keywords: list[str], top_k: int,
                       doc_ids: list[str] | None = None) -> list[Hit]:
        terms = [k.strip().lower() for k in keywords if k and k.strip()]
        if not terms:
            return []
        patterns = [re.compile(rf"(?<!\w){re.escape(t)}(?!\w)") for t in terms]
        scored: list[tuple[float, int, Chunk, str]] = []
        for pos, i in enumerate(self._positions_of(doc_ids)):
            chunk, body = self.chunks[i], self._lower_bodies[i]
            # a term that is not a substring cannot match: skip its regex (most chunks)
            present = [(p, t) for p, t in zip(patterns, terms, strict=True) if t in body]
            score = float(sum(len(p.findall(body)) * len(t) for p, t in present))
            if score > 0:
                snippet = next((line for line in chunk.lines if _mentions(line.lower(), present)),
                               chunk.lines[0])
                scored.append((score, pos, chunk, snippet))
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [Hit(c.chunk_id, s, snip) for s, _, c, snip in scored[:top_k]]

    def _selector(self, doc_ids: list[str] | None):
        if doc_ids is None:
            return None, self.n_vectors
        ranges = [self._doc_rows[d] for d in doc_ids if d in self._doc_rows]
        if not ranges:
            return None, 0
        sel: faiss.IDSelector
        if len(ranges) == 1:
            sel = faiss.IDSelectorRange(*ranges[0])
        else:
            ids = np.concatenate([np.arange(lo, hi, dtype="int64") for lo, hi in ranges])
            sel = faiss.IDSelectorBatch(ids)
        params = faiss.SearchParameters()
        params.sel = sel
        # keep the selector alive as long as the parameters
        params._sel_ref = sel  # type: ignore[attr-defined]
        return params, sum(hi - lo for lo, hi in ranges)

    def _row_line(self, row: int, pos: int) -> int:
        first_row = int(np.searchsorted(self.row_chunk, pos, side="left"))
        return row - first_row



def index_key(corpus: Corpus, retrieval_cfg, contexts: dict[str, str] | None = None) -> str:
    emb = retrieval_cfg.embedder
    parts = ["index", INDEX_FORMAT, corpus.fingerprint(), retrieval_cfg.chunk_size,
             retrieval_cfg.chunk_overlap, emb.name, Path(resolve_embedder_path(emb.path)).name]
    pages = {d.doc_id: d.line_pages for d in corpus.documents.values()
             if d.line_pages is not None}
    if pages:
        # chunks follow the pages (never cross one; the page is in the header), so the
        # pagination is part of the key; a corpus without pages keeps the keys it had
        parts.append(content_hash(sorted(pages.items())))
    if getattr(retrieval_cfg, "contextual_headers", False):
        parts.append("contextual_headers")  # other texts are embedded; default keys unchanged
    precision = option_value(emb.precision)
    if precision != "fp32":  # other vectors; fp32 indexes keep the keys they had
        parts.append(f"precision={precision}")
    kind = device_kind(resolve_device(str(emb.device)))
    if kind != "cpu":  # other last bits; CPU indexes keep the keys they had
        parts.append(f"device={kind}")
    if contexts:  # written by a model: other texts are embedded
        parts.append(f"llm_context={contexts_key(contexts)}")
    return content_hash(*parts)


def embedded_texts(chunks: list[Chunk], contextual_headers: bool,
                   contexts: dict[str, str] | None = None) -> list[str]:
    """What is embedded, one text per sentence: the sentence, after its chunk's metadata
    header (``retrieval.contextual_headers``) and its model-written context
    (``retrieval.llm_context``) when they are on."""
    def prefix(c: Chunk) -> str:
        parts = [c.header] if contextual_headers else []
        if contexts and contexts.get(c.chunk_id):
            parts.append(contexts[c.chunk_id])
        return "".join(f"{p} " for p in parts)

    return [f"{prefix(c)}{line}" for c in chunks for line in c.lines]


def chunk_rows(chunks: list[Chunk]) -> np.ndarray:
    """Each sentence's chunk position, in index row order (one row per chunk line)."""
    return np.array([pos for pos, c in enumerate(chunks) for _ in c.lines], dtype="int64")


def _mentions(text: str, terms: list[tuple[re.Pattern[str], str]]) -> bool:
    """Whether ``text`` (lower case) holds one of the terms as a word."""
    return any(t in text and p.search(text) for p, t in terms)


class KeywordStandIn(SearchIndex):
    """A dry run's index when the cache holds none for this corpus and config: the chunks
    are the run's, but semantic search ranks them by the query's words (keyword search),
    so no sentence is embedded. What the systems read, and so their token counts, are then
    estimates (the dry run says so, with ``reason``: why no cached index was searched)."""

    reason: str = "no index of this corpus in the cache"

    def semantic_search(self, query: str, top_k: int, doc_ids: list[str] | None = None) -> list[Hit]:
        words = [w for w in re.findall(r"[\w$%.]+", query.lower()) if len(w) > 3]
        return self.keyword_search(words, top_k, doc_ids)


def dry_run_index(corpus: Corpus, retrieval_cfg, cache_dir: str | Path,
                  contexts: dict[str, str] | None = None) -> SearchIndex:
    """The index a dry run searches: the cached one when it can be read (loading embeds
    nothing), else a ``KeywordStandIn`` over the same chunks -- also when the cached entry
    is damaged, which a real run would rebuild by embedding the corpus."""
    key = index_key(corpus, retrieval_cfg, contexts)
    folder = Path(cache_dir) / "index" / key
    reason = KeywordStandIn.reason
    if folder.exists():
        try:
            return _load_cached(folder, retrieval_cfg, key, contexts)
        except Exception as exc:  # noqa: BLE001 - any damage: the run would rebuild it
            reason = f"the cached index {folder} is unreadable ({exc}); a real run rebuilds it"
    chunks = build_chunks(corpus, retrieval_cfg.chunk_size, retrieval_cfg.chunk_overlap)
    index = KeywordStandIn(chunks, faiss.IndexFlatIP(1), chunk_rows(chunks), None, key)
    index.reason = reason
    index.contextual_headers = bool(getattr(retrieval_cfg, "contextual_headers", False))
    index.chunk_contexts = contexts
    log.info("index %s: %s; the dry run ranks chunks by keywords instead of embedding %d "
             "chunks", key, reason, len(chunks))
    return index


def _load_cached(folder: Path, retrieval_cfg, key: str,
                 contexts: dict[str, str] | None) -> SearchIndex:
    """The index stored in ``folder``; raises when the entry is damaged."""
    emb_cfg = retrieval_cfg.embedder
    index = _load(folder, lambda: get_embedder(emb_cfg.path, emb_cfg.batch_size, emb_cfg.device,
                                               option_value(emb_cfg.precision)), key)
    index.contextual_headers = bool(getattr(retrieval_cfg, "contextual_headers", False))
    index.chunk_contexts = contexts
    log.info("index %s: loaded from cache %s (%d chunks, %d vectors, no embedding pass)",
             key, folder, len(index.chunks), index.n_vectors)
    return index


def load_or_build_index(corpus: Corpus, retrieval_cfg, cache_dir: str | Path,
                        mode: CacheMode | str = CacheMode.read_write,
                        contexts: dict[str, str] | None = None) -> SearchIndex:
    """Load the index for this corpus and config from the cache, or build (and store) it;
    ``contexts``: model-written chunk contexts to index with the chunks."""
    mode = CacheMode(mode)
    key = index_key(corpus, retrieval_cfg, contexts)
    headers = bool(getattr(retrieval_cfg, "contextual_headers", False))
    emb_cfg = retrieval_cfg.embedder
    embedder = get_embedder(emb_cfg.path, emb_cfg.batch_size, emb_cfg.device,
                            option_value(emb_cfg.precision))
    folder = Path(cache_dir) / "index" / key
    if mode != CacheMode.off and folder.exists():
        try:
            return _load_cached(folder, retrieval_cfg, key, contexts)
        except Exception as exc:  # noqa: BLE001 - any damage means rebuild
            log.warning("index cache %s is unreadable (%s); rebuilding it", folder, exc)
    started = time.perf_counter()
    chunks = build_chunks(corpus, retrieval_cfg.chunk_size, retrieval_cfg.chunk_overlap)
    sentences = embedded_texts(chunks, headers, contexts)
    row_chunk = chunk_rows(chunks)
    store = None if mode == CacheMode.off else EmbeddingStore(
        Path(cache_dir) / "embeddings" / embedder.identity, embedder.dim,
        writable=mode == CacheMode.read_write)
    vectors, stats = embed_sentences(sentences, embedder, store, f"index {key}")
    flat = faiss.IndexFlatIP(embedder.dim)
    flat.add(vectors)
    index = SearchIndex(chunks, flat, row_chunk, embedder, key, stats)
    index.contextual_headers = headers
    index.chunk_contexts = contexts
    log.info("index %s: built in %.1fs (%d chunks; %d sentences embedded in %.1fs, %d from the "
             "embedding store)", key, time.perf_counter() - started, len(chunks),
             stats.sentences_embedded, stats.embed_seconds, stats.sentences_reused)
    if mode == CacheMode.read_write:
        _store(folder, index)
    return index


def embed_sentences(sentences: list[str], embedder: Embedder, store: EmbeddingStore | None,
                    label: str = "index") -> tuple[np.ndarray, IndexStats]:
    """One vector per sentence (in order): stored vectors where the store has them, the
    rest embedded now (each distinct text once) and added to the store."""
    distinct = list(dict.fromkeys(sentences))
    keys = [text_key(t) for t in distinct]
    stats = IndexStats()
    with store.writing() if store is not None else nullcontext():
        found = store.lookup(keys) if store is not None else {}
        missing = [i for i, k in enumerate(keys) if k not in found]
        stats.sentences_reused = len(distinct) - len(missing)
        stats.sentences_embedded = len(missing)
        if missing:
            log.info("%s: embedding %d sentences (%d more from the embedding store)", label,
                     len(missing), stats.sentences_reused)
        elif distinct:
            log.info("%s: all %d sentences from the embedding store, nothing to embed", label,
                     len(distinct))
        started = time.perf_counter()
        new = embedder.encode([distinct[i] for i in missing], progress=True)
        stats.embed_seconds = time.perf_counter() - started if missing else 0.0
        if store is not None:
            store.add([keys[i] for i in missing], new)
    table = np.empty((len(distinct), embedder.dim), dtype="float32")
    for i, key in enumerate(keys):
        if key in found:
            table[i] = found[key]
    table[missing] = new
    position = {t: i for i, t in enumerate(distinct)}
    return table[[position[s] for s in sentences]], stats


def _store(folder: Path, index: SearchIndex) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        with open(tmp / "chunks.jsonl", "w", encoding="utf-8") as f:
            for c in index.chunks:
                f.write(json.dumps(asdict(c), ensure_ascii=False) + "\n")
        np.save(tmp / "row_chunk.npy", index.row_chunk)
        faiss.write_index(index.faiss, str(tmp / "index.faiss"))
        meta = {"format": INDEX_FORMAT, "key": index.key, "n_chunks": len(index.chunks),
                "n_vectors": index.n_vectors, "dim": int(index.faiss.d),
                "embedder": index.embedder.path if index.embedder else None,
                "sha256": {name: sha256_file(tmp / name) for name in INDEX_FILES}}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        if folder.exists():  # a damaged entry we just rebuilt
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.replace(tmp, folder)
        except OSError:
            if not (folder / "meta.json").exists():
                raise
            # a parallel job stored the same content first; keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
            return
        log.info("index %s: stored in %s", index.key, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _check_sums(folder: Path, sums: object) -> None:
    """Every file of the entry matches the checksum ``meta.json`` recorded for it."""
    if not isinstance(sums, dict) or set(sums) != set(INDEX_FILES):
        raise ValueError("meta.json has no checksums (an entry written by an older version)")
    bad = [name for name in INDEX_FILES if sha256_file(folder / name) != sums[name]]
    if bad:
        raise ValueError(f"checksum mismatch in {', '.join(bad)}")


def _load(folder: Path, get: Callable[[], Embedder], key: str) -> SearchIndex:
    """The stored entry, checked before the embedder is loaded (a damaged one costs no
    model load)."""
    meta = json.loads((folder / "meta.json").read_text())
    if meta.get("format") != INDEX_FORMAT or meta.get("key") != key:
        raise ValueError("format or key mismatch")
    _check_sums(folder, meta.get("sha256"))
    embedder = get()
    with open(folder / "chunks.jsonl", encoding="utf-8") as f:
        chunks = []
        for line in f:
            d = json.loads(line)
            d["lines"] = tuple(d["lines"])
            chunks.append(Chunk(**d))
    row_chunk = np.load(folder / "row_chunk.npy")
    flat = faiss.read_index(str(folder / "index.faiss"))
    if len(chunks) != meta["n_chunks"] or not flat.ntotal == meta["n_vectors"] == len(row_chunk):
        raise ValueError("counts do not match meta.json")
    if flat.d != embedder.dim:
        raise ValueError(f"vector size {flat.d} does not match the embedder's {embedder.dim}")
    distinct = len({line for c in chunks for line in c.lines})
    return SearchIndex(chunks, flat, row_chunk, embedder, key,
                       IndexStats(sentences_reused=distinct, loaded_from_cache=True))
