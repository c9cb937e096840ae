"""The kinds of target behind one interface (`Target`): an HTTP endpoint and a pool of JSON
Lines processes here, a Python function in `inprocess`. `ask` sends one attempt's request and
returns the reply as JSON-like data, or raises `TargetFailure` (crashed, timed out, said nothing
readable), classified as retryable or not; `version` is what the target reports in answer to the
hello. Retrying is the caller's job, as for a model's client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from callgate.models.bounded import (
    MAX_REDIRECTS,
    REDIRECTS,
    RedirectRefused,
    ReplyTooLarge,
    read_body,
    redirect_target,
)
from callgate.models.targets import TargetSpec
from callgate.reading import JSONLimitError, loads
from callgate.running.targets.contract import HELLO, MalformedReply, reported_version

if TYPE_CHECKING:
    import aiohttp

LINE_LIMIT = 64 * 1024 * 1024  # the longest reply line a command target may write
# A new process's start and hello are not an attempt: on a loaded machine an interpreter's
# start alone can take longer than --timeout allows a request.
START_TIMEOUT = 60.0
MESSAGE_LIMIT = 300


class TargetFailure(Exception):
    """One request the target did not answer: why, and whether asking again may help."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class Target(Protocol):
    name: str  # python, http or cmd: what the run reports as its client

    async def version(self, timeout: float) -> str | None: ...

    async def ask(self, request: dict[str, Any], timeout: float) -> Any: ...

    async def aclose(self) -> None: ...


def short(text: str) -> str:
    """A message on one line, at most MESSAGE_LIMIT characters."""
    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "…"


def _json(raw: bytes | str, what: str) -> Any:
    try:
        return loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (ValueError, JSONLimitError) as exc:  # JSONDecodeError and UnicodeDecodeError too
        raise MalformedReply(f"{what} is not JSON ({short(str(exc))})") from None


class HttpTarget:
    """One JSON POST per attempt to the target's URL; the hello is a POST too. A redirect is
    followed only on the target's own origin (scheme, host and port): the case's messages are
    never re-sent to a listener the user did not name. The body is read up to REPLY_LIMIT."""

    name = "http"

    def __init__(self, spec: TargetSpec, concurrency: int, key: str | None = None) -> None:
        self._url = spec.address
        self._limit = concurrency
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._session: aiohttp.ClientSession | None = None

    async def version(self, timeout: float) -> str | None:
        return reported_version(await self.ask(HELLO, timeout))

    async def ask(self, request: dict[str, Any], timeout: float) -> Any:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._limit), raise_for_status=False)
        data = json.dumps(request, ensure_ascii=False).encode()
        try:
            async with asyncio.timeout(timeout):
                status, body = await self._post(self._session, data, timeout)
        except TimeoutError:
            raise TargetFailure(f"no reply within {timeout:g} s", retryable=True) from None
        except ReplyTooLarge as exc:
            raise TargetFailure(str(exc), retryable=False) from None
        except aiohttp.ClientError as exc:
            raise TargetFailure(f"unreachable: {type(exc).__name__}: {short(str(exc))}",
                                retryable=True) from None
        if status != 200:
            text = short(body.decode("utf-8", "replace"))
            raise TargetFailure(f"answered HTTP {status}: {text}".rstrip(": "),
                                retryable=status >= 500 or status in (408, 429))
        return _json(body, "the reply body")

    async def _post(self, session: aiohttp.ClientSession, data: bytes, timeout: float
                    ) -> tuple[int, bytes]:
        """The status and body of the POST, redirects on the target's origin followed."""
        import aiohttp

        url = self._url
        for hops in range(MAX_REDIRECTS + 1):
            async with session.post(url, data=data, headers=self._headers,
                                    timeout=aiohttp.ClientTimeout(total=timeout),
                                    allow_redirects=False) as answer:
                if answer.status not in REDIRECTS:
                    return answer.status, await read_body(answer)
                location = answer.headers.get("Location")
            try:
                url = redirect_target(self._url, url, answer.status, location, hops, "target")
            except RedirectRefused as exc:
                raise TargetFailure(str(exc), retryable=False) from None
        raise AssertionError("redirect_target refuses the hop past MAX_REDIRECTS")

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


