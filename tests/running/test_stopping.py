"""Stopping a live run (docs/guides/runs.md, "Stopping and resuming"): after a stop no request
starts, not even a retry; an answer in flight that comes within the grace is kept, as it was
paid for; a second Ctrl-C (or the end of the grace) gives up the rest, asked on resume. Every
reply in flight is held on an event, so no step depends on how fast a loaded machine is."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from conftest import KEY, KEY_ENV, lookup_case, write_suite
from live_runs import candidate, rows, run, settings
from loopback import Loopback, error, ok, tool_call

from callgate.running.run import LiveRun, LiveRunner
from callgate.store.db import Store
from callgate.suites.suite import Suite, load_suite

CALL = tool_call("lookup_order", {"order_id": "ord_1"})
BOUND = 120  # seconds: an upper bound only, never reached unless the run hangs


def three_cases(tmp_path: Path) -> Suite:
    return load_suite(write_suite(tmp_path / "suite", [lookup_case(c) for c in "abc"]))


def stop_while_held(tmp_path: Path, suite: Suite, loopback: Loopback, held: threading.Event,
                    stop: Callable[[LiveRunner], None], grace: float = 3600) -> LiveRun:
    """Run with one attempt in flight at a time; once the server holds the first request,
    `stop` the runner. `grace`: the in-flight answer's time (an hour: only what the test does
    ends the wait)."""

    async def stopped() -> LiveRun:
        with Store(tmp_path / "callgate.db") as store:
            runner = LiveRunner(suite, candidate(loopback), store, "r1",
                                settings=settings(concurrency=1), environ={KEY_ENV: KEY})
            runner.switch.grace = grace
            task = asyncio.create_task(runner.run())
            while not loopback.requests and not task.done():
                await asyncio.sleep(0.01)
            stop(runner)
            return await asyncio.wait_for(task, BOUND)

    try:
        return asyncio.run(stopped())
    finally:
        held.set()


def answered(tmp_path: Path) -> list[str]:
    return sorted(r["case_id"] for r in rows(tmp_path, "SELECT case_id FROM live_responses"))


def asked(loopback: Loopback) -> list[str]:
    return sorted(seen.marker[1] for seen in loopback.requests)


def test_the_answer_in_flight_at_a_stop_is_kept_and_no_request_starts_after_it(
    loopback: Loopback, tmp_path: Path
) -> None:
    held = threading.Event()
    loopback.script("[a]", replace(ok(calls=[CALL]), hold=held))
    suite = three_cases(tmp_path)

    def stop_then_answer(runner: LiveRunner) -> None:
        runner.stop()
        held.set()  # the answer comes after the stop, within the grace

    stopped = stop_while_held(tmp_path, suite, loopback, held, stop_then_answer)
    assert stopped.stopped == "interrupted" and stopped.called == 1
    assert asked(loopback) == ["a"] and answered(tmp_path) == ["a"]
    assert [v.case_id for v in stopped.result.verdicts] == ["a"]
    assert rows(tmp_path, "SELECT status FROM runs") == [{"status": "interrupted"}]
    loopback.reset()
    resumed = run(tmp_path, suite, loopback)
    assert (resumed.cached, resumed.called) == (1, 2) and asked(loopback) == ["b", "c"]


def test_a_second_ctrl_c_gives_up_the_answer_in_flight_and_a_resume_asks_it_again(
    loopback: Loopback, tmp_path: Path
) -> None:
    held = threading.Event()  # set only after the run has ended
    loopback.script("[a]", replace(ok(calls=[CALL]), hold=held))
    suite = three_cases(tmp_path)

    def ctrl_c_twice(runner: LiveRunner) -> None:
        runner.switch.interrupt()
        assert runner.switch.reason == "interrupted" and not runner.switch.abandoned
        runner.switch.interrupt()

    stopped = stop_while_held(tmp_path, suite, loopback, held, ctrl_c_twice)
    assert stopped.stopped == "interrupted" and stopped.called == 0
    assert answered(tmp_path) == [] and stopped.result.missing == ["a", "b", "c"]
    assert rows(tmp_path, "SELECT status FROM runs") == [{"status": "interrupted"}]
    loopback.reset()
    resumed = run(tmp_path, suite, loopback)
    assert (resumed.cached, resumed.called) == (0, 3) and asked(loopback) == ["a", "b", "c"]


def test_an_answer_not_in_within_the_grace_is_given_up(
    loopback: Loopback, tmp_path: Path
) -> None:
    held = threading.Event()
    loopback.script("[a]", replace(ok(calls=[CALL]), hold=held))
    suite = three_cases(tmp_path)
    stopped = stop_while_held(tmp_path, suite, loopback, held, LiveRunner.stop, grace=0.05)
    assert stopped.stopped == "interrupted" and stopped.called == 0 and answered(tmp_path) == []


def test_no_retry_is_sent_after_a_stop(loopback: Loopback, tmp_path: Path) -> None:
    held = threading.Event()
    loopback.script("[a]", replace(error(500, "busy"), hold=held), ok(calls=[CALL]))
    suite = three_cases(tmp_path)

    def stop_then_fail(runner: LiveRunner) -> None:
        runner.stop()
        held.set()  # the 500 comes after the stop: its retry would be a new request

    stopped = stop_while_held(tmp_path, suite, loopback, held, stop_then_fail)
    assert stopped.stopped == "interrupted" and stopped.called == 0
    assert asked(loopback) == ["a"] and answered(tmp_path) == []
    loopback.reset()
    resumed = run(tmp_path, suite, loopback)
    assert resumed.called == 3 and asked(loopback) == ["a", "b", "c"]
