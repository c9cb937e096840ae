"""How many requests a live run keeps in flight at one endpoint, and what held it back.

`ConcurrencyLimit` is the controller: AIMD, as the AIMDLimit of Netflix's concurrency-limits,
with TCP's slow start in front. It starts at 8 and adds one per clean answer (doubling each
round trip) until the first sign of the provider's limit, then one per round trip. It cuts the
limit by half on a 429 and by a tenth on a 5xx, a timeout, rate-limit headers saying the
requests left are fewer than the requests in flight (or under 5% of a token limit), or a
latency rise (the mean of about the last round trip over twice the mean of about the last 20,
the comparison Gradient2 makes; weighed per round trip, not per answer, so that a limit of 200
does not make the long-run mean catch up within one round trip);
headers saying the headroom is under two limits' worth hold growth. At most one cut per round
trip: an answer to a request sent before the last cut says nothing new. AIMD rather than a
gradient controller alone because a provider's rate limit does not raise latency (a token
bucket answers 429 at once): the loud signals, 429, Retry-After and the headers, decide, and
latency is the third. A fixed limit (`--concurrency N`) never moves.

`Pacer` is the gate in front of one endpoint: at most the limit's slots in flight, none while a
Retry-After (or headers saying nothing is left until a reset) holds every request off. It
counts the 429s it saw and the wall time some request spent backing off. `Pacers` keeps one per
endpoint and key for a run, so the judge's calls to the same endpoint share the candidate's.
Pure apart from the clock, which is passed in: tests drive it on scripted answers.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypedDict

from callgate.models.providers import Client
from callgate.models.replies import ProviderFailure, RateLimits, Reply
from callgate.models.routes import LEAN_BASES, ModelRoute

START = 8  # the old fixed default: a first round trip no provider minds
CEILING = 256  # adaptive runs never pass this many in flight
RATE_LIMIT_CUT = 0.5
SOFT_CUT = 0.9
LATENCY_RISE = 2.0  # recent mean latency over the long-run mean that counts as a rise
LATENCY_WARMUP = 10  # clean answers before latency is compared
LONG_ROUNDS = 20  # round trips the long-run mean latency spans (the recent one spans one)
TOKENS_NEAR, TOKENS_LOW = 0.05, 0.2  # shares of a token limit left: cut, hold
SOFT_FAILURES = frozenset({"server_error", "timeout", "connection"})
MAX_HOLD = 60.0  # seconds at most that headers alone may hold every request off


class ConcurrencyLimit:
    """The in-flight limit of one endpoint (AIMD with slow start; see the module)."""

    def __init__(self, start: int = START, *, ceiling: int = CEILING, fixed: bool = False
                 ) -> None:
        self.fixed = fixed
        self.ceiling = ceiling
        self.limit = float(min(start, ceiling))
        self.lowest = self.highest = self.slots
        self._slow_start = not fixed
        self._last_cut = float("-inf")
        self._short = self._long = 0.0
        self._samples = 0

    @property
    def slots(self) -> int:
        return max(1, int(self.limit))

    def answered(self, *, sent_at: float, now: float, in_flight: int, latency: float,
                 kind: str | None, limits: RateLimits | None) -> None:
        """Adjust to one answer: `kind` None for a usable reply, else the failure's kind;
        `in_flight` counts the requests out, this one included; `latency` in seconds."""
        if self.fixed:
            return
        if kind == "rate_limit":
            self._cut(RATE_LIMIT_CUT, sent_at, now)
            return
        if kind in SOFT_FAILURES:
            self._cut(SOFT_CUT, sent_at, now)
            return
        headroom = self._headroom(limits)
        if headroom == "near" or (kind is None and self._latency_rose(latency)):
            self._cut(SOFT_CUT, sent_at, now)
        elif kind is None and headroom == "plenty" and 2 * in_flight >= self.slots:
            # Grow only when the limit is what holds the run back (half its slots in use).
            self.limit = min(float(self.ceiling),
                             self.limit + (1.0 if self._slow_start else 1.0 / self.limit))
            self.highest = max(self.highest, self.slots)

    def _headroom(self, limits: RateLimits | None) -> str:
        if limits is None:
            return "plenty"
        left, share = limits.requests_left, limits.tokens_share
        if (left is not None and left < self.limit) or (share is not None and share < TOKENS_NEAR):
            return "near"
        if (left is not None and left < 2 * self.limit) or (share is not None
                                                            and share < TOKENS_LOW):
            return "low"
        return "plenty"

    def _latency_rose(self, latency: float) -> bool:
        if self._samples == 0:
            self._short = self._long = latency
        else:
            per_round = 1.0 / self.slots  # one answer's share of a round trip
            self._short += min(0.5, 2 * per_round) * (latency - self._short)
            self._long += per_round / LONG_ROUNDS * (latency - self._long)
        self._samples += 1
        return self._samples > LATENCY_WARMUP and self._short > LATENCY_RISE * self._long

    def _cut(self, factor: float, sent_at: float, now: float) -> None:
        self._slow_start = False
        if sent_at <= self._last_cut:
            return  # sent before the last cut: the cut answered it already
        self.limit = max(1.0, self.limit * factor)
        self._last_cut = now
        self.lowest = min(self.lowest, self.slots)


def hold_from_headers(limits: RateLimits | None) -> float:
    """Seconds every request should wait when the headers say nothing is left: until the next
    request is allowed (the reset spread over the limit, as a bucket refills), else the reset."""
    if limits is None or limits.requests_left is None or limits.requests_left >= 1:
        return 0.0
    if limits.reset is None:
        return 0.0
    if limits.requests_limit:
        return min(MAX_HOLD, limits.reset / limits.requests_limit)
    return min(MAX_HOLD, limits.reset)


class Pacer:
    """The gate in front of one endpoint (see the module)."""

    def __init__(self, limit: ConcurrencyLimit, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.limit = limit
        self.clock = clock
        self.sleep = sleep
        self.in_flight = 0
        self.rate_limited = 0  # 429s seen
        self.backoff_s = 0.0  # wall time during which some request waited to be sent again
        self._backoff_until = float("-inf")
        self._paused_until = float("-inf")
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> float:
        """Wait for a slot (and for any hold to pass); returns when the request is sent."""
        woken = False
        while True:
            wait = self._paused_until - self.clock()
            if wait > 0:
                await self.sleep(wait)
                continue
            # First come, first served: a newcomer waits behind those already waiting.
            if self.in_flight < self.limit.slots and (woken or not self._waiting):
                break
            turn = asyncio.get_running_loop().create_future()
            self._waiting.append(turn)
            try:
                await turn
            finally:
                if turn in self._waiting:
                    self._waiting.remove(turn)
            woken = True
        self.in_flight += 1
        return self.clock()

    def abandon(self) -> None:
        """A request given up unanswered (a stopped run): its slot is free again."""
        self.in_flight -= 1
        self._wake()

    def release(self, sent_at: float, sent: Reply | ProviderFailure) -> None:
        """One request answered: adjust the limit, hold everyone off if told to, wake waiters."""
        now = self.clock()
        failure = sent if isinstance(sent, ProviderFailure) else None
        latency = (sent.latency_ms or 0.0) / 1000
        self.limit.answered(sent_at=sent_at, now=now, in_flight=self.in_flight, latency=latency,
                            kind=failure.kind if failure else None, limits=sent.limits)
        self.in_flight -= 1
        if failure is not None and failure.kind == "rate_limit":
            self.rate_limited += 1
            if failure.retry_after:
                self.hold_off(failure.retry_after)
        hold = hold_from_headers(sent.limits)
        if hold > 0:
            self.hold_off(hold)
        self._wake()

    def hold_off(self, seconds: float) -> None:
        """No request is sent for `seconds` (a rate limit is the account's, not a request's)."""
        now = self.clock()
        self._paused_until = max(self._paused_until, now + seconds)
        self.backing_off(seconds)

    def backing_off(self, seconds: float) -> None:
        """Some request waits `seconds` before it is sent again: counted once however many
        wait at the same time (the union of the waits, which start in time order)."""
        start = self.clock()
        end = start + seconds
        if end > self._backoff_until:
            self.backoff_s += end - max(start, self._backoff_until)
            self._backoff_until = end

    def _wake(self) -> None:
        free = self.limit.slots - self.in_flight
        for turn in list(self._waiting)[:max(0, free)]:
            if not turn.done():
                turn.set_result(None)
            self._waiting.remove(turn)

    def figures(self) -> PacingFigures:
        """What limited the run, for its record, --json and the progress line."""
        limit = self.limit
        return {
            "mode": "fixed" if limit.fixed else "adaptive",
            "limit": limit.slots,
            "lowest": limit.lowest,
            "highest": limit.highest,
            "rate_limited": self.rate_limited,
            "backoff_s": round(self.backoff_s, 3),
        }


def figures_text(figures: PacingFigures) -> str:
    """`Pacer.figures` in a few words: a run's progress line, the judge's summary line."""
    word = "limit" if figures["mode"] == "adaptive" else "fixed"
    return (f"{word} {figures['limit']} · 429s {figures['rate_limited']} · "
            f"backoff {figures['backoff_s']:.1f}s")


class PacingFigures(TypedDict):
    """What limited a run's (or a judge's) calls (`Pacer.figures`): the concurrency mode, the
    limit at the end and its range, 429s seen and seconds spent backing off."""

    mode: Literal["fixed", "adaptive"]
    limit: int
    lowest: int
    highest: int
    rate_limited: int
    backoff_s: float


class PacedClient:
    """A client whose every request passes its endpoint's pacer."""

    def __init__(self, client: Client, pacer: Pacer) -> None:
        self.client = client
        self.pacer = pacer
        self.name = client.name

    async def send(self, body: dict[str, Any], timeout: float) -> Reply | ProviderFailure:
        sent_at = await self.pacer.acquire()
        sent: Reply | ProviderFailure | None = None
        try:
            sent = await self.client.send(body, timeout)
            return sent
        finally:
            if sent is None:  # cancelled (a stopped run)
                self.pacer.abandon()
            else:
                self.pacer.release(sent_at, sent)

    async def aclose(self) -> None:
        await self.client.aclose()


def endpoint_of(route: ModelRoute) -> str:
    """What a provider's rate limit belongs to: the endpoint and the key (by its variable)."""
    base = route.api_base or LEAN_BASES.get(route.route) or route.route or route.model
    return f"{base.rstrip('/')} {route.key_env or ''}"


class Pacers:
    """A run's pacers, one per endpoint and key: `--concurrency N` makes each fixed at N."""

    def __init__(self, fixed: int | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.fixed = fixed
        self.clock = clock
        self._by_endpoint: dict[str, Pacer] = {}

    def for_route(self, route: ModelRoute) -> Pacer:
        key = endpoint_of(route)
        pacer = self._by_endpoint.get(key)
        if pacer is None:
            if self.fixed is not None:
                limit = ConcurrencyLimit(self.fixed, ceiling=self.fixed, fixed=True)
            else:
                limit = ConcurrencyLimit()
            pacer = self._by_endpoint[key] = Pacer(limit, self.clock)
        return pacer

    def paced(self, route: ModelRoute, client: Client) -> PacedClient:
        return PacedClient(client, self.for_route(route))
