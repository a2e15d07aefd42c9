"""The sentence embedding store: each sentence is embedded once per embedder, whatever
index (corpus, chunking, limit, split) it later goes into.

Under ``<cache.dir>/embeddings/<embedder identity>/`` every build that embedded something
adds one immutable shard file holding the new sentences' keys (a hash of the exact text)
and vectors. A shard is written to a temporary file and renamed into place, so a reader
sees all of it or none of it; its header carries the count, the vector size and a
SHA-256 of the payload, so a damaged or truncated shard is detected, ignored (its
sentences are embedded again) and removed. Shards are named by their content: two jobs
that embed the same sentences at once write the same file, and either copy is right.

Builds that write hold an advisory lock on the folder while they look up, embed and
store, so parallel jobs (``hydra/launcher=joblib``) embed a sentence once rather than
each on their own; the lock is released by the kernel if its holder is killed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
STORE_FORMAT = 1
MAGIC = b"ARAGEMB1"
KEY_BYTES = 16
SHARD_SUFFIX = ".shard"
_STALE_TMP_S = 24 * 3600  # a temporary file this old was left by a killed writer

# shard path -> (key -> row, vectors), read once per process (a shard never changes)
Shard = tuple[dict[bytes, int], np.ndarray]
_SHARDS: dict[Path, Shard] = {}
_SHARDS_LOCK = threading.Lock()


class DamagedShard(ValueError):
    pass


def text_key(text: str) -> bytes:
    """The store's key of a sentence: a hash of the exact text embedded."""
    return hashlib.sha256(text.encode("utf-8")).digest()[:KEY_BYTES]


class EmbeddingStore:
    """Vectors of one embedder identity; ``writable=False`` reads only (cache.mode=read_only)."""

    def __init__(self, folder: Path, dim: int, writable: bool = True):
        self.folder = Path(folder)
        self.dim = dim
        self.writable = writable

    def lookup(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The stored vector of each key the store holds (keys it lacks are left out)."""
        wanted = set(keys)
        found: dict[bytes, np.ndarray] = {}
        for rows, vectors in self._shards():
            if not wanted:
                break
            for key in [k for k in wanted if k in rows]:
                found[key] = vectors[rows[key]]
                wanted.discard(key)
        return found

    def add(self, keys: list[bytes], vectors: np.ndarray) -> Path | None:
        """Store new vectors as one shard; returns its path (None if not writable or empty)."""
        if not self.writable or not keys:
            return None
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        if vectors.shape != (len(keys), self.dim):
            raise ValueError(f"{len(keys)} keys for vectors of shape {vectors.shape}")
        payload = b"".join(keys) + vectors.tobytes()
        digest = hashlib.sha256(payload).hexdigest()
        header = json.dumps({"format": STORE_FORMAT, "count": len(keys), "dim": self.dim,
                             "dtype": "<f4", "sha256": digest}).encode()
        path = self.folder / f"{digest[:32]}{SHARD_SUFFIX}"
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self.folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + struct.pack("<I", len(header)) + header + payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        with _SHARDS_LOCK:
            _SHARDS[path] = ({k: row for row, k in enumerate(keys)}, vectors)
        return path

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the folder's lock (writable stores only) while looking up, embedding, adding."""
        if not self.writable:
            yield
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self._remove_stale_tmp()
        with open(self.folder / ".lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _shards(self) -> Iterator[Shard]:
        for path in sorted(self.folder.glob(f"*{SHARD_SUFFIX}")):
            with _SHARDS_LOCK:
                cached = _SHARDS.get(path)
            if cached is None:
                try:
                    cached = read_shard(path, self.dim)
                except FileNotFoundError:
                    continue
                except (OSError, DamagedShard) as exc:
                    log.warning("embedding store: ignoring damaged shard %s (%s); its sentences "
                                "are embedded again", path, exc)
                    if self.writable:
                        path.unlink(missing_ok=True)
                    continue
                with _SHARDS_LOCK:
                    _SHARDS[path] = cached
            yield cached

    def _remove_stale_tmp(self) -> None:
        now = time.time()
        for tmp in self.folder.glob(".*.tmp"):
            try:
                if now - tmp.stat().st_mtime > _STALE_TMP_S:
                    tmp.unlink()
            except OSError:
                pass


def read_shard(path: Path, dim: int) -> Shard:
    """(key -> row, vectors) of a shard whose header, size and checksum all agree, else DamagedShard."""
    data = path.read_bytes()
    if data[:len(MAGIC)] != MAGIC or len(data) < len(MAGIC) + 4:
        raise DamagedShard("not a shard file")
    (header_len,) = struct.unpack("<I", data[len(MAGIC):len(MAGIC) + 4])
    start = len(MAGIC) + 4 + header_len
    try:
        header = json.loads(data[len(MAGIC) + 4:start])
        count, shard_dim = int(header["count"]), int(header["dim"])
    except (ValueError, KeyError, TypeError) as exc:
        raise DamagedShard(f"unreadable header: {exc}") from None
    if header.get("format") != STORE_FORMAT or header.get("dtype") != "<f4" or shard_dim != dim:
        raise DamagedShard(f"format {header.get('format')}, {shard_dim}-d {header.get('dtype')} "
                           f"vectors; expected format {STORE_FORMAT}, {dim}-d <f4")
    payload = data[start:]
    if len(payload) != count * (KEY_BYTES + 4 * dim):
        raise DamagedShard(f"{len(payload)} payload bytes for {count} vectors (truncated?)")
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise DamagedShard("checksum mismatch")
    rows = {payload[i * KEY_BYTES:(i + 1) * KEY_BYTES]: i for i in range(count)}
    vectors = np.frombuffer(payload[count * KEY_BYTES:], dtype="<f4").reshape(count, dim)
    return rows, vectors
