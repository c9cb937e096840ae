"""A live run's budget: `--max-cost USD` and `--max-attempts N`. An attempt starts only when it
fits: at most N attempts called, and the spend so far plus the attempts in flight and this one,
each at the mean cost per attempt so far, within the budget. So a run stops within one attempt's
cost of its budget, with every attempt it started finished and stored (none cancelled halfway),
and resumes like any run: the same command calls only the attempts not yet answered."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from callgate.running.counters import RunCounters

Verdict = Literal["start", "wait", "stop"]


@dataclass
class Budget:
    max_cost: float | None
    max_attempts: int | None
    counters: RunCounters
    started: int = 0
    finished: int = 0
    reason: str | None = None  # why it refused an attempt (set once it stops the run)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition, init=False)

    @property
    def active(self) -> bool:
        return self.max_cost is not None or self.max_attempts is not None

    def per_attempt(self) -> float | None:
        """Mean USD per finished attempt (None before one finished or when none was priced)."""
        if not self.finished or not self.counters.spend_known:
            return None
        return self.counters.spend / self.finished

    def decide(self) -> tuple[Verdict, str | None]:
        """Start the next attempt, wait for one in flight to finish, or stop (with why)."""
        if self.max_attempts is not None and self.started >= self.max_attempts:
            return "stop", f"--max-attempts {self.max_attempts} reached"
        if self.max_cost is None:
            return "start", None
        counters, in_flight = self.counters, self.started - self.finished
        if self.finished and not counters.spend_known and counters.cost_unknown:
            return "stop", ("the answers' cost is not known (no usage.cost and the model is not "
                            "in litellm's price map), so --max-cost cannot be kept")
        per = self.per_attempt()
        if per is None:  # the first attempt prices the rest
            return ("start", None) if in_flight == 0 else ("wait", None)
        if counters.spend + (in_flight + 1) * per <= self.max_cost:
            return "start", None
        if in_flight:
            return "wait", None
        return "stop", (f"--max-cost ${self.max_cost:g} reached: ${counters.spend:.4f} spent, "
                        f"about ${per:.4f} an attempt")

    async def admit(self) -> bool:
        """Wait until the next attempt may start (True) or the budget is spent (False)."""
        async with self._changed:
            while True:
                verdict, why = self.decide()
                if verdict == "start":
                    self.started += 1
                    return True
                if verdict == "stop":
                    self.reason = self.reason or why
                    self._changed.notify_all()
                    return False
                await self._changed.wait()

    async def finish(self) -> None:
        async with self._changed:
            self.finished += 1
            self._changed.notify_all()
