"""Files written whole or not at all: a reader (a parallel job, a later run) never sees half
of one, and a crash mid-write leaves the old file, not a torn one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
