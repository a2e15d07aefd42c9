"""Chunking, embeddings, the sentence embedding store, the cached FAISS index, BM25,
ranking by method, HyDE and rerank."""

from arag.retrieval.bm25 import Bm25Index, Tokenizer, bm25_for
from arag.retrieval.chunking import chunk_document
from arag.retrieval.embedder import (
    Embedder,
    check_precision,
    cpu_has_bf16,
    get_embedder,
    packaged_minilm_path,
)
from arag.retrieval.index import (
    Hit,
    IndexStats,
    KeywordStandIn,
    SearchIndex,
    build_chunks,
    dry_run_index,
    embed_sentences,
    index_key,
    load_or_build_index,
)
from arag.retrieval.search import Method, RetrievalSettings, fuse, rank_chunks, with_neighbors
from arag.retrieval.store import EmbeddingStore, text_key

__all__ = [
    "Bm25Index", "Embedder", "EmbeddingStore", "Hit", "IndexStats", "KeywordStandIn", "Method",
    "RetrievalSettings", "SearchIndex", "Tokenizer", "bm25_for", "build_chunks",
    "check_precision", "chunk_document", "cpu_has_bf16", "dry_run_index", "embed_sentences",
    "fuse",
    "get_embedder", "index_key", "load_or_build_index", "packaged_minilm_path", "rank_chunks",
    "text_key", "with_neighbors",
]
