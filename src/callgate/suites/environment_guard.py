"""A Python environment's timeout, kept where its code runs: its constructor and every call
(its tools and `state()`) run on one daemon thread of its own, in order (an sqlite3
connection made in the constructor still works), and the caller waits at most `timeout` seconds
for each. A call that never returns leaves its thread behind (a daemon: it does not hold the
process at exit) and the environment refuses every later call; a `sys.exit` in it is the
environment's failure, never callgate's exit."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

TIMEOUT = 30.0  # seconds for a Python environment's constructor, and for each of its calls


class Hung(Exception):
    """A call that did not return in time, or one after it; or one that called sys.exit."""


_Job = tuple[concurrent.futures.Future[Any], Callable[..., Any], Mapping[str, Any]] | None


def _work(jobs: queue.SimpleQueue[_Job]) -> None:
    while (job := jobs.get()) is not None:
        future, function, kwargs = job
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(function(**kwargs))
        except BaseException as exc:  # handed to the waiting caller, whatever it is
            future.set_exception(exc)


class _Worker:
    """A daemon thread taking jobs from its own queue."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        threading.Thread(target=_work, args=(self.jobs,), name="callgate-environment",
                         daemon=True).start()


# Idle workers, so that making an environment does not start a thread each time (a final-state
# check makes two per attempt): a cache of threads, invisible to what runs on them.
_IDLE: list[_Worker] = []
_IDLE_LOCK = threading.Lock()
MAX_IDLE = 64


def _taken() -> _Worker:
    with _IDLE_LOCK:
        if _IDLE:
            return _IDLE.pop()
    return _Worker()


def _given_back(worker: _Worker) -> None:
    with _IDLE_LOCK:
        if len(_IDLE) < MAX_IDLE:
            _IDLE.append(worker)
            return
    worker.jobs.put(None)  # its thread ends


class Guarded:
    """A Python environment made and called on a thread of its own, each step bounded."""

    def __init__(self, factory: Callable[..., Any], state: dict[str, Any],
                 timeout: float | None = None) -> None:
        self.timeout = TIMEOUT if timeout is None else timeout
        self._worker = _taken()
        self._hung: str | None = None
        # The thread goes back to the idle ones with the environment (never while hung).
        self._finalizer = weakref.finalize(self, _given_back, self._worker)
        self.inner = self.run(factory, {"state": state}, "the constructor", positional=True)

    def run(self, function: Callable[..., Any], kwargs: Mapping[str, Any], what: str,
            positional: bool = False) -> Any:
        """`function(**kwargs)` on the environment's thread; Hung when it takes too long (or
        an earlier call did), or calls sys.exit. What it raises otherwise is raised here."""
        if self._hung is not None:
            raise Hung(f"{what}: not run, since {self._hung}")
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        call = (lambda state: function(state)) if positional else function
        self._worker.jobs.put((future, call, kwargs))
        try:
            return future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            self._hung = f"{what} did not return within {self.timeout:g} s"
            self._finalizer.detach()  # never reused: it ends if the call ever returns
            self._worker.jobs.put(None)
            raise Hung(self._hung) from None
        except (SystemExit, GeneratorExit) as exc:
            raise Hung(f"{what} called sys.exit({getattr(exc, 'code', None)!r})") from None

    def state(self) -> Any:
        return self.run(self.inner.state, {}, "state()")
