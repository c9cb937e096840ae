"""What a live run counts while it runs (requests, retries, errors, spend), the progress bar that
shows it, and the switch that stops the run cleanly. The run owns one of each and hands them to
the collaborators that count or stop (`calls.Caller`, `record.RunRecord`, `workers`; the
model client and the target are gated by it, so no request starts after a stop). The bar
also says what limits the calls: the pacer's in-flight limit, the 429s seen and the time spent
backing off."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from callgate.models.pacing import Pacer, figures_text
from callgate.models.providers import Client
from callgate.models.replies import ProviderFailure, Reply


@dataclass
class RunCounters:
    """The run's counts so far, for its summary and its progress bar."""

    requests: int = 0  # HTTP requests, retries included
    retries: int = 0
    errors: int = 0  # attempts whose answer is a provider failure
    called: int = 0  # attempts sent to the provider
    spend: float = 0.0  # USD of the requests whose cost is known
    spend_known: int = 0
    cost_unknown: int = 0

    def count_cost(self, cost: float | None) -> None:
        """Count one answered request's price (None: the price is not known)."""
        if cost is None:
            self.cost_unknown += 1
        else:
            self.spend += cost
            self.spend_known += 1

    def spend_text(self) -> str:
        text = f"${self.spend:.4f}" if self.spend_known else "$–"
        return text + (f" (+{self.cost_unknown} unknown)" if self.cost_unknown else "")


GRACE = 5.0  # seconds the requests in flight at a stop get to finish before being abandoned


class Stopped(Exception):
    """A request was about to start after the run was stopped: its attempt is left unanswered,
    for the resumed run to ask."""


class StopSwitch:
    """Stops a run cleanly: no new request starts (`gate`); the ones in flight get `grace`
    seconds to finish and their answers are kept, as they were paid for; then, or at once when
    `abandon`ed (a second Ctrl-C), the rest are cancelled and asked again on resume. The first
    reason given is the one the run reports. Safe from any thread (an in-process target's code
    runs on threads of its own)."""

    def __init__(self, grace: float = GRACE) -> None:
        self.grace = grace
        self._stopped = asyncio.Event()
        self._abandoned = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.reason: str | None = None
        self.abandoned = False

    def stop(self, reason: str = "interrupted") -> None:
        if self.reason is None:
            self.reason = reason
        self._set(self._stopped)

    def abandon(self, reason: str = "interrupted") -> None:
        """Stop, and give up the requests in flight now (asked again on resume)."""
        self.stop(reason)
        self.abandoned = True
        self._set(self._abandoned)

    def interrupt(self) -> None:
        """Ctrl-C or SIGTERM: the first stops the run, the next abandons the requests in
        flight."""
        if self.reason is None:
            self.stop()
        else:
            self.abandon()

    def gate(self) -> None:
        """Called before a request starts: raises Stopped once the run is stopped."""
        if self.reason is not None:
            raise Stopped(self.reason)

    def is_set(self) -> bool:
        return self.reason is not None

    def _set(self, event: asyncio.Event) -> None:
        loop = self._loop
        if loop is None:  # not waited on yet: `wait` sees the reason and returns at once
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            event.set()
        else:
            with contextlib.suppress(RuntimeError):  # its loop closed: the run is over
                loop.call_soon_threadsafe(event.set)

    async def wait(self) -> None:
        """Until the run is stopped."""
        self._loop = asyncio.get_running_loop()  # set before the reason is read: see `_set`
        if self.reason is None:
            await self._stopped.wait()

    async def wait_abandoned(self) -> None:
        """Until the requests in flight are given up."""
        self._loop = asyncio.get_running_loop()
        if not self.abandoned:
            await self._abandoned.wait()


class GatedClient:
    """A run's model client, which sends nothing once the run is stopped. It sits behind the
    pacer, so a request that waited there for a slot is stopped too (the slot given back)."""

    def __init__(self, client: Client, switch: StopSwitch) -> None:
        self.client = client
        self.switch = switch
        self.name = client.name

    async def send(self, body: dict[str, Any], timeout: float) -> Reply | ProviderFailure:
        self.switch.gate()
        return await self.client.send(body, timeout)

    async def aclose(self) -> None:
        await self.client.aclose()


class PacingColumn(ProgressColumn):
    """What limits the calls, read from the pacer at each refresh: "limit 6 · 429s 3 ·
    backoff 1.2s" (adaptive limits) or "fixed 64 · ..."."""

    def __init__(self, pacer: Pacer) -> None:
        super().__init__()
        self.pacer = pacer

    def render(self, task: Task) -> Text:
        return Text(pacing_text(self.pacer))


def pacing_text(pacer: Pacer) -> str:
    return figures_text(pacer.figures())


def progress_bar(console: Console, *, enabled: bool, pacer: Pacer | None = None) -> Progress:
    """The run's progress bar; its task carries the fields `errors` and `spend`."""
    pacing = [PacingColumn(pacer)] if pacer is not None else []
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("errors {task.fields[errors]}"),
        TextColumn("{task.fields[spend]}"),
        *pacing,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
    )
