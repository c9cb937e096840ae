"""The one caller (running.source, running.calls): a kind of source the runner has never heard
of (a trace replayer, answering from recorded lines) plugs into a live run without a switch:
its faults are retried by the one retry loop, its backoff reaches its pacer, its answers are
checked, stored and cached like a model's, and a rerun is answered from the store without
asking it once."""

from __future__ import annotations

import asyncio
import hashlib
import time
from pathlib import Path
from typing import Any

from conftest import lookup_case, no_call_case, write_suite

from callgate.models.config import Candidate
from callgate.models.pacing import ConcurrencyLimit, Pacer
from callgate.models.retry import RetryPolicy
from callgate.running.cache import AnswerCache, AttemptOutcome
from callgate.running.counters import RunCounters, StopSwitch
from callgate.running.plan import Conversation, PlannedAttempt
from callgate.running.run import LiveRun, LiveRunner
from callgate.running.settings import RunSettings
from callgate.running.source import Answer, Fault, Turns
from callgate.store.db import Store
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite, load_suite

CALL = {"id": "c1", "type": "function",
        "function": {"name": "lookup_order", "arguments": '{"order_id": "ord_1"}'}}


class Replayer:
    """Answers each case from a script: a Fault (retryable, with a Retry-After) or a message."""

    in_flight = 2

    def __init__(self, script: dict[str, list[dict[str, Any] | None]]) -> None:
        self.script = script  # case id -> replies in order; None is a retryable fault
        self.asked: list[str] = []
        self.kept: list[str] = []
        self.pacer: Pacer | None = Pacer(ConcurrencyLimit(2, ceiling=2, fixed=True))

    @property
    def name(self) -> str:
        return "replay"

    async def open(self, timeout: float) -> None:
        return None

    def plan(self, suite: Suite, repeats: int
             ) -> tuple[list[PlannedAttempt], list[Conversation]]:
        attempts = []
        for case_id in suite.cases:
            for repeat in range(repeats):
                key = hashlib.sha256(f"replay {case_id} {repeat}".encode()).hexdigest()
                attempts.append(PlannedAttempt(case_id, repeat, key, {"case": case_id}))
        return attempts, []

    def turns(self, conversation: Conversation, suite: Suite) -> Turns:
        raise AssertionError("no conversation in this suite")

    def connect(self, to_call: int) -> None:
        return None

    async def ask(self, attempt: PlannedAttempt, timeout: float) -> Answer | Fault:
        self.asked.append(attempt.case_id)
        reply = self.script[attempt.case_id].pop(0)
        if reply is None:
            return Fault("busy", True, 0.01, time.perf_counter())
        line = {"case_id": attempt.case_id, "repeat": attempt.repeat, "response": reply}
        return Answer(parse_response(line), line)

    def gave_up(self, attempt: PlannedAttempt, fault: Fault, note: str) -> dict[str, Any]:
        raise AssertionError("nothing is given up on here")

    def keep(self, outcome: AttemptOutcome, extra: Any, cache: AnswerCache,
             counters: RunCounters, stop: StopSwitch) -> None:
        self.kept.append(outcome.attempt.case_id)
        cache.keep(outcome, "replayer", '{"replayed": true}')

    async def aclose(self) -> None:
        return None


def run(tmp_path: Path, suite: Suite, source: Replayer) -> LiveRun:
    with Store(tmp_path / "callgate.db") as store:
        runner = LiveRunner(suite, Candidate(name="replayed", model="replay"), store, "r1",
                            settings=RunSettings(repeats=1, progress=False,
                                                 retry=RetryPolicy(base_delay=0.01)),
                            source=source)
        return asyncio.run(runner.run())


def test_a_new_kind_of_source_runs_through_the_one_caller(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("a"), no_call_case("b")]))
    source = Replayer({"a": [None, {"role": "assistant", "tool_calls": [CALL]}],
                       "b": [{"role": "assistant", "content": "Nine to five."}]})
    live = run(tmp_path, suite, source)
    assert sorted(source.asked) == ["a", "a", "b"]
    assert live.requests == 3 and live.retries == 1 and live.called == 2
    assert live.client == "replay"
    assert live.pacing is not None and live.pacing["backoff_s"] > 0  # the backoff was paced
    verdicts = {v.case_id: v for v in live.result.verdicts}
    assert verdicts["a"].right_arguments and verdicts["b"].right_tool
    with Store(tmp_path / "callgate.db") as store:
        cached = list(store.db.query("SELECT case_id, model, tries FROM live_responses "
                                     "ORDER BY case_id"))
    assert cached == [{"case_id": "a", "model": "replayer", "tries": 2},
                      {"case_id": "b", "model": "replayer", "tries": 1}]

    again = Replayer({"a": [], "b": []})
    rerun = run(tmp_path, suite, again)
    assert again.asked == [] and rerun.cached == 2 and rerun.requests == 0
    assert [v.right_tool for v in rerun.result.verdicts] == [True, True]
