"""Daemon threads that run blocking calls for the event loop: a sync Python target's calls, and
a conversation's environment calls (a slow tool or MCP server would otherwise stall every
attempt in flight). Daemons, so a call that never returns cannot hold the process at exit; with
one thread, calls run in the order given, all on the thread that made their objects."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# A call for a thread: the loop to settle on, its future, the function and its arguments.
_Job = tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]]


class DaemonThreads:
    """`size` daemon threads taking calls from one queue; `add` starts one more (to replace a
    thread whose call hung), `close` lets them end once the calls given are done."""

    def __init__(self, size: int, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._name = name
        self._size = 0
        for _ in range(size):
            self.add()

    def add(self) -> None:
        self._size += 1
        threading.Thread(target=self._work, name=self._name, daemon=True).start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, future, function, args = job
            result, raised = None, None
            try:
                result = function(*args)
            except BaseException as exc:  # handed to the awaiting task, whatever it is
                raised = exc
            try:
                loop.call_soon_threadsafe(_settle, future, result, raised)
            except RuntimeError:  # the run is over (its loop closed) while this call hung
                return

    def run(self, function: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """`function(*args)` on one of the threads, as a future of the running loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, future, function, args))
        return future

    def close(self) -> None:
        for _ in range(self._size):
            self._jobs.put(None)


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():  # given up on: timed out, or the run stopped
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)
