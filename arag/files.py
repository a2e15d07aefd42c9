"""Files written whole or not at all: a reader (a parallel job, a later run) never sees half
of one, and a crash mid-write leaves the old file, not a torn one. An append is whole too:
a line that cannot be written in full (a full disk) is taken back."""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
from pathlib import Path

# a write that failed because of where it writes, not what: what each means decides the fix
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
NOT_WRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
MISPLACED = frozenset({errno.ENOTDIR, errno.EISDIR, errno.EEXIST})  # a file for a folder


def is_storage_failure(exc: BaseException) -> bool:
    """A full disk, a read-only or unwritable place, a file where a folder should be."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL | NOT_WRITABLE | MISPLACED


def write_text_atomically(path: Path, text: str) -> None:
    write_bytes_atomically(path, text.encode("utf-8"))


def write_bytes_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is not None:
            raise
        # a full disk's error names no file: name the one being written, so the message
        # says which place is full
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_whole(path: Path, data: bytes) -> None:
    """Append ``data`` and fsync it; if it cannot all be written, the file is cut back to
    where it was and the OSError (naming ``path``) is raised."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            _cut_back(fd, start)
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
    finally:
        os.close(fd)


def _cut_back(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass  # the disk refuses even that: the next read sets the torn line aside


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
