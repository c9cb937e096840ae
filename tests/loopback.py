"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

Replies are scripted: a rule matches a substring of the request's last user message and hands
out its replies in order, the last one repeating. Requests no rule matches get the default
reply: an OpenRouter-shaped call of the first offered tool. Every request is recorded (path,
headers, body, arrival time) so tests can assert what went over the wire.

With a `TokenBucket` it is rate-limited as a provider is: a request that finds the bucket empty
is answered 429 at once, with a Retry-After (whole seconds, rounded up) until the next token,
and every answer carries OpenAI's x-ratelimit-*-requests headers (limit: the burst; remaining;
reset: until the bucket is full). Without one (the default) every request is served.

In tests: `Loopback().start()` serves from a background thread (see the `loopback` fixture).
As a script, `python tests/loopback.py --latency 0.05` serves until killed, after printing
`READY <base url>` (the benchmark runs it in its own process so its CPU is not the client's);
`--rate 40 --burst 20` adds a bucket, and GET .../stats says what it admitted and refused.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

PROVIDER = "Loopback"
COST = 0.000125


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a JSON body, or a raw text body (e.g. malformed JSON)."""

    status: int = 200
    body: Any = None
    raw: str | None = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    # Held until the test sets it: a reply "in flight" for as long as the test needs, whatever
    # the load (a fixed delay can run out before a busy machine reaches the test's next step).
    hold: threading.Event | None = None


def tool_call(name: str, arguments: str | dict[str, Any], call_id: str = "call_1") -> dict:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def completion(
    *,
    calls: list[dict[str, Any]] | None = None,
    content: str | None = None,
    finish_reason: str | None = None,
    provider: str | None = PROVIDER,
    cost: float | None = COST,
    usage: bool = True,
    model: str = "test/model",
) -> dict[str, Any]:
    """A chat completion; OpenRouter-shaped (top-level provider, usage.cost) by default."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    body: dict[str, Any] = {
        "id": "gen-loopback",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
                "message": message,
            }
        ],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
        if cost is not None:
            body["usage"]["cost"] = cost
    if provider is not None:
        body["provider"] = provider
    return body


def ok(**kwargs: Any) -> Reply:
    return Reply(body=completion(**kwargs))


def error(status: int, message: str, **headers: str) -> Reply:
    return Reply(
        status=status, body={"error": {"message": message, "code": status}}, headers=headers
    )


def default_reply(request: dict[str, Any]) -> Reply:
    """Call the first offered tool with empty arguments; answer in text when none is offered."""
    tools = request.get("tools") or []
    if tools:
        return ok(calls=[tool_call(tools[0]["function"]["name"], "{}")])
    return ok(content="ok")


def follows_injection(probability: float, seed: int, marker: str, first: dict[str, Any],
                      wanted: dict[str, Any], answer: str = "Done.") -> Callable[
                          [dict[str, Any]], Reply]:
    """A model that makes the call `first` (a tool_call), then, when the last tool result holds
    `marker` (an injected instruction), makes the call `wanted` with `probability`, else
    answers `answer` in text. The draw is a hash of the seed and the conversation's first user
    message: the same conversation always gets the same answer, another seed another draw."""
    import hashlib

    def reply(request: dict[str, Any]) -> Reply:
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        tools = [m for m in messages if m.get("role") == "tool"]
        if not tools:
            return ok(calls=[first])
        if len(tools) == 1 and marker in str(tools[-1].get("content")):
            user = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
            digest = hashlib.sha256(f"{seed}|{user}".encode()).digest()
            if int.from_bytes(digest[:8], "big") / 2**64 < probability:
                return ok(calls=[wanted])
        return ok(content=answer)

    return reply


def last_user_text(request: dict[str, Any]) -> str:
    """The text of a request's last user message ("" when there is none)."""
    for message in reversed(request.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def turn_of(request: dict[str, Any]) -> int:
    """Which turn of a conversation a request is: assistant messages after the last user one."""
    turn = 0
    for message in request.get("messages") or []:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "user":
            turn = 0
        elif message.get("role") == "assistant":
            turn += 1
    return turn


@dataclass(frozen=True)
class Seen:
    """A request as the server received it."""

    path: str
    headers: dict[str, str]
    raw: str
    body: Any
    at: float

    @property
    def marker(self) -> str:
        """The last user message's text: tests put the case's name in it."""
        for message in reversed(
            self.body.get("messages", []) if isinstance(self.body, dict) else []
        ):
            if message.get("role") == "user":
                return str(message.get("content"))
        return ""


class TokenBucket:
    """`rate` requests a second with bursts of `burst`; after `halve_after` admitted requests
    the rate halves (a provider that throttles a key midway)."""

    def __init__(self, rate: float, burst: int, halve_after: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.halve_after = halve_after
        self.clock = clock
        self.tokens = float(burst)
        self.admitted = 0
        self.refused = 0
        self._at = clock()

    def take(self) -> tuple[bool, dict[str, str]]:
        """Admit a request or refuse it; the rate-limit headers of its answer either way."""
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self._at) * self.rate)
        self._at = now
        admitted = self.tokens >= 1
        if admitted:
            self.tokens -= 1
            self.admitted += 1
            if self.halve_after is not None and self.admitted == self.halve_after:
                self.rate /= 2
        else:
            self.refused += 1
        full = (self.burst - self.tokens) / self.rate
        headers = {
            "x-ratelimit-limit-requests": str(self.burst),
            "x-ratelimit-remaining-requests": str(int(self.tokens)),
            "x-ratelimit-reset-requests": f"{full * 1000:.0f}ms",
        }
        if not admitted:
            headers["Retry-After"] = str(max(1, math.ceil((1 - self.tokens) / self.rate)))
        return admitted, headers


