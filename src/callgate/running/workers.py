"""The concurrent part of a live run: workers that share one queue of unanswered attempts and
conversations (at most `concurrency` at once), a committer that writes answers every
`commit_every` seconds, Ctrl-C and SIGTERM turned into a clean stop, and the progress bar
(errors and spend so far) they advance."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from rich.progress import Progress

from callgate.running.calls import Caller
from callgate.running.conversation import converse
from callgate.running.plan import Attempt, Conversation
from callgate.running.record import RunRecord
from callgate.running.state import RunnerState


class WorkerPool(RunnerState):
    """Calling for every unanswered attempt at once, within the concurrency bound."""

    async def _call_all(
        self,
        misses: list[Attempt | Conversation],
        caller: Caller,
        record: RunRecord,
        progress: Progress,
        task: Any,
    ) -> None:
        queue = iter(misses)

        async def worker() -> None:
            for attempt in queue:  # one shared iterator: each worker takes the next attempt
                if self.switch.is_set():
                    return
                if isinstance(attempt, Conversation):
                    talk = await converse(attempt, self.suite, caller.target, self.cache, caller)
                    assert talk is not None  # with a caller, every turn gets an answer
                    record.talk(talk)
                else:
                    record.called(await caller.call(attempt))
                counters = self.counters
                progress.update(
                    task, advance=1, errors=counters.errors, spend=counters.spend_text()
                )

        loop = asyncio.get_running_loop()
        handled = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, self.stop)
                handled.append((sig, previous))
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                pass
        workers = [
            asyncio.create_task(worker())
            for _ in range(min(self.settings.concurrency, len(misses)))
        ]
        committer = asyncio.create_task(self.cache.commit_loop())
        stopper = asyncio.create_task(self.switch.wait())
        everything = asyncio.gather(*workers)
        try:
            waiting: list[asyncio.Future[Any]] = [everything, stopper]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if everything.done():
                everything.result()  # a bug in a worker surfaces here
        finally:
            for sig, previous in handled:
                loop.remove_signal_handler(sig)
                if previous is not None:
                    signal.signal(sig, previous)
            for pending in (*workers, committer, stopper):
                pending.cancel()
            await asyncio.gather(*workers, committer, stopper, return_exceptions=True)
            if everything.done() and not everything.cancelled():
                everything.exception()  # retrieved: the cancellations were ours
