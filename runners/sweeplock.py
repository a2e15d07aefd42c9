"""One sweep at a time per configuration: a sweep (or a single run) holds an exclusive
lock on the folder of each job's predictions, and on its sweep folder, for as long as it
runs. A second command that would write the same predictions (or into the same sweep
folder) stops at once, naming the process that holds them and when it started, instead
of appending to the same logs and paying for the same calls twice.

The locks are ``fcntl.flock`` locks on a ``.lock`` file in each folder: the kernel drops
them when the process ends, however it ends (SIGKILL included), so a killed sweep never
leaves a stale lock behind. Each lock file holds its holder's pid, start time and command,
for the message the next command prints.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from arag.redact import redact

LOCK_NAME = ".lock"


class SweepBusy(RuntimeError):
    """Another live process holds a folder this command would write to."""


@dataclass
class FolderLocks:
    """Locks held by this process; released by ``release`` or when the process ends."""

    files: list[IO[str]] = field(default_factory=list)

    def release(self) -> None:
        for f in self.files:
            f.close()  # closing the file drops its flock
        self.files.clear()


def hold(folders: dict[Path, str]) -> FolderLocks:
    """Lock every folder (folder -> what it holds, for the message) or none: raises
    SweepBusy naming the holder of the first one another process holds."""
    locks = FolderLocks()
    me = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                     "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                     "command": redact(" ".join(sys.argv))[:500]})
    try:
        for folder in sorted(folders, key=str):  # one order everywhere: no deadlock
            folder.mkdir(parents=True, exist_ok=True)
            f = open(folder / LOCK_NAME, "a+", encoding="utf-8")  # noqa: SIM115 - kept open
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                raise SweepBusy(busy_message(folder, folders[folder])) from None
            f.truncate(0)
            f.write(me)
            f.flush()
            locks.files.append(f)
    except BaseException:
        locks.release()
        raise
    return locks


def busy_message(folder: Path, what: str) -> str:
    try:
        holder = json.loads((folder / LOCK_NAME).read_text(encoding="utf-8"))
        who = (f"process {holder['pid']} on {holder['host']}, started {holder['started']} "
               f"({holder['command']})")
    except (OSError, ValueError, KeyError):
        who = "another process that has just started"
    return (f"{what} ({folder}) is in use by {who}. Two runs of the same configuration "
            f"would write the same records and pay for the same calls. Fix: wait for it to "
            f"end and run the command again (what it finished is reused), or stop it first")
