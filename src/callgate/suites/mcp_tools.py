"""An MCP server over stdio, driven from synchronous code: its tool list and its tool calls.

The client lives in the suites stage because a suite's MCP environment is loaded with the
suite (suites is the lowest stage that reads suite.json, and every stage above asks a suite's
environment for tool results through it), and it is I/O at the edge in the way importing a
Python environment is: the `mcp` SDK is imported only when a server is started, so loading a
suite without one costs nothing.

The SDK is async and the environment interface is not: each server's session runs as one task
on a private event loop in a daemon thread (shared by every server of the process), and the
synchronous methods wait for their request there, bounded by the timeout. A server that fails
to start, dies or does not answer in time raises McpFailure; `close()` ends the process.

What a server writes is read up to LINE_LIMIT bytes a line (one JSON-RPC message a line), as
an HTTP reply is read up to models.bounded.REPLY_LIMIT: the SDK's stdio reader buffers a line
until its newline with no bound and takes no limit, so callgate wraps the server process's
stdout as the SDK opens it (`_bound_stdio`) and stops reading at the first line past the limit.
The session then ends and the request in flight raises McpFailure saying so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import os
import shlex
import tempfile
import threading
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from callgate.redaction import clean, secrets_in

DEFAULT_TIMEOUT = 30.0  # seconds for the server to start and for each request it answers
MAX_TIMEOUT = 86400.0  # a day: more is a typo (1e400 reads as infinity), and threads refuse it
LINE_LIMIT = 64 * 1024 * 1024  # bytes of one line a server writes (models.bounded.REPLY_LIMIT)

_T = TypeVar("_T")


class McpFailure(Exception):
    """The MCP server did not start, died or did not answer: never the model's fault. Its
    message is one line, through callgate.redaction's rule (a server's words may quote a key
    or hold terminal escapes). `slow_start`: it did not start within the timeout."""

    def __init__(self, message: str, *, slow_start: bool = False) -> None:
        super().__init__(clean(" ".join(message.split()), secrets_in(os.environ)))
        self.slow_start = slow_start


HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str | None
    input_schema: dict[str, Any]
    # The server's annotations among HINTS that it gave as true or false; None for none.
    annotations: dict[str, bool] | None = None

    def as_catalogue_entry(self) -> dict[str, Any]:
        """The tool as tools.json holds it: an OpenAI function tool, and beside `function` the
        MCP annotations the server gave (kept by callgate, never sent to the model)."""
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = self.input_schema
        entry: dict[str, Any] = {"type": "function", "function": function}
        if self.annotations:
            entry["annotations"] = dict(self.annotations)
        return entry


def _hints(tool: Any) -> dict[str, bool] | None:
    """The HINTS a listed tool's annotations give as booleans (the SDK's field names are in
    snake case), in HINTS order; None when it gives none."""
    given = getattr(tool, "annotations", None)
    if given is None:
        return None
    found: dict[str, bool] = {}
    for hint in HINTS:
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in hint)
        value = getattr(given, snake, getattr(given, hint, None))
        if isinstance(value, bool):
            found[hint] = value
    return found or None


@dataclass(frozen=True)
class ToolReply:
    is_error: bool
    text: str  # the text blocks of the result's content, joined by newlines


class _LineTooLong(ConnectionError):
    """A server's line past the limit: the SDK's reader ends on a ConnectionError, quietly."""


# The line limit and the callback of the server whose session the current task runs, read
# where the SDK opens the process (each server's session is a task of its own).
_stdio_bound: contextvars.ContextVar[tuple[int, Any] | None] = contextvars.ContextVar(
    "callgate_mcp_stdio_bound", default=None)


class _BoundedStdout:
    """A server's stdout, as the SDK reads it (`receive`, `aclose`), raising _LineTooLong once
    a line runs past `limit` bytes with no newline; that chunk and all after are never given."""

    def __init__(self, inner: Any, limit: int, over: Any) -> None:
        self._inner = inner
        self._limit = limit
        self._over = over
        self._run = 0  # bytes since the last newline
        self._stopped = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """The bytes up to and including the next newline (or to the end of the stream): the
        SDK joins what it is given to its buffer each time, so a long line handed over in
        pipe-sized chunks would cost it time quadratic in the line's length."""
        import anyio

        if self._stopped:
            raise _LineTooLong("stopped")
        parts: list[bytes] = []
        while True:
            try:
                chunk: bytes = await self._inner.receive(max_bytes)
            except anyio.EndOfStream:
                if parts:
                    return b"".join(parts)
                raise
            self._check(chunk)
            parts.append(chunk)
            if b"\n" in chunk:
                return b"".join(parts)

    def _check(self, chunk: bytes) -> None:
        first = chunk.find(b"\n")
        if first < 0:
            longest = self._run = self._run + len(chunk)
        else:
            last = chunk.rfind(b"\n")
            longest = max(self._run + first, _longest_inner_line(chunk, first, last))
            self._run = len(chunk) - last - 1
        if max(longest, self._run) > self._limit:
            self._stopped = True
            self._over()
            raise _LineTooLong(f"a line over {self._limit} bytes")

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __aiter__(self) -> _BoundedStdout:
        return self

    async def __anext__(self) -> bytes:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