class _Process:
    """One running command: its pipes, and the end of what it wrote on stderr."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stderr: deque[str] = deque(maxlen=20)
        self._reader = asyncio.ensure_future(self._read_stderr())

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            text = raw.decode("utf-8", "replace").strip()
            if text:
                self.stderr.append(text)

    async def exchange(self, request: dict[str, Any], timeout: float) -> bytes:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps(request, ensure_ascii=False).encode() + b"\n")
        await stdin.drain()
        return await asyncio.wait_for(stdout.readline(), timeout)

    async def ended(self) -> str:
        """Why the process stopped answering: its exit code and last stderr line."""
        try:
            code = await asyncio.wait_for(self.process.wait(), 2)
            await asyncio.wait_for(self._reader, 1)
        except TimeoutError:
            return "closed its stdout"
        last = f": {short(self.stderr[-1])}" if self.stderr else ""
        return f"exited with code {code}{last}"

    async def stop(self) -> None:
        """Close its stdin, wait up to 2 s, kill it; then end what it started (its process
        group), since a grandchild holding the pipes open keeps their transports alive past
        the run's event loop ("Event loop is closed" tracebacks at exit)."""
        if self.process.returncode is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), 2)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        with contextlib.suppress(OSError):  # the group is gone already
            os.killpg(self.process.pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(asyncio.shield(self._reader), 1)
        except (TimeoutError, asyncio.CancelledError, ValueError):
            self._reader.cancel()
        transport = getattr(self.process, "_transport", None)  # asyncio keeps it private
        if transport is not None:
            transport.close()


class CommandTarget:
    """Long-lived processes of one command, at most `concurrency` of them, each answering one
    JSON line on stdout for each line on stdin; each new process is sent the hello first. A
    process that crashes, hangs or writes something that is not JSON is stopped and replaced."""

    name = "cmd"

    def __init__(self, spec: TargetSpec, concurrency: int) -> None:
        self._spec = spec
        self._idle: list[_Process] = []
        self._running: set[_Process] = set()
        self._version: str | None = None
        self._slots = asyncio.Semaphore(concurrency)  # the pool's size: processes at most

    async def _start(self) -> _Process:
        try:
            process = await asyncio.create_subprocess_exec(
                *self._spec.argv, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                limit=LINE_LIMIT, start_new_session=True)  # its own group: stop() ends it all
        except OSError as exc:
            raise TargetFailure(f"could not start {self._spec.argv[0]}: {exc.strerror or exc}",
                                retryable=False) from None
        started = _Process(process)
        self._running.add(started)
        self._version = reported_version(await self._exchange(started, HELLO, START_TIMEOUT))
        return started

    async def version(self, timeout: float) -> str | None:
        self._idle.append(await self._start())
        return self._version

    async def ask(self, request: dict[str, Any], timeout: float) -> Any:
        async with self._slots:  # waiting for a process is not the agent's time
            process = self._idle.pop() if self._idle else await self._start()
            reply = await self._exchange(process, request, timeout)
            self._idle.append(process)
            return reply

    async def _exchange(self, process: _Process, request: dict[str, Any], timeout: float) -> Any:
        try:
            raw = await process.exchange(request, timeout)
            if not raw:
                raise TargetFailure(f"the process {await process.ended()}", retryable=True)
            return _json(raw, "the reply line")
        except TimeoutError:
            await self._drop(process)
            raise TargetFailure(f"no reply within {timeout:g} s", retryable=True) from None
        except ConnectionError:  # it closed its stdin: it is gone
            failure = TargetFailure(f"the process {await process.ended()}", retryable=True)
            await self._drop(process)
            raise failure from None
        except ValueError as exc:  # not JSON, or a line over the limit
            await self._drop(process)
            if isinstance(exc, MalformedReply):
                raise
            raise MalformedReply(f"the reply line is over {LINE_LIMIT >> 20} MiB") from None
        except TargetFailure:
            await self._drop(process)
            raise

    async def _drop(self, process: _Process) -> None:
        self._running.discard(process)
        if process.process.returncode is None:
            process.process.kill()
        await process.stop()

    async def aclose(self) -> None:
        self._idle.clear()
        await asyncio.gather(*(process.stop() for process in self._running))
        self._running.clear()


def elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
