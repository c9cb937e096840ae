"""The agent loop of `callgate run` over real HTTP against the loopback server: tool results from
an environment or from scripted results go back as tool messages, turn after turn; the turn
limit, environment errors, what is stored per request, the cache, offline mode and resuming a
killed run at the first unanswered turn."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from live_runs import candidate, rows, run, settings
from loopback import Loopback, Seen, error, ok, tool_call
from multiturn import STATE, env_suite, mt_case, plain_suite

from callgate.running.run import LiveRun, LiveRunner, OfflineMiss
from callgate.store.db import Store
from callgate.suites.suite import load_suite

RESPONSES = "SELECT * FROM responses"
CANCEL_1 = {"type": "final_state", "calls": [
    {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]}


def seen(loopback: Loopback, case_id: str) -> list[Seen]:
    return [s for s in loopback.requests if s.marker.startswith(f"[{case_id}]")]


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return tool_call(name, arguments, call_id)


def test_the_loop_with_an_environment(loopback: Loopback, tmp_path: Path) -> None:
    loopback.script_turns(
        "[cancel]",
        ok(calls=[call("lookup_order", "c0", order_id="ord_1")]),
        ok(calls=[call("cancel_order", "c1", order_id="ord_1", reason="duplicate"),
                  call("cancel_order", "c2", order_id="ord_3", reason="other")]),
        ok(content="ord_1 is cancelled; ord_3 has shipped."),
    )
    loopback.script_turns("[limit]", ok(calls=[call("lookup_order", "c", order_id="ord_2")]))
    loopback.script_turns("[down]", ok(calls=[call("track_shipment", "t", order_id="ord_666")]),
                          ok(content="Lost."))
    suite = load_suite(env_suite(tmp_path / "shop", [
        mt_case("cancel", CANCEL_1, state=STATE),
        mt_case("limit", {"type": "trajectory", "calls": [{"tool": "lookup_order"}]},
                state=STATE, max_turns=2),
        mt_case("down", {"type": "trajectory", "calls": [{"tool": "track_shipment"}]},
                state=STATE),
    ]))
    live = run(tmp_path, suite, loopback)
    verdicts = {v.case_id: v for v in live.result.verdicts}

    first, second, third = seen(loopback, "cancel")
    assert [m["role"] for m in first.body["messages"]] == ["user"]
    assert second.body["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            call("lookup_order", "c0", order_id="ord_1")]},
        {"role": "tool", "tool_call_id": "c0",
         "content": json.dumps({"order_id": "ord_1", "status": "pending"})},
    ]
    tool_messages = [m for m in third.body["messages"] if m["role"] == "tool"][1:]
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in tool_messages] == [
        ("c1", {"order_id": "ord_1", "status": "cancelled"}),
        ("c2", {"error": "ord_3 is shipped"}),  # a ToolError goes back to the model
    ]
    assert third.body["tools"] == first.body["tools"]
    cancel = verdicts["cancel"]
    assert cancel.right_tool and cancel.right_arguments and cancel.calls == 3

    assert len(seen(loopback, "limit")) == 2
    assert verdicts["limit"].tool == "turn_limit" and verdicts["limit"].calls == 2

    assert len(seen(loopback, "down")) == 1  # the loop stops where the environment failed
    assert verdicts["down"].status == "environment_error"
    assert "carrier database is down" in verdicts["down"].reason
    assert live.result.scores.excluded["environment_error"] == 1
    assert live.result.scores.figures.scored == 2
    assert live.called == 3 and live.requests == 6 and live.provider_errors == 0

    cache = rows(tmp_path, "SELECT * FROM live_responses")
    assert len(cache) == 6  # every request of every turn
    lengths = {len(json.loads(r["request"])["body"]["messages"]) for r in cache}
    assert lengths == {1, 3, 6}
    stored = {r["case_id"]: json.loads(r["body"]) for r in rows(tmp_path, RESPONSES)}
    assert len(stored["cancel"]["turns"]) == 3 and stored["cancel"]["cost"] > 0
    assert stored["limit"]["finish_reason"] == "turn_limit"
    assert stored["down"]["finish_reason"] == "environment_error"
    turn_rows = rows(tmp_path, "SELECT case_id, turn, cached FROM run_turns ORDER BY case_id, turn")
    assert [(r["case_id"], r["turn"]) for r in turn_rows] == [
        ("cancel", 0), ("cancel", 1), ("cancel", 2), ("down", 0), ("limit", 0), ("limit", 1)]

    loopback.reset()
    again = run(tmp_path, suite, loopback, environ={})  # every turn is stored: no key needed
    assert again.cached == 3 and again.called == 0 and loopback.requests == []
    assert again.result.verdicts == live.result.verdicts
    offline = run(tmp_path, suite, loopback, settings(offline=True), environ={})
    assert offline.result.verdicts == live.result.verdicts
    with pytest.raises(OfflineMiss, match="3 of 6 attempts have no stored response"):
        run(tmp_path, suite, loopback, settings(offline=True, repeats=2), environ={})


def test_the_loop_with_scripted_results(loopback: Loopback, tmp_path: Path) -> None:
    loopback.script_turns(
        "[where]",
        ok(calls=[call("lookup_order", "a", order_id="ord_1"),
                  call("lookup_order", "b", order_id="ord_2"),
                  tool_call("track_shipment", '{"order_id": "ord_', "c")]),
        ok(content="ord_1 has shipped."),
    )
    case = mt_case("where", {"type": "trajectory", "mode": "superset",
                             "calls": [{"tool": "lookup_order", "args": {"order_id": "ord_1"}}]},
                   tool_results=[
                       {"tool": "lookup_order", "args": {"order_id": "ord_1"},
                        "result": {"status": "shipped"}},
                       {"tool": "lookup_order", "args": {}, "result": {"status": "unknown"}},
                   ])
    live = run(tmp_path, load_suite(plain_suite(tmp_path / "s", [case])), loopback,
               settings(repeats=2))
    requests = seen(loopback, "where")
    assert len(requests) == 4  # two repeats of two turns, whatever order they arrived in
    later = [r for r in requests if len(r.body["messages"]) > 1]
    assert len(later) == 2
    for request in later:
        answers = {m["tool_call_id"]: json.loads(m["content"])
                   for m in request.body["messages"] if m["role"] == "tool"}
        assert answers["a"] == {"status": "shipped"}
        assert answers["b"] == {"status": "unknown"}  # the first entry that matches wins
        assert answers["c"]["error"].startswith("arguments are not valid JSON")
    verdicts = live.result.verdicts
    assert [v.repeat for v in verdicts] == [0, 1]
    assert all(v.arguments == "invalid_json" and v.right_tool for v in verdicts)
    assert {r["repeat"] for r in rows(tmp_path, "SELECT repeat FROM live_responses")} == {0, 1}


def test_a_failed_turn_is_asked_again_and_the_turns_before_it_come_from_the_cache(
    loopback: Loopback, tmp_path: Path
) -> None:
    loopback.script_turns("[cancel]", ok(calls=[call("lookup_order", "c0", order_id="ord_1")]),
                          error(400, "bad request"))
    suite = load_suite(env_suite(tmp_path / "shop", [mt_case("cancel", CANCEL_1, state=STATE)]))
    failed = run(tmp_path, suite, loopback)
    assert failed.provider_errors == 1 and failed.result.verdicts[0].status == "provider_error"
    assert failed.result.scores.excluded["provider_error"] == 1
    loopback.reset()
    loopback.script_turns(
        "[cancel]", error(500, "turn 0 is answered from the store, never asked"),
        ok(calls=[call("cancel_order", "c1", order_id="ord_1", reason="duplicate")]),
        ok(content="Cancelled."))
    fixed = run(tmp_path, suite, loopback)
    assert [len(s.body["messages"]) for s in loopback.requests] == [3, 5]
    assert fixed.result.verdicts[0].right_arguments and fixed.called == 1


def test_a_killed_run_resumes_at_the_first_unanswered_turn(
    loopback: Loopback, tmp_path: Path
) -> None:
    held = threading.Event()  # the second turn's answer comes only after the run has ended
    loopback.script_turns(
        "[cancel]",
        ok(calls=[call("lookup_order", "c0", order_id="ord_1")]),
        replace(ok(calls=[call("cancel_order", "c1", order_id="ord_1", reason="duplicate")]),
                hold=held),
        ok(content="Cancelled."),
    )
    suite = load_suite(env_suite(tmp_path / "shop", [mt_case("cancel", CANCEL_1, state=STATE)]))

    async def stop_in_the_second_turn() -> LiveRun:
        with Store(tmp_path / "callgate.db") as store:
            runner = LiveRunner(suite, candidate(loopback), store, "r1",
                                settings=settings(), environ={KEY_ENV: KEY})
            runner.switch.grace = 0.05  # the turn in flight does not answer within it
            task = asyncio.create_task(runner.run())
            while runner.counters.requests < 2:
                await asyncio.sleep(0.01)
            runner.stop()
            return await task

    try:
        stopped = asyncio.run(stop_in_the_second_turn())
    finally:
        held.set()
    assert stopped.stopped == "interrupted" and stopped.result.missing == ["cancel"]
    assert rows(tmp_path, "SELECT status FROM runs") == [{"status": "interrupted"}]
    assert len(rows(tmp_path, "SELECT key FROM live_responses")) == 1  # the first turn, kept
    loopback.reset()
    loopback.script_turns(
        "[cancel]",
        error(500, "never asked again"),
        ok(calls=[call("cancel_order", "c1", order_id="ord_1", reason="duplicate")]),
        ok(content="Cancelled."),
    )
    resumed = run(tmp_path, suite, loopback)
    assert [len(s.body["messages"]) for s in loopback.requests] == [3, 5]
    assert resumed.result.verdicts[0].right_arguments
    assert rows(tmp_path, "SELECT status FROM runs") == [{"status": "done"}]
    turn_rows = rows(tmp_path, "SELECT turn, cached FROM run_turns ORDER BY turn")
    assert turn_rows == [{"turn": 0, "cached": 1}, {"turn": 1, "cached": 0},
                         {"turn": 2, "cached": 0}]


def test_single_turn_cases_keep_their_path(loopback: Loopback, tmp_path: Path) -> None:
    # Cases without tool results, next to looping ones: one request each, as before.
    loopback.script("[plain]", ok(calls=[call("lookup_order", "x", order_id="ord_1")]))
    loopback.script_turns("[scripted]", ok(calls=[call("lookup_order", "y", order_id="ord_1")]),
                          ok(content="Shipped."))
    plain = mt_case("plain", {"type": "calls", "calls": [
        {"tool": "lookup_order", "args": {"order_id": "ord_1"}}]})
    scripted = mt_case("scripted", {"type": "trajectory", "calls": [{"tool": "lookup_order"}]},
                       tool_results=[{"tool": "lookup_order", "result": {"status": "shipped"}}])
    live = run(tmp_path, load_suite(plain_suite(tmp_path / "s", [plain, scripted])), loopback)
    assert len(seen(loopback, "plain")) == 1 and len(seen(loopback, "scripted")) == 2
    assert all(v.right_arguments for v in live.result.verdicts)
    bodies = {r["case_id"]: json.loads(r["body"]) for r in rows(tmp_path, RESPONSES)}
    assert "response" in bodies["plain"] and "turns" in bodies["scripted"]


def test_a_schema_invalid_call_gets_the_schema_error_back(
    loopback: Loopback, tmp_path: Path
) -> None:
    loopback.script_turns(
        "[bad]",
        ok(calls=[call("lookup_order", "b0", order_id=["ord_1"])]),  # Shop would crash on it
        ok(content="I could not look it up."),
    )
    suite = load_suite(env_suite(tmp_path / "shop", [
        mt_case("bad", {"type": "trajectory", "calls": [{"tool": "lookup_order"}]}, state=STATE),
    ]))
    live = run(tmp_path, suite, loopback)
    _, second = seen(loopback, "bad")
    tool_message = second.body["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "b0"
    assert json.loads(tool_message["content"]) == {
        "error": "arguments do not match the schema: lookup_order.order_id: expected string, "
                 'got array ["ord_1"]'}
    verdict = live.result.verdicts[0]
    assert verdict.status == "scored" and verdict.arguments == "schema_violation"
    assert live.result.scores.figures.scored == 1
