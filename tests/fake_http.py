"""What the fake APIs on 127.0.0.1 share (tests/anthropic_fake.py, tests/openai_fake.py):
a threaded HTTP server run as a context manager, quiet about clients that hang up, and a
request handler that reads and writes JSON."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JSONHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def read_json(self) -> Any:
        """The request's JSON body; None when the client hung up before sending all of it
        (a killed run): such a request never reaches a real API's model, so the fakes
        neither record nor answer it."""
        length = int(self.headers.get("content-length", 0))
        body = self.rfile.read(length)
        if len(body) < length:
            return None
        return json.loads(body or b"{}")

    def header_dict(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def hang_up(self) -> None:
        """Close the socket without a reply (a dropped connection)."""
        self.close_connection = True
        self.connection.close()

    def _send(self, status: int, payload: bytes, headers: dict) -> None:
        self.send_response(status)
        if "content-type" not in headers:
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for k, v in headers.items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(payload)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up (a killed run, a timeout) is not our error


class FakeServer:
    """Serves a handler class on a free port of 127.0.0.1 until the ``with`` block ends."""

    server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = _QuietServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __exit__(self, *exc: Any) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
