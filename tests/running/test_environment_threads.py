"""A live run's environment calls run off the event loop: two conversations in flight, each
calling a tool that sleeps, are answered at the same time rather than one after the other;
each conversation's calls run in order on one thread of its own (the thread its environment
was made on: an sqlite3 connection made in the constructor still works), and the checks' own
runs of the calls happen off the loop too."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from loopback import Loopback, ok, tool_call

from callgate.models.config import Candidate
from callgate.models.retry import RetryPolicy
from callgate.running.run import run_live
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import load_suite

WAIT = {"type": "function", "function": {
    "name": "wait", "description": "Wait a moment.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                   "required": ["order_id"]}}}
ENV_PY = '''
import json, sqlite3, threading, time


class Slow:
    def __init__(self, state):
        self._state = state
        self._db = sqlite3.connect(":memory:")  # usable only on the thread that made it
        self._db.execute("CREATE TABLE calls (order_id TEXT)")

    def state(self):
        return {"calls": self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]}

    def wait(self, order_id):
        self._db.execute("INSERT INTO calls VALUES (?)", [order_id])
        start = time.monotonic()
        time.sleep(0.4)
        with open(self._state["log"], "a", encoding="utf-8") as out:
            out.write(json.dumps({"call": order_id, "thread": threading.get_ident(),
                                  "name": threading.current_thread().name,
                                  "start": start, "end": time.monotonic()}) + "\\n")
        return "waited"
'''


def case(case_id: str, log: Path) -> dict[str, Any]:
    return {"id": case_id, "messages": [{"role": "user", "content": f"[{case_id}] wait twice"}],
            "state": {"log": str(log)},
            "expect": {"type": "trajectory", "mode": "strict", "calls": [
                {"tool": "wait", "args": {"order_id": f"{case_id}1"}},
                {"tool": "wait", "args": {"order_id": f"{case_id}2"}}]}}


@pytest.mark.slow
def test_two_conversations_wait_on_their_environments_at_once(
    loopback: Loopback, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    root = tmp_path / "slow"
    root.mkdir()
    (root / "env.py").write_text(ENV_PY)
    (root / "suite.json").write_text(json.dumps({"environment": "env:Slow"}))
    (root / "tools.json").write_text(json.dumps([WAIT]))
    (root / "cases.jsonl").write_text("".join(json.dumps(case(c, log)) + "\n" for c in "ab"))
    for case_id in "ab":
        loopback.script_turns(f"[{case_id}]",
                              ok(calls=[tool_call("wait", {"order_id": f"{case_id}1"}, "w1")]),
                              ok(calls=[tool_call("wait", {"order_id": f"{case_id}2"}, "w2")]),
                              ok(content="Done."))
    settings = RunSettings(repeats=1, concurrency=2, timeout=30, progress=False,
                           retry=RetryPolicy(base_delay=0.01))
    candidate = Candidate(name="cand", model="openrouter/test/model",
                          api_base=loopback.base_url, api_key_env=KEY_ENV)
    with Store(tmp_path / "callgate.db") as store:
        live = run_live(load_suite(root), candidate, store, release="r1", settings=settings,
                        environ={KEY_ENV: KEY})
    assert [(v.status, v.right_arguments) for v in live.result.verdicts] == [
        ("scored", True), ("scored", True)]
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    # The checks run the calls again on fresh copies (after the run's), off the event loop
    # too; every Python environment runs on a thread of its own (suites/environment_guard).
    calls: dict[str, dict[str, Any]] = {}
    for logged_call in logged:
        calls.setdefault(logged_call["call"], logged_call)
    replayed = [c for c in logged if calls[c["call"]] is not c]
    assert replayed and all(c["thread"] != threading.main_thread().ident for c in replayed)
    assert sorted(calls) == ["a1", "a2", "b1", "b2"]
    for case_id in "ab":
        first, second = calls[f"{case_id}1"], calls[f"{case_id}2"]
        assert first["thread"] == second["thread"] != threading.main_thread().ident
        assert first["end"] <= second["start"]  # in order
    assert calls["a1"]["thread"] != calls["b1"]["thread"]
    # Answered at the same time: each of a's calls overlaps one of b's.
    for own in ("a1", "a2"):
        assert any(calls[own]["start"] < calls[other]["end"] and
                   calls[other]["start"] < calls[own]["end"] for other in ("b1", "b2")), calls
