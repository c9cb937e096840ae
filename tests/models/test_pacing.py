"""The pacing controller on scripted answers: slow start, one cut per round trip on a burst of
429s, the rate-limit headers, a latency rise, recovery, and the gate that holds requests off.
Deterministic: the clock is a number the test moves, and nothing sleeps."""

from __future__ import annotations

import asyncio
import itertools
import shutil
from pathlib import Path

import pytest
from conftest import KEY, KEY_ENV, lookup_case, write_suite
from loopback import Loopback, error, ok
from paths import ROOT

from callgate.judging.judge import JudgeModel, load_judge
from callgate.judging.step import JudgeStep
from callgate.models.config import Candidate
from callgate.models.pacing import ConcurrencyLimit, Pacer, Pacers, hold_from_headers
from callgate.models.replies import ProviderFailure, RateLimits, Reply
from callgate.models.routes import route_for
from callgate.running.run import LiveRunner
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import load_suite

LATENCY = 0.15


def clean(limit: ConcurrencyLimit, *, now: float, sent_at: float | None = None,
          latency: float = LATENCY, limits: RateLimits | None = None,
          in_flight: int | None = None) -> None:
    limit.answered(sent_at=now - latency if sent_at is None else sent_at, now=now,
                   in_flight=limit.slots if in_flight is None else in_flight,
                   latency=latency, kind=None, limits=limits)


def round_trip(limit: ConcurrencyLimit, now: float, latency: float = LATENCY,
               **kwargs: object) -> float:
    """One round trip of clean answers, one per slot; returns the time after it."""
    for _ in range(limit.slots):
        clean(limit, now=now, latency=latency, **kwargs)  # type: ignore[arg-type]
    return now + latency


def rate_limited(limit: ConcurrencyLimit, *, sent_at: float, now: float) -> None:
    limit.answered(sent_at=sent_at, now=now, in_flight=limit.slots, latency=0.001,
                   kind="rate_limit", limits=None)


def test_slow_start_doubles_each_round_trip_then_stops_at_the_ceiling() -> None:
    limit = ConcurrencyLimit(8, ceiling=40)
    now = 1.0
    seen = []
    for _ in range(4):
        now = round_trip(limit, now)
        seen.append(limit.slots)
    assert seen == [16, 32, 40, 40]


def test_a_burst_of_429s_cuts_once_per_round_trip() -> None:
    limit = ConcurrencyLimit(32)
    # 20 requests sent at t=1.0 all come back 429 at t=1.2: one cut, not twenty.
    for _ in range(20):
        rate_limited(limit, sent_at=1.0, now=1.2)
    assert limit.slots == 16
    # A 429 to a request sent after the cut is news: the next cut.
    rate_limited(limit, sent_at=1.25, now=1.3)
    assert limit.slots == 8
    assert limit.lowest == 8 and limit.highest == 32


def test_recovery_after_a_429_is_additive_one_per_round_trip() -> None:
    limit = ConcurrencyLimit(20)
    rate_limited(limit, sent_at=1.0, now=1.1)
    assert limit.slots == 10
    now = 2.0
    seen = [limit.limit]
    for _ in range(5):
        now = round_trip(limit, now)
        seen.append(limit.limit)
    steps = [after - before for before, after in itertools.pairwise(seen)]
    assert all(0.8 < step <= 1.0 for step in steps), steps  # no second slow start


def test_headers_hold_growth_when_headroom_is_low_and_cut_when_it_runs_out() -> None:
    limit = ConcurrencyLimit(8)
    clean(limit, now=1.0, limits=RateLimits(requests_left=12))  # under two limits' worth
    assert limit.limit == 8
    clean(limit, now=1.01, limits=RateLimits(requests_left=500))
    assert limit.limit == 9
    clean(limit, now=1.2, limits=RateLimits(requests_left=5))  # fewer left than in flight
    assert limit.slots == 8  # 9 × 0.9
    clean(limit, now=1.21, limits=RateLimits(requests_left=3))  # same round trip: no news
    assert limit.slots == 8
    clean(limit, now=1.5, limits=RateLimits(tokens_share=0.02))  # a token limit nearly spent
    assert limit.slots == 7
    clean(limit, now=1.51, limits=RateLimits(tokens_share=0.1))  # low: hold
    assert limit.slots == 7