class Loopback:
    def __init__(
        self,
        latency: float = 0.0,
        default: Callable[[dict[str, Any]], Reply] = default_reply,
        record: bool = True,
        bucket: TokenBucket | None = None,
    ) -> None:
        self.latency = latency
        self.default = default
        self.record = record
        self.bucket = bucket
        self._rules: list[tuple[str, list[Reply], list[int]]] = []
        self._turn_rules: list[tuple[str, list[Reply]]] = []
        self._seen: list[Seen] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # ------------------------------------------------------------------ scripting

    def script(self, match: str, *replies: Reply) -> None:
        """Requests whose last user message contains `match` get `replies` in order; the
        latest script for a request wins."""
        with self._lock:
            self._rules.insert(0, (match, list(replies), [0]))

    def script_turns(self, match: str, *turns: Reply) -> None:
        """Requests whose last user message contains `match` get the reply of their turn (the
        number of assistant messages after that user message; the last reply repeating), in
        whatever order the requests of concurrent conversations arrive. Checked before
        `script` rules; the latest wins."""
        with self._lock:
            self._turn_rules.insert(0, (match, list(turns)))

    def reset(self) -> None:
        with self._lock:
            self._rules.clear()
            self._turn_rules.clear()
            self._seen.clear()

    @property
    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self._seen)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"

    def _next(self, request: dict[str, Any], marker: str) -> Reply:
        with self._lock:
            for match, turns in self._turn_rules:
                if match in marker:
                    return turns[min(turn_of(request), len(turns) - 1)]
            for match, replies, position in self._rules:
                if match in marker:
                    reply = replies[min(position[0], len(replies) - 1)]
                    position[0] += 1
                    return reply
        return self.default(request)

    # ------------------------------------------------------------------ serving

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = (await request.read()).decode("utf-8", errors="replace")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        seen = Seen(request.path, dict(request.headers), raw, body, time.monotonic())
        if self.record:
            with self._lock:
                self._seen.append(seen)
        if request.path.endswith("/stats") and self.bucket is not None:
            return web.json_response({"admitted": self.bucket.admitted,
                                      "refused": self.bucket.refused})
        if not request.path.endswith("/chat/completions") or not isinstance(body, dict):
            return web.json_response({"error": {"message": "not found"}}, status=404)
        limits: dict[str, str] = {}
        if self.bucket is not None:
            admitted, limits = self.bucket.take()
            if not admitted:  # at once, as providers refuse
                return web.json_response(
                    {"error": {"message": "rate limit reached", "code": 429}}, status=429,
                    headers=limits)
        reply = self._next(body, seen.marker)
        if reply.delay or self.latency:
            await asyncio.sleep(reply.delay + self.latency)
        while reply.hold is not None and not reply.hold.is_set():
            await asyncio.sleep(0.02)
        headers = {**limits, **reply.headers}
        if reply.raw is not None:
            return web.Response(
                status=reply.status,
                text=reply.raw,
                content_type="application/json",
                headers=headers,
            )
        return web.json_response(reply.body, status=reply.status, headers=headers)

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _serve(self, port: int = 0) -> None:
        self._runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, backlog=1024)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def start(self) -> Loopback:
        """Serve from a background thread; returns once the port is open."""
        ready = threading.Event()

        def main() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._serve())
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._runner.cleanup())  # type: ignore[union-attr]
            self._loop.close()

        self._thread = threading.Thread(target=main, name="loopback", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the loopback server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def __enter__(self) -> Loopback:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--rate", type=float, help="a token bucket: requests a second")
    parser.add_argument("--burst", type=int, default=20, help="the bucket's size")
    parser.add_argument("--halve-after", type=int, help="halve the rate after N admitted")
    args = parser.parse_args()
    bucket = TokenBucket(args.rate, args.burst, args.halve_after) if args.rate else None
    server = Loopback(latency=args.latency, record=False, bucket=bucket)

    async def serve() -> None:
        await server._serve(args.port)
        print(f"READY {server.base_url}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
