"""The three kinds of target, behind one interface (`Target`): `ask` sends one attempt's request
and returns the reply as JSON-like data, or raises `TargetFailure` (crashed, timed out, said
nothing readable), classified as retryable or not; `version` is what the target reports in
answer to the hello. Retrying is the caller's job, as for a model's client."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import json
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urljoin

from callgate.errors import CallgateError
from callgate.models.bounded import ReplyTooLarge, origin, read_body
from callgate.models.targets import TargetSpec
from callgate.reading import JSONLimitError, loads
from callgate.running.targets.contract import HELLO, MalformedReply, reported_version
from callgate.running.threads import DaemonThreads

if TYPE_CHECKING:
    import aiohttp

LINE_LIMIT = 64 * 1024 * 1024  # the longest reply line a command target may write
# A new process's start and hello are not an attempt: on a loaded machine an interpreter's
# start alone can take longer than --timeout allows a request.
START_TIMEOUT = 60.0
MESSAGE_LIMIT = 300
MAX_REDIRECTS = 5  # on the target's own origin
REDIRECTS = frozenset({301, 302, 303, 307, 308})


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


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "…"


def _json(raw: bytes | str, what: str) -> Any:
    try:
        return loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (ValueError, JSONLimitError) as exc:  # JSONDecodeError and UnicodeDecodeError too
        raise MalformedReply(f"{what} is not JSON ({_short(str(exc))})") from None


class _Raised(Exception):
    """A TimeoutError the agent raised itself: not callgate's timeout."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


async def _own_timeouts(call: Any) -> Any:
    try:
        return await call
    except TimeoutError as exc:
        raise _Raised(exc) from None


def _called(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """A sync target's call, on its thread; its own TimeoutError is not callgate's."""
    try:
        return function(**kwargs)
    except TimeoutError as exc:
        raise _Raised(exc) from None


class PythonTarget:
    """A function called in this process with messages=, tools= and metadata= keywords: awaited
    when it is async, else run on one of `concurrency` daemon threads."""

    name = "python"

    def __init__(self, spec: TargetSpec, concurrency: int) -> None:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m` would: the project's own modules
        try:
            self._module = importlib.import_module(spec.module)
        except Exception as exc:  # the agent's import failing is the agent's, named as such
            raise CallgateError(f"--target {spec.text}: cannot import {spec.module}: "
                                f"{type(exc).__name__}: {_short(str(exc))}") from None
        function = getattr(self._module, spec.function, None)
        if not callable(function):
            raise CallgateError(f"--target {spec.text}: {spec.module} has no function "
                                f"{spec.function}")
        self._function: Callable[..., Any] = function
        self._async = inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            type(function).__call__)
        self._threads = None if self._async else DaemonThreads(concurrency, "callgate-target")

    async def version(self, timeout: float) -> str | None:
        """The function's `callgate_version`, else the module's `__version__`, else a hash of
        the module's source, so an edit of the module asks again."""
        for found in (getattr(self._function, "callgate_version", None),
                      getattr(self._module, "__version__", None)):
            if found is not None:
                return str(found)
        source = getattr(self._module, "__file__", None)
        if source is None:
            return None
        return "source:" + hashlib.sha256(Path(source).read_bytes()).hexdigest()[:16]

    async def ask(self, request: dict[str, Any], timeout: float) -> Any:
        try:
            if self._threads is None:
                return await asyncio.wait_for(_own_timeouts(self._function(**request)), timeout)
            return await asyncio.wait_for(self._threads.run(_called, self._function, request),
                                          timeout)
        except TimeoutError:
            if self._threads is not None:
                self._threads.add()  # the hung call keeps its thread
            raise TargetFailure(f"no reply within {timeout:g} s", retryable=True) from None
        except Exception as exc:
            error = exc.error if isinstance(exc, _Raised) else exc
            raise TargetFailure(f"raised {type(error).__name__}: {_short(str(error))}",
                                retryable=True) from None

    async def aclose(self) -> None:
        if self._threads is not None:
            self._threads.close()


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
            raise TargetFailure(f"unreachable: {type(exc).__name__}: {_short(str(exc))}",
                                retryable=True) from None
        if status != 200:
            text = _short(body.decode("utf-8", "replace"))
            raise TargetFailure(f"answered HTTP {status}: {text}".rstrip(": "),
                                retryable=status >= 500 or status in (408, 429))
        return _json(body, "the reply body")

    async def _post(self, session: aiohttp.ClientSession, data: bytes, timeout: float
                    ) -> tuple[int, bytes]:
        """The status and body of the POST, redirects on the target's origin followed."""
        import aiohttp

        url = self._url
        for _ in range(MAX_REDIRECTS + 1):
            async with session.post(url, data=data, headers=self._headers,
                                    timeout=aiohttp.ClientTimeout(total=timeout),
                                    allow_redirects=False) as answer:
                if answer.status not in REDIRECTS:
                    return answer.status, await read_body(answer)
                location = answer.headers.get("Location", "")
            if not location:
                raise TargetFailure(f"answered HTTP {answer.status} with no Location",
                                    retryable=False)
            url = urljoin(url, location)
            if origin(url) != origin(self._url):
                raise TargetFailure(
                    f"answered HTTP {answer.status} to {_short(location)}: a redirect off the "
                    "target's origin (scheme, host, port) is not followed", retryable=False)
        raise TargetFailure(f"more than {MAX_REDIRECTS} redirects", retryable=False)

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
        last = f": {_short(self.stderr[-1])}" if self.stderr else ""
        return f"exited with code {code}{last}"

    async def stop(self) -> None:
        if self.process.returncode is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), 2)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        self._reader.cancel()


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
                limit=LINE_LIMIT)
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


def open_target(spec: TargetSpec, concurrency: int, key: str | None = None) -> Target:
    """The target a spec names; `key` is sent to an HTTP target (api_key_env's value)."""
    if spec.kind == "http":
        return HttpTarget(spec, concurrency, key)
    kinds: dict[str, Callable[[TargetSpec, int], Target]] = {
        "python": PythonTarget, "cmd": CommandTarget}
    return kinds[spec.kind](spec, concurrency)


def elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
