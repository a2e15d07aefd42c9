"""A folder dataset refuses, by name, a file that is not a regular one (a FIFO would block
the run forever on its first read; a socket or device is no document), before any read."""

from __future__ import annotations

import os
import socket

import pytest

from arag.datasets import DatasetError
from tests.test_folder import load, write_folder


def test_a_fifo_and_a_socket_are_refused_by_name_not_read(tmp_path, make_cfg):
    root = write_folder(tmp_path / "calls", pdf=False)
    os.mkfifo(root / "stream.txt")  # a read would wait forever for a writer
    os.mkfifo(root / "tasks.jsonl")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "agent.md"))
        with pytest.raises(DatasetError) as refused:
            load(make_cfg, root)
    message = str(refused.value)
    for name, kind in (("stream.txt", "named pipe (FIFO)"), ("tasks.jsonl", "named pipe (FIFO)"),
                       ("agent.md", "socket")):
        assert name in message and f"a {kind}, not a regular file" in message, (name, message)
    assert "move it out of the folder" in message
