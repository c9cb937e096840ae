"""One request to the model for one attempt, retried with exponential backoff and jitter on rate
limits, 5xx, timeouts, connection faults and broken bodies, within the policy's tries and wait
and the run's retry budget. Every request passes the endpoint's pacer (models.pacing): it
bounds the requests in flight and holds them all off on a Retry-After. An answer
that cannot be used becomes a recorded failure line, never an exception. The request and its
answer are kept for the cache and its spend counted; a failure every request would repeat (a
bad key, no such model) stops the run."""

from __future__ import annotations

import asyncio
import json
import random
import time

from callgate.models.pacing import PacedClient, Pacer
from callgate.models.pricing import Pricing
from callgate.models.providers import Client
from callgate.models.recorded_lines import failure_line, reply_line
from callgate.models.replies import FATAL, ProviderFailure, Reply
from callgate.models.retry import RetryPolicy
from callgate.models.routes import ModelRoute
from callgate.running.cache import AnswerCache, AttemptOutcome, line_text
from callgate.running.counters import RunCounters, StopSwitch
from callgate.running.plan import PlannedAttempt
from callgate.suites.responses import parse_response


class Caller:
    """The one way a live run reaches the model: one request for an attempt (or a turn of a
    conversation), retried as the policy allows, its request and answer kept in the cache."""

    def __init__(
        self,
        client: Client,
        route: ModelRoute,
        pricing: Pricing,
        *,
        policy: RetryPolicy,
        timeout: float,
        retry_budget: int,
        cache: AnswerCache,
        counters: RunCounters,
        stop: StopSwitch,
        rng: random.Random,
        pacer: Pacer,
    ) -> None:
        self.client = PacedClient(client, pacer)
        self.pacer = pacer
        self.route = route
        self.pricing = pricing
        self.policy = policy
        self.timeout = timeout
        self.cache = cache
        self.counters = counters
        self.stop = stop
        self.rng = rng
        self._retries_left = retry_budget  # the run's, shared by every attempt

    async def call(self, attempt: PlannedAttempt) -> AttemptOutcome:
        outcome = await self._send(attempt)
        self._keep(outcome)
        return outcome

    async def _send(self, attempt: PlannedAttempt) -> AttemptOutcome:
        policy, route, counters = self.policy, self.route, self.counters
        started = time.monotonic()
        tries = 0
        while True:
            tries += 1
            counters.requests += 1
            sent = await self.client.send(attempt.body, self.timeout)
            if isinstance(sent, Reply):
                line = reply_line(
                    attempt.case_id, attempt.repeat, sent, route=route, pricing=self.pricing
                )
                try:
                    response = parse_response(line)
                except (ValueError, TypeError) as exc:  # pydantic's ValidationError included
                    failure = ProviderFailure(
                        "bad_response",
                        f"unusable completion: {exc}"[:500],
                        status=200,
                        latency_ms=sent.latency_ms,
                    )
                else:
                    return AttemptOutcome(attempt, response, line_text(line), tries)
            else:
                failure = sent
            note = self._give_up(failure, tries, started)
            if note is not None:
                line = failure_line(attempt.case_id, attempt.repeat, failure, note)
                return AttemptOutcome(attempt, parse_response(line), line_text(line), tries)
            delay = policy.delay(tries, failure.retry_after, self.rng)
            self._retries_left -= 1
            counters.retries += 1
            self.pacer.backing_off(delay)
            await asyncio.sleep(delay)

    def _give_up(self, failure: ProviderFailure, tries: int, started: float) -> str | None:
        """None to retry; else a note on why not (empty when the fault is not retryable)."""
        if not failure.retryable:
            return ""
        return self.policy.give_up(tries, self._retries_left, time.monotonic() - started,
                                   failure.retry_after)

    def _keep(self, outcome: AttemptOutcome) -> None:
        """Keep the request and its answer for the cache; count its spend, and stop the run on
        a failure every request would repeat (FATAL: a bad key, no such model)."""
        request = json.dumps(
            self.route.request_record(self.client.name, outcome.attempt.body),
            ensure_ascii=False,
        )
        self.cache.keep(outcome, self.route.model, request)
        error = outcome.response.error
        if error is None:
            self.counters.count_cost(outcome.response.cost)
        elif error.kind in FATAL:
            self.stop.stop(f"{error.kind}: {error.message}")