def test_a_latency_rise_cuts_and_growth_resumes_once_it_is_the_new_normal() -> None:
    limit = ConcurrencyLimit(16, ceiling=16)
    now = 1.0
    for _ in range(3):
        now = round_trip(limit, now)  # warm: 48 answers at 150 ms, at the ceiling
    assert limit.slots == 16
    now = round_trip(limit, now, latency=0.6)  # the provider is queueing: four times slower
    assert limit.slots == 14  # cut by a tenth, once in the round trip
    for _ in range(20):  # 600 ms for a while: the long-run mean catches up, growth resumes
        now = round_trip(limit, now, latency=0.6)
    assert limit.slots == 16


def test_a_limit_not_in_use_does_not_grow() -> None:
    limit = ConcurrencyLimit(16)
    for _ in range(50):
        clean(limit, now=1.0, in_flight=3)  # the run has only 3 requests left to send
    assert limit.slots == 16


def test_server_errors_and_timeouts_cut_gently_and_other_failures_not_at_all() -> None:
    limit = ConcurrencyLimit(20)
    limit.answered(sent_at=1.0, now=1.1, in_flight=20, latency=0.1, kind="server_error",
                   limits=None)
    assert limit.slots == 18
    limit.answered(sent_at=1.2, now=1.3, in_flight=18, latency=0.1, kind="bad_request",
                   limits=None)
    assert limit.slots == 18


def test_a_fixed_limit_never_moves() -> None:
    limit = ConcurrencyLimit(64, ceiling=64, fixed=True)
    rate_limited(limit, sent_at=1.0, now=1.1)
    for _ in range(200):
        clean(limit, now=2.0)
    assert (limit.slots, limit.lowest, limit.highest) == (64, 64, 64)


def test_hold_from_headers_waits_for_the_next_request_only_when_none_is_left() -> None:
    assert hold_from_headers(RateLimits(requests_left=0, requests_limit=20, reset=0.5)) == 0.025
    assert hold_from_headers(RateLimits(requests_left=0, reset=2.0)) == 2.0
    assert hold_from_headers(RateLimits(requests_left=0, reset=3600.0)) == 60.0
    assert hold_from_headers(RateLimits(requests_left=1, reset=2.0)) == 0.0
    assert hold_from_headers(None) == 0.0


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def ok_reply(latency_ms: float = 150.0) -> Reply:
    return Reply({}, latency_ms)


def test_the_pacer_admits_up_to_the_limit_and_wakes_waiters_in_order() -> None:
    time = FakeTime()
    pacer = Pacer(ConcurrencyLimit(2, ceiling=2, fixed=True), time.clock, time.sleep)
    order: list[str] = []

    async def request(name: str) -> None:
        sent_at = await pacer.acquire()
        order.append(name)
        await asyncio.sleep(0)  # others run while this one is out
        await asyncio.sleep(0)
        pacer.release(sent_at, ok_reply())

    async def main() -> int:
        tasks = [asyncio.create_task(request(n)) for n in "abcde"]
        await asyncio.sleep(0)
        most = pacer.in_flight
        await asyncio.gather(*tasks)
        return most

    assert asyncio.run(main()) == 2
    assert order == list("abcde")
    assert pacer.in_flight == 0 and time.slept == []


