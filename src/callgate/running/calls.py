"""One request for one attempt (or one turn of a conversation), to whatever source answers the
run (a model, an agent under test: running.source), retried with exponential backoff and
jitter on what the source calls retryable (rate limits, 5xx, timeouts, connection faults and
broken bodies for a model; a target's crash or timeout), within the policy's tries and wait and
the run's retry budget. A source that paces its requests (a model's endpoint: models.pacing)
is told of every backoff, so a Retry-After holds them all off. An answer that cannot be used
becomes a recorded failure line, never an exception. The request and its answer are kept for
the cache and its spend counted; a failure every request would repeat (a bad key, no such
model) stops the run."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from callgate.models.retry import RetryPolicy
from callgate.running.cache import AnswerCache, AttemptOutcome, line_text
from callgate.running.counters import RunCounters, StopSwitch
from callgate.running.plan import PlannedAttempt
from callgate.running.source import Answer, Fault, Source
from callgate.suites.responses import parse_response


class Caller:
    """The one way a live run reaches its source: one request for an attempt (or a turn of a
    conversation), retried as the policy allows, its request and answer kept in the cache."""

    def __init__(
        self,
        source: Source,
        *,
        policy: RetryPolicy,
        timeout: float,
        retry_budget: int,
        cache: AnswerCache,
        counters: RunCounters,
        stop: StopSwitch,
        rng: random.Random,
    ) -> None:
        self.source = source
        self.policy = policy
        self.timeout = timeout
        self.cache = cache
        self.counters = counters
        self.stop = stop
        self.rng = rng
        self._retries_left = retry_budget  # the run's, shared by every attempt

    async def call(self, attempt: PlannedAttempt) -> AttemptOutcome:
        return (await self.ask(attempt))[0]

    async def ask(self, attempt: PlannedAttempt) -> tuple[AttemptOutcome, Any]:
        """Ask for one attempt, or one turn of a conversation: its outcome, and what the source
        keeps beside it (a target's transcript; None when it failed)."""
        outcome, extra = await self._send(attempt)
        self.source.keep(outcome, extra, self.cache, self.counters, self.stop)
        return outcome, extra

    async def _send(self, attempt: PlannedAttempt) -> tuple[AttemptOutcome, Any]:
        policy, counters, pacer = self.policy, self.counters, self.source.pacer
        started = time.monotonic()
        tries = 0
        while True:
            self.stop.gate()  # no request starts after a stop, not even a retry
            tries += 1
            counters.requests += 1
            sent = await self.source.ask(attempt, self.timeout)
            if isinstance(sent, Answer):
                return AttemptOutcome(attempt, sent.response, line_text(sent.line),
                                      tries), sent.extra
            note = self._give_up(sent, tries, started)
            if note is not None:
                line = self.source.gave_up(attempt, sent, note)
                return AttemptOutcome(attempt, parse_response(line), line_text(line),
                                      tries), None
            delay = policy.delay(tries, sent.retry_after, self.rng)
            self._retries_left -= 1
            counters.retries += 1
            if pacer is not None:
                pacer.backing_off(delay)
            await asyncio.sleep(delay)

    def _give_up(self, fault: Fault, tries: int, started: float) -> str | None:
        """None to retry; else a note on why not (empty when the fault is not retryable)."""
        if not fault.retryable:
            return ""
        return self.policy.give_up(tries, self._retries_left, time.monotonic() - started,
                                   fault.retry_after)
