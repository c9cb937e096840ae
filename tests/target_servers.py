"""Hostile HTTP targets on 127.0.0.1 for tests/running/test_target_edges.py: one that redirects
(to another listener, or on its own origin), one that answers a gzip bomb, one whose chunked
reply never ends. Each records the paths it was asked."""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = {"message": {"content": "hello"}}


class Hostile(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.asked: list[str] = []
        self.redirect_to = ""  # where /away sends its POST
        self.bomb_size = 8 << 20  # bytes /bomb inflates to
        # Polled every 10 ms, not serve_forever's 0.5 s: stop() waits for the next poll, and
        # each test's two servers took ~1 s of teardown.
        threading.Thread(target=self.serve_forever, args=(0.01,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: Hostile
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.asked.append(self.path)
        route = {"/away": self._away, "/here": self._here, "/bomb": self._bomb,
                 "/endless": self._endless}.get(self.path, self._answer)
        route()

    def _send(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _answer(self) -> None:
        self._send(200, json.dumps(ANSWER).encode(), Content_Type="application/json")

    def _away(self) -> None:
        self._send(307, b"", Location=self.server.redirect_to)

    def _here(self) -> None:
        self._send(307, b"", Location="/answer")

    def _bomb(self) -> None:
        self._send(200, gzip.compress(b" " * self.server.bomb_size),
                   Content_Encoding="gzip", Content_Type="application/json")

    def _endless(self) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b"[" * 65536
        try:
            while True:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass

    def log_message(self, *args: Any) -> None:
        pass
