"""A Python target: the user's function, called in this process, isolated as far as a process
allows (docs/targets.md, "A Python target is your code"):

- its inputs are copies: appending to the `messages` it was given changes nothing of callgate's;
- what it prints on stdout, from its import on, goes to a sink, never into `run --json`; closing
  that stdout is its attempt's failure, never callgate's exit;
- `sys.exit` or any other exception, at import or in a call, sync or async, is one classified
  failure (at import, one line and exit 2);
- its timeout is kept at a thread boundary: a sync function runs on a daemon thread, an async
  one on an event loop of its own in a daemon thread, so one that blocks its loop (a
  `time.sleep` in an `async def`) times out like any other, and a loop left blocked is replaced.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import hashlib
import importlib
import inspect
import io
import os
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from callgate.errors import CallgateError
from callgate.models.targets import TargetSpec
from callgate.running.targets.kinds import TargetFailure, short
from callgate.running.threads import DaemonThreads

PING = 1.0  # seconds a loop whose call timed out has to show it is not blocked


class _Raised(Exception):
    """What the agent raised (its own TimeoutError, a SystemExit): not callgate's doing."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _described(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"called sys.exit({error.code!r})"
    return f"raised {type(error).__name__}: {short(str(error))}"


def _called(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """A sync target's call, on its thread; whatever it raises is the agent's."""
    try:
        return function(**kwargs)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise _Raised(exc) from None


async def _awaited(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """An async target's call, on the agent's loop; whatever it raises is the agent's."""
    try:
        return await function(**kwargs)
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except BaseException as exc:
        raise _Raised(exc) from None


class _Sink(io.TextIOBase):
    """The stdout a target writes to: kept from the terminal, and told apart when closed."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        return len(text)


class _AgentLoop:
    """An event loop on a daemon thread, where an async target's calls run."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="callgate-target-loop",
                         daemon=True).start()

    def submit(self, call: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(call, self.loop)

    async def blocked(self) -> bool:
        """True when the loop does not run a callback within PING seconds."""
        pong: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(pong.set_result, None)
        try:
            await asyncio.wait_for(asyncio.wrap_future(pong), PING)
        except TimeoutError:
            return True
        return False

    def stop(self) -> None:
        """Cancel what runs on it, then stop it (once it is free again: a blocked loop runs
        this when, if ever, the agent's call returns)."""
        def shutdown() -> None:
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.call_soon(self.loop.stop)

        self.loop.call_soon_threadsafe(shutdown)


class PythonTarget:
    """A function called in this process with messages=, tools= and metadata= keywords: on its
    own event loop when it is async, else on one of `concurrency` daemon threads."""

    name = "python"

    def __init__(self, spec: TargetSpec, concurrency: int) -> None:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m` would: the project's own modules
        self._stdout = sys.stdout
        self._sink = _Sink()
        sys.stdout = self._sink
        try:
            self._module = importlib.import_module(spec.module)
            function = getattr(self._module, spec.function, None)
        except (Exception, SystemExit) as exc:  # the agent's import failing is the agent's
            self._restore()
            raise CallgateError(f"--target {spec.text}: cannot import {spec.module}: "
                                f"{_import_failure(exc)}") from None
        if not callable(function):
            self._restore()
            raise CallgateError(f"--target {spec.text}: {spec.module} has no function "
                                f"{spec.function}")
        self._function: Callable[..., Any] = function
        is_async = inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            type(function).__call__)
        self._loop = _AgentLoop() if is_async else None
        self._threads = None if is_async else DaemonThreads(concurrency, "callgate-target")

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
        request = copy.deepcopy(request)  # what the agent does to its inputs stays its own
        try:
            reply = await asyncio.wait_for(self._call(request), timeout)
        except TimeoutError:
            await self._after_timeout()
            raise TargetFailure(f"no reply within {timeout:g} s", retryable=True) from None
        except _Raised as exc:
            raise TargetFailure(_described(exc.error), retryable=True) from None
        except Exception as exc:  # e.g. calling it failed (a wrong signature)
            raise TargetFailure(_described(exc), retryable=True) from None
        finally:
            self._check_stdout()
        return reply

    def _call(self, request: dict[str, Any]) -> asyncio.Future[Any]:
        if self._loop is not None:
            return asyncio.wrap_future(self._loop.submit(_awaited(self._function, request)))
        assert self._threads is not None
        return self._threads.run(_called, self._function, request)

    async def _after_timeout(self) -> None:
        if self._threads is not None:
            self._threads.add()  # the hung call keeps its thread
        elif self._loop is not None and await self._loop.blocked():
            self._loop.stop()  # blocked by the agent: later calls get a loop of their own
            self._loop = _AgentLoop()

    def _check_stdout(self) -> None:
        if sys.stdout is not self._sink or self._sink.closed:
            self._sink = _Sink()
            sys.stdout = self._sink
            raise TargetFailure("closed or replaced sys.stdout (callgate's output)",
                                retryable=True)

    def _restore(self) -> None:
        sys.stdout = self._stdout

    async def aclose(self) -> None:
        if self._threads is not None:
            self._threads.close()
        if self._loop is not None:
            self._loop.stop()
        self._restore()


def _import_failure(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}) while being imported"
    return f"{type(exc).__name__}: {short(str(exc))}"