def _longest_inner_line(chunk: bytes, first: int, last: int) -> int:
    """The longest line that starts and ends inside `chunk` (between its first and last
    newline); 0 when there is none."""
    if last <= first:
        return 0
    return max(len(line) for line in chunk[first + 1:last].split(b"\n"))


_process_class: Any = None


def _bounded_process(process: Any, stdout: _BoundedStdout) -> Any:
    """The server process as the SDK opened it (an anyio Process, which the SDK's kill path
    asserts), its stdout bounded; anyio is imported with the SDK, when a server starts."""
    global _process_class
    if _process_class is None:
        from anyio.abc import Process

        class BoundedProcess(Process):
            def __init__(self, inner: Any, out: _BoundedStdout) -> None:
                self._inner = inner
                self._out = out
                # The asyncio process, which the SDK's shutdown closes the transport of.
                self._process = getattr(inner, "_process", None)

            async def wait(self) -> int:
                return int(await self._inner.wait())

            async def aclose(self) -> None:
                await self._inner.aclose()

            def terminate(self) -> None:
                self._inner.terminate()

            def kill(self) -> None:
                self._inner.kill()

            def send_signal(self, signal: Any) -> None:
                self._inner.send_signal(signal)

            @property
            def pid(self) -> int:
                return int(self._inner.pid)

            @property
            def returncode(self) -> int | None:
                code: int | None = self._inner.returncode
                return code

            @property
            def stdin(self) -> Any:
                return self._inner.stdin

            @property
            def stdout(self) -> Any:
                return self._out

            @property
            def stderr(self) -> Any:
                return self._inner.stderr

        _process_class = BoundedProcess
    return _process_class(process, stdout)


def _bound_stdio() -> None:
    """Wrap the SDK's process opener once, so a session started under `_stdio_bound` reads
    its server's stdout through _BoundedStdout (the SDK takes no limit of its own);
    tests/models/test_reply_caps.py fails if the SDK renames the opener."""
    from mcp.client import stdio

    opener = getattr(stdio, "_create_platform_compatible_process", None)
    if opener is None or getattr(opener, "callgate_bounded", False):
        return

    async def bounded(*args: Any, **kwargs: Any) -> Any:
        process = await opener(*args, **kwargs)
        bound = _stdio_bound.get()
        if bound is None or process.stdout is None:
            return process
        limit, over = bound
        return _bounded_process(process, _BoundedStdout(process.stdout, limit, over))

    bounded.callgate_bounded = True  # type: ignore[attr-defined]
    stdio._create_platform_compatible_process = bounded


def parse_command(command: str) -> list[str]:
    """`"python server.py --flag"` as its words (shell quoting rules); ValueError if empty."""
    words = shlex.split(command)
    if not words:
        raise ValueError("the command is empty")
    return words


_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _private_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None:
            # The SDK logs a line it cannot read with its traceback; with no handler set up,
            # Python's last resort prints it on stderr. What a server did wrong reaches the
            # user as McpFailure's one line instead.
            logging.getLogger("mcp").addHandler(logging.NullHandler())
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="callgate-mcp", daemon=True).start()
            _loop = loop
        return _loop


