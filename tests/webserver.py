"""`callgate serve` as a real server for tests: the installed CLI in a subprocess on a free
loopback port, waited for until it answers, stopped by its process id."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def callgate_script() -> str:
    return str(Path(sys.executable).parent / "callgate")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None  # the 3xx itself is the answer


class Server:
    def __init__(self, db: Path, *args: str, probe: str = "/", host: str = "127.0.0.1"
                 ) -> None:
        self.port = free_port()
        self.base = f"http://{f'[{host}]' if ':' in host else host}:{self.port}"
        bind = ["--host", host] if host != "127.0.0.1" else []
        self.process = subprocess.Popen(
            [callgate_script(), "serve", "--db", str(db), "--port", str(self.port), *bind,
             *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # serve prints its address once its socket listens: from then on a connection waits
        # in the socket's backlog until the app answers, so one probe with a long timeout is
        # enough (no polling, whatever the load).
        announced = threading.Event()
        first: list[str] = []

        def read_announcement() -> None:
            assert self.process.stdout is not None
            first.append(self.process.stdout.readline())
            announced.set()

        threading.Thread(target=read_announcement, daemon=True).start()
        if not announced.wait(60) or not first[0].startswith("callgate serve:"):
            self.process.kill()
            self.process.wait()
            stderr = self.process.stderr.read() if self.process.stderr else ""
            self.stop()
            raise RuntimeError(f"serve did not start within 60 s: {stderr}")
        with contextlib.suppress(urllib.error.HTTPError):  # it answers, if only with a refusal
            urllib.request.urlopen(self.base + probe, timeout=60).read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def request(self, path: str, *, data: bytes | None = None,
                headers: dict[str, str] | None = None, method: str | None = None,
                no_redirect: bool = False) -> tuple[int, str, dict[str, str]]:
        req = urllib.request.Request(self.base + path, data=data, headers=headers or {},
                                     method=method)
        opener = urllib.request.build_opener(*([NoRedirect()] if no_redirect else []))
        try:
            with opener.open(req, timeout=30) as response:
                return response.status, response.read().decode(), dict(response.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), dict(exc.headers)

    def get(self, path: str) -> tuple[int, str]:
        status, body, _ = self.request(path)
        return status, body

    def json(self, path: str) -> Any:
        status, body = self.get(path)
        assert status == 200, body
        return json.loads(body)

    def post_json(self, path: str, payload: Any, headers: dict[str, str] | None = None
                  ) -> tuple[int, Any]:
        status, body, _ = self.request(
            path, data=json.dumps(payload).encode(), method="POST",
            headers={"content-type": "application/json", **(headers or {})})
        return status, json.loads(body)
