"""What answers a live run: one protocol for a model and an agent under test alike (and for any
later kind: a trace replayer, a user simulator). A `Source` plans the suite's attempts, is
asked for the next assistant message(s) given the conversation so far and the case's context
(one try: `ask`; `calls.Caller` owns the retries and the pacing), says what a request it gave
up on is recorded as, and keeps every request and answer for the cache. A conversation under
way is its `Turns`, driven by the one conversation loop (`conversation.converse`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from callgate.models.pacing import Pacer
from callgate.running.cache import AnswerCache, AttemptOutcome
from callgate.running.counters import RunCounters, StopSwitch
from callgate.running.plan import Conversation, LaterTurn, PlannedAttempt
from callgate.suites.responses import Response
from callgate.suites.suite import Suite


@dataclass
class Answer:
    """One try that got an answer: the response, its recorded line, and what the source keeps
    beside it (a target's transcript; None for a model)."""

    response: Response
    line: dict[str, Any]
    extra: Any = None


@dataclass
class Fault:
    """One try that got no usable answer: why (`failure`, its text), whether asking again may
    help, how long the server asked to wait, and when the request was sent."""

    failure: Any
    retryable: bool
    retry_after: float | None
    sent: float  # time.perf_counter() when the try was sent


class Asker(Protocol):
    """What asks a source with retries (calls.Caller), as a conversation's turns see it."""

    async def call(self, attempt: PlannedAttempt) -> AttemptOutcome: ...

    async def ask(self, attempt: PlannedAttempt) -> tuple[AttemptOutcome, Any]: ...


class Turns(Protocol):
    """A conversation under way, as a source holds it."""

    keys: list[str]  # the request behind every answered turn
    cached: list[bool]  # whether each came from the store

    async def answer(self, user_turn: int, later: LaterTurn | None, cache: AnswerCache,
                     caller: Asker | None) -> bool | None:
        """Answer one user turn (`later` adds its messages and tools; None for the case's own):
        True to go on to the next user turn, False when the conversation ends here, None when
        a turn is not stored and there is no caller."""
        ...

    def so_far(self) -> list[dict[str, Any]]:
        """The conversation so far, as the source was last sent it and answered."""
        ...

    def line(self) -> dict[str, Any]:
        """The conversation's one recorded `turns` line."""
        ...

    def close(self) -> None: ...


class Source(Protocol):
    """What a live run asks for its answers."""

    pacer: Pacer | None  # what paces its requests, when the source adapts to an endpoint
    in_flight: int  # attempts in flight when --concurrency does not say

    @property
    def name(self) -> str:
        """The client the run reports (once connected)."""
        ...

    async def open(self, timeout: float) -> None:
        """Before the plan: learn what goes into the cache keys (a target's version)."""
        ...

    def plan(self, suite: Suite, repeats: int
             ) -> tuple[list[PlannedAttempt], list[Conversation]]: ...

    def turns(self, conversation: Conversation, suite: Suite) -> Turns: ...

    def connect(self, to_call: int) -> None:
        """Ready to be asked for `to_call` attempts (a missing key stops the run here)."""
        ...

    async def ask(self, attempt: PlannedAttempt, timeout: float) -> Answer | Fault: ...

    def gave_up(self, attempt: PlannedAttempt, fault: Fault, note: str) -> dict[str, Any]:
        """The recorded line of a request given up on (`note` says why, empty when the fault
        is not retryable)."""
        ...

    def keep(self, outcome: AttemptOutcome, extra: Any, cache: AnswerCache,
             counters: RunCounters, stop: StopSwitch) -> None:
        """Keep the request and its answer for the cache, count its spend, and stop the run
        on a failure every request would repeat."""
        ...

    async def aclose(self) -> None: ...
