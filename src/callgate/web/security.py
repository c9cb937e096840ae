"""The middlewares every response of `callgate serve` passes: the Server-Timing header, the
security headers, the guard on Host (DNS rebinding) and, beyond loopback, on the token, and the
limit on a request's body."""

from __future__ import annotations

import contextlib
import hmac
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response


async def with_response_headers(app: Any, scope: Any, receive: Any, send: Any,
                                extra: Callable[[], list[tuple[bytes, bytes]]]) -> None:
    """Run `app` on an HTTP request, adding `extra()` to its response's headers as the
    response starts (other scopes pass through)."""
    if scope["type"] != "http":
        await app(scope, receive, send)
        return

    async def adding(message: Any) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *extra()]
        await send(message)

    await app(scope, receive, adding)


class ServerTiming:
    """Adds `Server-Timing: app;dur=MS, cpu;dur=MS` to every response: the time from the
    request reaching the app to its response starting (the page rendered), and the CPU time
    the event loop's thread spent on it meanwhile (the same on an idle machine; less on a busy
    one), as benchmarks/serve_latency.py reads them."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        start, cpu = time.perf_counter(), time.thread_time()

        def timing() -> list[tuple[bytes, bytes]]:
            took = (time.perf_counter() - start) * 1000
            used = (time.thread_time() - cpu) * 1000
            return [(b"server-timing", f"app;dur={took:.2f}, cpu;dur={used:.2f}".encode())]

        await with_response_headers(self.app, scope, receive, send, timing)


SECURITY_HEADERS = [
    (b"x-frame-options", b"DENY"),  # no page of another site may frame these (clickjacking)
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response, the refusals of the checks below included."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await with_response_headers(self.app, scope, receive, send, lambda: SECURITY_HEADERS)


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
TOKEN_COOKIE = "callgate_token"


def host_of(header: str) -> str:
    """The host of a Host header, without its port: '[::1]:8765' -> '::1'."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def allowed_hosts(host: str, extra: list[str] | None = None) -> frozenset[str]:
    """The Host header names a server bound to `host` answers to. On loopback, the machine's
    loopback names; beyond it, also the address bound, the machine's names and addresses
    (for a wildcard bind) and the names given (`--allow-host`). Anything else may be a page
    whose DNS name was re-pointed at this server (DNS rebinding)."""
    names = set(LOOPBACK_NAMES) | {h.lower().strip("[]") for h in extra or []}
    if host.lower() not in LOOPBACK_NAMES:
        names.add(host.lower().strip("[]"))
    if host in WILDCARDS:
        import socket

        for name in {socket.gethostname(), socket.getfqdn()}:
            names.add(name.lower())
            with contextlib.suppress(OSError):
                names |= {str(info[4][0]).lower() for info in socket.getaddrinfo(name, None)}
    return frozenset(names - WILDCARDS)


def same_token(given: str, token: str) -> bool:
    # bytes, so that a header's non-ASCII characters are a mismatch and not a TypeError
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), token.encode())


class Guard:
    """Refuses a request whose Host header is not one of `hosts` (400); and, with
    `read_token` (a bind beyond loopback), one that does not carry the token (401) in the
    X-Callgate-Token header, an Authorization Bearer header or the cookie a link with
    ?token=T sets (that link answers with the cookie and a redirect to itself without the
    token, so the token does not stay in the address bar or the history)."""

    def __init__(self, app: Any, hosts: frozenset[str], read_token: str | None) -> None:
        self.app, self.hosts, self.token = app, hosts, read_token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if host_of(request.headers.get("host", "")) not in self.hosts:
            await PlainTextResponse("Invalid host header", status_code=400)(scope, receive, send)
            return
        if self.token is not None:
            given = (request.headers.get("x-callgate-token")
                     or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
                     or request.cookies.get(TOKEN_COOKIE) or "")
            in_link = request.query_params.get("token")
            if in_link is not None and same_token(in_link, self.token):
                rest = urlencode([(k, v) for k, v in request.query_params.multi_items()
                                  if k != "token"])
                response: Response = RedirectResponse(
                    request.url.path + (f"?{rest}" if rest else ""), status_code=303)
                response.set_cookie(TOKEN_COOKIE, self.token, httponly=True,
                                    samesite="strict")
                await response(scope, receive, send)
                return
            if not same_token(given, self.token):
                await PlainTextResponse(
                    "this server needs its token for every request: open a link with "
                    "?token=T once, or send an X-Callgate-Token header",
                    status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


MAX_BODY = 1024 * 1024  # bytes: a label, an undo, an adjudication is well under 10 KiB


class BodyLimit:
    """Reads a request's body before the app does, and answers 413 (one line) once it is over
    `limit` bytes, by its Content-Length or as its chunks arrive: no route ever holds, parses
    or stores more than that (a 30 MB note once made every later label reload a 30 MB line).
    The rest of a refused body is read and dropped, up to `drain` bytes, so that the client,
    still sending, reads the 413 rather than a reset connection; past that the connection is
    closed."""

    def __init__(self, app: Any, limit: int = MAX_BODY, drain: int = 64 * MAX_BODY) -> None:
        self.app, self.limit, self.drain = app, limit, drain

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.drain:
            await self.refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more and size <= self.drain:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            size += len(message.get("body", b""))
            if size <= self.limit:
                chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        if size > self.limit:
            await self.refuse(scope, receive, send)
            return
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def refuse(self, scope: Any, receive: Any, send: Any) -> None:
        message = (f"the request body is over {self.limit:,} bytes, the most this server "
                   "takes; nothing was saved")
        headers = {"connection": "close"}
        response: Response = (
            JSONResponse({"error": message}, status_code=413, headers=headers)
            if scope.get("path", "").startswith("/api/") else
            PlainTextResponse(message, status_code=413, headers=headers))
        await response(scope, receive, send)
