"""Chunking, embeddings, the cached FAISS index, BM25, ranking by method, HyDE and rerank."""

from arag.retrieval.bm25 import Bm25Index, Tokenizer, bm25_for
from arag.retrieval.chunking import chunk_document
from arag.retrieval.embedder import Embedder, get_embedder, packaged_minilm_path
from arag.retrieval.index import Hit, SearchIndex, build_chunks, index_key, load_or_build_index
from arag.retrieval.search import Method, RetrievalSettings, fuse, rank_chunks, with_neighbors

__all__ = [
    "Bm25Index", "Embedder", "Hit", "Method", "RetrievalSettings", "SearchIndex", "Tokenizer",
    "bm25_for", "build_chunks", "chunk_document", "fuse", "get_embedder", "index_key",
    "load_or_build_index", "packaged_minilm_path", "rank_chunks", "with_neighbors",
]
