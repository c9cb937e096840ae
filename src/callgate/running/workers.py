"""The concurrent part of a live run: workers that share one queue of unanswered attempts and
conversations (at most `concurrency` at once), a committer beside them that writes answers
every `commit_every` seconds, and Ctrl-C and SIGTERM turned into a clean stop: no request
starts after it, those in flight finish within the switch's grace (their answers kept) or are
abandoned then, or at a second Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from callgate.running.counters import Stopped, StopSwitch

Item = TypeVar("Item")


async def call_concurrently(
    items: Sequence[Item],
    answer: Callable[[Item], Awaitable[None]],
    *,
    concurrency: int,
    stop: StopSwitch,
    commit_loop: Callable[[], Coroutine[Any, Any, None]],
    admit: Callable[[], Awaitable[bool]] | None = None,
) -> None:
    """Await `answer` for every item, at most `concurrency` at once, until all are answered or
    the run is stopped: then no item starts, an item whose next request meets the switch's
    gate ends (`Stopped`), and the answers in flight get `stop.grace` seconds to come before
    they are abandoned. `commit_loop` runs beside. `admit` (a budget) is awaited before each
    item: False ends the worker, letting the answers in flight finish."""
    queue = iter(items)

    async def worker() -> None:
        for item in queue:  # one shared iterator: each worker takes the next item
            if stop.is_set() or (admit is not None and not await admit()):
                return
            try:
                await answer(item)
            except Stopped:  # its requests so far are kept; the rest is asked on resume
                return

    loop = asyncio.get_running_loop()
    handled = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        try:
            loop.add_signal_handler(sig, stop.interrupt)
            handled.append((sig, previous))
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            pass
    workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(items)))]
    committer = asyncio.create_task(commit_loop())
    stopper = asyncio.create_task(stop.wait())
    abandoned = asyncio.create_task(stop.wait_abandoned())
    everything = asyncio.gather(*workers)
    try:
        waiting: list[asyncio.Future[Any]] = [everything, stopper]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not everything.done():  # stopped: the requests in flight may still answer
            finishing: list[asyncio.Future[Any]] = [everything, abandoned]
            await asyncio.wait(finishing, timeout=stop.grace, return_when=asyncio.FIRST_COMPLETED)
        if everything.done():
            everything.result()  # a bug in a worker surfaces here
    finally:
        for sig, previous in handled:
            loop.remove_signal_handler(sig)
            if previous is not None:
                signal.signal(sig, previous)
        for pending in (*workers, committer, stopper, abandoned):
            pending.cancel()
        await asyncio.gather(*workers, committer, stopper, abandoned, return_exceptions=True)
        if everything.done() and not everything.cancelled():
            everything.exception()  # retrieved: the cancellations were ours