def test_a_retry_after_holds_every_request_off_and_counts_as_backoff_once() -> None:
    time = FakeTime()
    pacer = Pacer(ConcurrencyLimit(8), time.clock, time.sleep)

    async def main() -> float:
        first = await pacer.acquire()
        second = await pacer.acquire()
        pacer.release(first, ProviderFailure("rate_limit", "slow down", 429, retry_after=2.0))
        pacer.release(second, ProviderFailure("rate_limit", "slow down", 429, retry_after=2.0))
        return await pacer.acquire()

    sent_at = asyncio.run(main())
    assert sent_at == pytest.approx(102.0)  # nothing went out before the Retry-After passed
    assert time.slept == [pytest.approx(2.0)]
    figures = pacer.figures()
    assert figures["rate_limited"] == 2
    assert figures["backoff_s"] == pytest.approx(2.0)  # two overlapping waits: 2 s of wall
    assert figures["limit"] == 4 and figures["mode"] == "adaptive"


def test_backoff_is_the_union_of_the_waits() -> None:
    time = FakeTime()
    pacer = Pacer(ConcurrencyLimit(8), time.clock, time.sleep)
    pacer.backing_off(1.0)  # [100, 101]
    time.now = 100.5
    pacer.backing_off(1.0)  # [100.5, 101.5]: half of it new
    time.now = 105.0
    pacer.backing_off(0.25)  # apart
    assert pacer.backoff_s == pytest.approx(1.75)


def test_a_stopped_request_gives_its_slot_back() -> None:
    time = FakeTime()
    pacer = Pacer(ConcurrencyLimit(1, ceiling=1, fixed=True), time.clock, time.sleep)

    async def main() -> None:
        await pacer.acquire()
        waiter = asyncio.create_task(pacer.acquire())
        await asyncio.sleep(0)
        assert not waiter.done()
        pacer.abandon()
        await waiter

    asyncio.run(main())
    assert pacer.in_flight == 1


def test_one_pacer_per_endpoint_and_key() -> None:
    pacers = Pacers(None)
    a = route_for(Candidate(name="a", model="openrouter/x/one"))
    b = route_for(Candidate(name="b", model="openrouter/y/two"))
    c = route_for(Candidate(name="c", model="openrouter/x/one", api_key_env="OTHER_KEY"))
    assert pacers.for_route(a) is pacers.for_route(b)  # one key's limit, whatever model
    assert pacers.for_route(a) is not pacers.for_route(c)
    fixed = Pacers(12).for_route(a)
    assert fixed.limit.fixed and fixed.limit.slots == 12


def test_the_judges_calls_pass_the_pacer_of_the_candidates_endpoint(
        loopback: Loopback, tmp_path: Path) -> None:
    """A live run hands its pacers to the judge: a 429 the judge meets at the candidate's
    endpoint is counted (and held off) by the same pacer the candidate's calls use."""
    shutil.copy(ROOT / "judges" / "tool_choice.md", tmp_path / "tool_choice.md")
    spec = tmp_path / "tool_choice.toml"
    spec.write_text(
        'name = "tool_choice"\nmodel = "openai/judge-2026-01-01"\n'
        f'api_base = "{loopback.base_url}"\napi_key_env = "{KEY_ENV}"\n'
        'prompt = "tool_choice.md"\n[parameters]\ntemperature = 0\nsamples = 1\n'
        "[thresholds]\ntpr = 0.9\ntnr = 0.9\nmin_items_per_class = 4\n")
    judge = load_judge(spec)
    model = JudgeModel(judge, {KEY_ENV: KEY})
    step = JudgeStep(judge, model.complete, None, 8, model.aclose, model)
    candidate = Candidate(name="bot", model="openai/served", api_base=loopback.base_url,
                          api_key_env=KEY_ENV)
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("c1")]))
    with Store(tmp_path / "runs.db") as store:
        runner = LiveRunner(suite, candidate, store, "r", judge=step,
                            settings=RunSettings(progress=False))
        loopback.script("[judged]", error(429, "slow down"), ok(content="verdict"))

        async def ask() -> str | None:
            try:
                return await model.complete([{"role": "user", "content": "[judged] decide"}])
            finally:
                await model.aclose()

        assert asyncio.run(ask()) == "verdict"
    shared = runner.pacers.for_route(route_for(candidate))
    assert shared.rate_limited == 1 and shared.in_flight == 0