def _reason(exc: BaseException) -> str:
    """The innermost cause of an SDK failure (anyio wraps them in exception groups), on one
    line: an answer the SDK's models refuse is named by its first wrong field."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError":
        first = errors()[0] if errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ())) or "the answer"
        return f"the server's answer is not MCP: {where}: {first.get('msg', 'invalid')}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpServer:
    """One server process and its session. Use as a context manager, or call close()."""

    def __init__(self, command: Sequence[str], *, cwd: Path | None = None,
                 env: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT, line_limit: int = LINE_LIMIT) -> None:
        self.command = list(command)
        self.timeout = timeout
        self.line_limit = line_limit
        self._overrun = False  # the server wrote a line past line_limit: the session ended
        self._cwd = cwd
        self._env = dict(env or {})
        self._loop = _private_loop()
        # The server's stderr, kept from the terminal and read back when it fails to start.
        self._errlog = tempfile.TemporaryFile(  # noqa: SIM115 - closed by close()
            mode="w+", encoding="utf-8", errors="replace")
        self._ready: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._closing: asyncio.Event | None = None
        self._session: Any = None
        self._task: concurrent.futures.Future[None] | None = None
        self._closed = False
        # What the server said it is when the session started: {"name", "version"}.
        self.server_info: dict[str, str] | None = None

    def start(self) -> McpServer:
        self._task = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        try:
            self._ready.result(self.timeout)
        except concurrent.futures.TimeoutError:
            why, slow = f"the server did not start within {self.timeout:g} s", True
        except Exception as exc:
            reason = self._overrun_message() if self._overrun else _reason(exc)
            why, slow = f"the server did not start: {reason}", False
        else:
            return self
        why += self._stderr_tail()
        self.close()
        raise McpFailure(why, slow_start=slow)

    async def _serve(self) -> None:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        self._closing = asyncio.Event()
        _bound_stdio()
        _stdio_bound.set((self.line_limit, self._overran))
        params = StdioServerParameters(command=self.command[0], args=self.command[1:],
                                       env=self._env, cwd=self._cwd)
        try:
            async with stdio_client(params, errlog=self._errlog) as (read, write), \
                    ClientSession(read, write) as session:
                started = await session.initialize()
                info = getattr(started, "server_info", None)
                if info is not None:
                    self.server_info = {"name": str(info.name), "version": str(info.version)}
                self._session = session
                self._ready.set_result(None)
                await self._closing.wait()
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)

    def _overran(self) -> None:
        self._overrun = True

    def _overrun_message(self) -> str:
        return (f"the server wrote a line over {self.line_limit >> 20} MiB "
                f"({self.line_limit} bytes): reading stopped there")

    def _request(self, request: Coroutine[Any, Any, _T], what: str) -> _T:
        if self._session is None or self._closed or self._overrun:
            request.close()
            why = self._overrun_message() if self._overrun else "the server is not running"
            raise McpFailure(f"{what}: {why}")
        pending = asyncio.run_coroutine_threadsafe(request, self._loop)
        try:
            return pending.result(self.timeout)
        except concurrent.futures.TimeoutError:
            pending.cancel()
            why = self._overrun_message() if self._overrun else \
                f"no answer within {self.timeout:g} s"
            raise McpFailure(f"{what}: {why}") from None
        except Exception as exc:
            why = self._overrun_message() if self._overrun else _reason(exc)
            raise McpFailure(f"{what}: {why}") from None

    def list_tools(self) -> list[McpTool]:
        """Every tool the server lists, page after page, in its order."""
        from mcp_types import PaginatedRequestParams

        tools: list[McpTool] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = self._request(self._session.list_tools(params=params), "tools/list")
            tools.extend(McpTool(t.name, t.description, dict(t.input_schema), _hints(t))
                         for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools
            if cursor in seen:  # the same page again: it would never end
                raise McpFailure(f"tools/list: the server gave the cursor {cursor[:60]!r} "
                                 f"twice, after {len(tools)} tools; stopped there")
            seen.add(cursor)

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> ToolReply:
        result = self._request(self._session.call_tool(name, dict(arguments)),
                               f"tools/call {name}")
        text = "\n".join(block.text for block in result.content
                         if getattr(block, "type", None) == "text")
        return ToolReply(bool(result.is_error), text)

    def close(self) -> None:
        """End the session and the process (the SDK closes stdin, then terminates, then
        kills); waits for it unless called on the loop's own thread."""
        if self._closed:
            return
        self._closed = True
        closing = self._closing
        if closing is not None:
            self._loop.call_soon_threadsafe(closing.set)
        task = self._task
        if task is not None and self._session is None:
            # Not past initialize (a server that never answers it): no event ends the session,
            # so cancel it; leaving the SDK's context closes stdin and ends the process.
            task.cancel()  # asyncio cancels the task it stands for
        if task is not None and threading.current_thread().name != "callgate-mcp":
            # The SDK bounds its shutdown (stdin closed, then terminate, then kill).
            with contextlib.suppress(Exception):
                task.result(self.timeout + 10)
        self._errlog.close()

    def _stderr_tail(self) -> str:
        """The server's last stderr line, for the error message."""
        try:
            self._errlog.seek(0)
            lines = [line.strip() for line in self._errlog.read().splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return f" (its stderr: {lines[-1][:200]})" if lines else ""

    def __enter__(self) -> McpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
