"""``make ui``'s first step: the port the MLflow UI is to serve on is free, or the command
stops with the fix (``ARAG_UI_PORT``) instead of the server's ``[Errno 98] Address already
in use`` traceback. ``python -m tracking.ui_port 5000``."""

from __future__ import annotations

import socket
import sys


def busy(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already listens on ``host:port``."""
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def main(argv: list[str] | None = None) -> int:
    port = int((argv if argv is not None else sys.argv[1:])[0])
    if not busy(port):
        return 0
    print(f"make ui: port {port} is in use (another MLflow UI?). Fix: export "
          f"ARAG_UI_PORT={port + 1} (make ui serves there, and every address and trace link "
          f"a run prints follows it), or make ui PORT={port + 1}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
