"""Chunking, embeddings and the cached FAISS/keyword search index."""

from arag.retrieval.chunking import chunk_document
from arag.retrieval.embedder import Embedder, get_embedder, packaged_minilm_path
from arag.retrieval.index import Hit, SearchIndex, build_chunks, index_key, load_or_build_index

__all__ = [
    "Embedder", "Hit", "SearchIndex", "build_chunks", "chunk_document", "get_embedder",
    "index_key", "load_or_build_index", "packaged_minilm_path",
]
