"""A loopback stand-in for the part of GitHub's REST API a pull-request comment uses: list an
issue's comments (paged), create one, update one. A token named in `read_only` may read but
not write (403), as a pull request from a fork's token. Every request is recorded."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeGitHub:
    repository: str = "acme/agent"
    read_only: set[str] = field(default_factory=set)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, token
    next_id: int = 1000

    def start(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake.handle(self, "GET")

            def do_POST(self) -> None:
                fake.handle(self, "POST")

            def do_PATCH(self) -> None:
                fake.handle(self, "PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # Polled every 10 ms, not serve_forever's 0.5 s: stop() waits for the next poll.
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, request: BaseHTTPRequestHandler, method: str) -> None:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.requests.append((method, request.path, token))
        length = int(request.headers.get("Content-Length") or 0)
        payload = json.loads(request.rfile.read(length)) if length else None
        status, body = self.route(method, request.path, token, payload)
        data = json.dumps(body).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def route(self, method: str, path: str, token: str, payload: Any) -> tuple[int, Any]:
        prefix = f"/repos/{self.repository}"
        if not token:
            return 401, {"message": "Requires authentication"}
        if method != "GET" and token in self.read_only:
            return 403, {"message": "Resource not accessible by integration"}
        listed = re.fullmatch(prefix + r"/issues/(\d+)/comments(?:\?per_page=(\d+)&page=(\d+))?",
                              path)
        if listed and method == "GET":
            per_page, page = int(listed[2] or 30), int(listed[3] or 1)
            found = self.comments.get(int(listed[1]), [])
            return 200, found[(page - 1) * per_page:page * per_page]
        if listed and method == "POST":
            self.next_id += 1
            comment = {"id": self.next_id, "body": payload["body"]}
            self.comments.setdefault(int(listed[1]), []).append(comment)
            return 201, comment
        edited = re.fullmatch(prefix + r"/issues/comments/(\d+)", path)
        if edited and method == "PATCH":
            for comment in (c for cs in self.comments.values() for c in cs):
                if comment["id"] == int(edited[1]):
                    comment["body"] = payload["body"]
                    return 200, comment
        return 404, {"message": "Not Found"}
