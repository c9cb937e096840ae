"""What a live run counts while it runs (requests, retries, errors, spend), the progress bar that
shows it, and the switch that stops the run cleanly. The run owns one of each and hands them to
the collaborators that count or stop (`calls.Caller`, `record.RunRecord`, `workers`). The bar
also says what limits the calls: the pacer's in-flight limit, the 429s seen and the time spent
backing off."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

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


class StopSwitch:
    """Stops a run cleanly: no new requests, in-flight ones abandoned, answers kept. The first
    reason given is the one the run reports."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.reason: str | None = None

    def stop(self, reason: str = "interrupted") -> None:
        """Safe from any thread (an in-process target's code runs on threads of its own)."""
        if self.reason is None:
            self.reason = reason
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self._loop is not None and running is not self._loop:
            with contextlib.suppress(RuntimeError):  # its loop closed: the run is over
                self._loop.call_soon_threadsafe(self._event.set)
        else:
            self._event.set()

    def is_set(self) -> bool:
        return self.reason is not None

    async def wait(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._event.wait()


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
