"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

Replies are scripted: a rule matches a substring of the request's last user message and hands
out its replies in order, the last one repeating. Requests no rule matches get the default
reply: an OpenRouter-shaped call of the first offered tool. Every request is recorded (path,
headers, body, arrival time) so tests can assert what went over the wire.

In tests: `Loopback().start()` serves from a background thread (see the `loopback` fixture).
As a script, `python tests/loopback.py --latency 0.05` serves until killed, after printing
`READY <base url>` (the benchmark runs it in its own process so its CPU is not the client's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
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


class Loopback:
    def __init__(
        self,
        latency: float = 0.0,
        default: Callable[[dict[str, Any]], Reply] = default_reply,
        record: bool = True,
    ) -> None:
        self.latency = latency
        self.default = default
        self.record = record
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
        if not request.path.endswith("/chat/completions") or not isinstance(body, dict):
            return web.json_response({"error": {"message": "not found"}}, status=404)
        reply = self._next(body, seen.marker)
        if reply.delay or self.latency:
            await asyncio.sleep(reply.delay + self.latency)
        if reply.raw is not None:
            return web.Response(
                status=reply.status,
                text=reply.raw,
                content_type="application/json",
                headers=reply.headers,
            )
        return web.json_response(reply.body, status=reply.status, headers=reply.headers)

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
    args = parser.parse_args()
    server = Loopback(latency=args.latency, record=False)

    async def serve() -> None:
        await server._serve(args.port)
        print(f"READY {server.base_url}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
