"""Scripted user turns (a case's `user_turns`): a live run over real HTTP against the loopback
server asks each later user turn after the model answered the one before, offers the tools a
turn adds from that turn on, keeps one environment across turns, records where each user turn
ends, resumes mid-conversation and asks again only what a changed turn changes; the recorded
form scores as the live one; load-time and read-time refusals."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from live_runs import candidate, rows, run, settings
from loopback import Loopback, Seen, ok, tool_call
from multiturn import STATE, assistant, c, env_suite, plain_suite, score

from callgate.errors import InputError
from callgate.judging.payloads import judge_payloads
from callgate.running.run import LiveRun, LiveRunner
from callgate.store.db import Store
from callgate.suites.responses import parse_response
from callgate.suites.suite import load_suite

CANCEL_1 = {"type": "final_state", "calls": [
    {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]}
CALLGATE = str(Path(sys.executable).with_name("callgate"))


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def two_turn_case(case_id: str, expect: dict[str, Any] = CANCEL_1, later: str = "cancel it",
                  add_tools: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """Turn 1 offers lookup_order alone; user turn 2 (`[ID-2] ...`) adds cancel_order."""
    return {"id": case_id, "messages": user(f"[{case_id}] look up ord_1"),
            "tools": ["lookup_order"], "state": STATE, "expect": expect,
            "user_turns": [{"messages": user(f"[{case_id}-2] {later}"),
                            "add_tools": ["cancel_order"] if add_tools is None else add_tools}],
            **extra}


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return tool_call(name, arguments, call_id)


def script(loopback: Loopback, case_id: str, hold: threading.Event | None = None) -> None:
    """`hold`: the second turn of the second user turn is answered only once it is set."""
    loopback.script_turns(f"[{case_id}]", ok(calls=[call("lookup_order", "a", order_id="ord_1")]),
                          ok(content="ord_1 is pending."))
    loopback.script_turns(
        f"[{case_id}-2]",
        ok(calls=[call("cancel_order", "b", order_id="ord_1", reason="duplicate")]),
        replace(ok(calls=[call("lookup_order", "c", order_id="ord_1")]), hold=hold),
        ok(content="ord_1 is cancelled."))


def requests(loopback: Loopback, case_id: str) -> list[Seen]:
    return [s for s in loopback.requests if s.marker.startswith((f"[{case_id}]",
                                                                 f"[{case_id}-2]"))]


def offered(seen: Seen) -> list[str]:
    return [tool["function"]["name"] for tool in seen.body["tools"]]


def test_a_live_run_asks_each_user_turn_after_the_last_is_answered(
    loopback: Loopback, tmp_path: Path
) -> None:
    script(loopback, "two")
    suite = load_suite(env_suite(tmp_path / "shop", [two_turn_case("two")]))
    live = run(tmp_path, suite, loopback)
    sent = requests(loopback, "two")
    assert len(sent) == 5
    # cancel_order is offered from user turn 2 on, appended to the case's tools.
    assert [offered(s) for s in sent] == [["lookup_order"]] * 2 + [
        ["lookup_order", "cancel_order"]] * 3
    third = sent[2].body["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "tool", "assistant", "user"]
    assert third[3] == {"role": "assistant", "content": "ord_1 is pending."}
    assert third[4] == {"role": "user", "content": "[two-2] cancel it"}
    # One environment for the whole conversation: the lookup after the cancel sees it.
    last_tool = json.loads(sent[4].body["messages"][-1]["content"])
    assert last_tool == {"order_id": "ord_1", "status": "cancelled", "reason": "duplicate"}
    verdict = live.result.verdicts[0]
    assert verdict.status == "scored" and verdict.right_arguments and verdict.calls == 3
    stored = json.loads(rows(tmp_path, "SELECT body FROM responses")[0]["body"])
    assert len(stored["turns"]) == 5 and stored["user_turn_ends"] == [2, 5]
    turn_rows = rows(tmp_path, "SELECT turn FROM run_turns ORDER BY turn")
    assert [r["turn"] for r in turn_rows] == [0, 1, 2, 3, 4]

    # The recorded form of the same conversation scores the same.
    recorded = score(tmp_path, suite, [stored], release="r2")
    assert recorded.verdicts == live.result.verdicts


def test_a_tool_called_before_its_user_turn_adds_it_is_unknown(
    loopback: Loopback, tmp_path: Path
) -> None:
    loopback.script_turns(
        "[early]",
        ok(calls=[call("cancel_order", "a", order_id="ord_1", reason="duplicate")]),
        ok(content="Done."))
    loopback.script_turns("[early-2]", ok(content="It is done already."))
    suite = load_suite(env_suite(tmp_path / "shop", [two_turn_case("early")]))
    live = run(tmp_path, suite, loopback)
    sent = requests(loopback, "early")
    assert json.loads(sent[1].body["messages"][-1]["content"]) == {
        "error": "unknown tool cancel_order"}
    verdict = live.result.verdicts[0]
    # The call was never run, so the state is not the reference's.
    assert not verdict.right_arguments and "is not the reference's" in verdict.reason
    stored = json.loads(rows(tmp_path, "SELECT body FROM responses")[0]["body"])
    assert stored["user_turn_ends"] == [2, 3]
    # Recorded with the cancel in user turn 2 instead, the same calls leave the right state.
    moved = {**stored, "turns": [stored["turns"][1], stored["turns"][0], stored["turns"][1]],
             "user_turn_ends": [1, 3]}
    assert score(tmp_path, suite, [moved], release="r2").verdicts[0].right_arguments


def test_max_turns_counts_per_user_turn(loopback: Loopback, tmp_path: Path) -> None:
    loopback.script_turns("[lim]", ok(calls=[call("lookup_order", "a", order_id="ord_1")]),
                          ok(content="Pending."))
    loopback.script_turns("[lim-2]", ok(calls=[call("lookup_order", "b", order_id="ord_1")]))
    case = two_turn_case("lim", max_turns=2)
    suite = load_suite(env_suite(tmp_path / "shop", [case]))
    live = run(tmp_path, suite, loopback)
    assert len(requests(loopback, "lim")) == 4  # two turns each: the first user turn fits
    verdict = live.result.verdicts[0]
    assert verdict.tool == "turn_limit" and "(user turn 2)" in verdict.reason
    stored = json.loads(rows(tmp_path, "SELECT body FROM responses")[0]["body"])
    assert stored["finish_reason"] == "turn_limit" and stored["user_turn_ends"] == [2, 4]
    assert score(tmp_path, suite, [stored], release="r2").verdicts == live.result.verdicts


def test_scripted_results_and_no_results_work_across_user_turns(
    loopback: Loopback, tmp_path: Path
) -> None:
    loopback.script_turns("[plain]", ok(content="Which order?"))
    loopback.script_turns("[plain-2]", ok(calls=[call("lookup_order", "a", order_id="ord_1")]),
                          ok(content="Shipped."))
    case = {"id": "plain", "messages": user("[plain] where is my order"),
            "expect": {"type": "trajectory", "calls": [
                {"tool": "lookup_order", "args": {"order_id": "ord_1"}, "step": 1}]},
            "tool_results": [{"tool": "lookup_order", "result": {"status": "shipped"}}],
            "user_turns": [{"messages": user("[plain-2] ord_1")}]}
    track = call("track_shipment", "t", order_id="ord_1")
    loopback.script_turns("[track]", ok(calls=[track]), ok(content="I cannot track it."))
    loopback.script_turns("[track-2]", ok(calls=[track]), ok(content="At the depot."))
    added = {"id": "track", "messages": user("[track] where is ord_1"), "tools": ["lookup_order"],
             "expect": {"type": "trajectory", "calls": [{"tool": "track_shipment"}]},
             "tool_results": [{"tool": "track_shipment", "result": {"where": "depot"}}],
             "user_turns": [{"messages": user("[track-2] try tracking"),
                             "add_tools": ["track_shipment"]}]}
    live = run(tmp_path, load_suite(plain_suite(tmp_path / "s", [case, added])), loopback)
    sent = requests(loopback, "plain")
    assert len(sent) == 3
    assert json.loads(sent[2].body["messages"][-1]["content"]) == {"status": "shipped"}
    verdicts = {v.case_id: v for v in live.result.verdicts}
    assert verdicts["plain"].right_arguments  # the call is in turn 2 of the conversation
    answers = [json.loads(s.body["messages"][-1]["content"]) for s in requests(loopback, "track")
               if s.body["messages"][-1]["role"] == "tool"]
    # A scripted result, too, is only for a tool offered by then.
    assert answers == [{"error": "unknown tool track_shipment"}, {"where": "depot"}]


def test_a_changed_later_turn_or_added_tool_is_asked_again_from_that_turn(
    loopback: Loopback, tmp_path: Path
) -> None:
    script(loopback, "two")
    root = tmp_path / "shop"
    run(tmp_path, load_suite(env_suite(root, [two_turn_case("two")])), loopback)
    assert len(loopback.requests) == 5

    loopback.reset()
    script(loopback, "two")
    changed = load_suite(env_suite(root, [two_turn_case("two", later="please cancel it")]))
    again = run(tmp_path, changed, loopback)
    # User turn 1 is the same conversation so far: from the cache. Turn 2 is asked again.
    assert [len(s.body["messages"]) for s in loopback.requests] == [5, 7, 9]
    assert again.result.verdicts[0].right_arguments

    loopback.reset()
    script(loopback, "two")
    more_tools = load_suite(env_suite(root, [two_turn_case(
        "two", later="please cancel it", add_tools=["cancel_order", "track_shipment"])]))
    run(tmp_path, more_tools, loopback)
    assert [len(s.body["messages"]) for s in loopback.requests] == [5, 7, 9]
    assert offered(loopback.requests[0]) == ["lookup_order", "cancel_order", "track_shipment"]

    loopback.reset()
    unchanged = run(tmp_path, more_tools, loopback, environ={})
    assert loopback.requests == [] and unchanged.cached == 1


def test_a_killed_run_resumes_inside_the_second_user_turn(
    loopback: Loopback, tmp_path: Path
) -> None:
    held = threading.Event()  # the fourth turn's answer comes only after the run has ended
    script(loopback, "two", hold=held)
    suite = load_suite(env_suite(tmp_path / "shop", [two_turn_case("two")]))

    async def stop_in_the_second_user_turn() -> LiveRun:
        with Store(tmp_path / "callgate.db") as store:
            runner = LiveRunner(suite, candidate(loopback), store, "r1",
                                settings=settings(), environ={KEY_ENV: KEY})
            task = asyncio.create_task(runner.run())
            while runner.counters.requests < 4:
                await asyncio.sleep(0.01)
            runner.switch.abandon()  # as a second Ctrl-C: the request in flight is given up
            return await task

    try:
        stopped = asyncio.run(stop_in_the_second_user_turn())
    finally:
        held.set()
    assert stopped.stopped == "interrupted" and stopped.result.missing == ["two"]
    assert len(rows(tmp_path, "SELECT key FROM live_responses")) == 3
    loopback.reset()
    script(loopback, "two")
    resumed = run(tmp_path, suite, loopback)
    assert [len(s.body["messages"]) for s in loopback.requests] == [7, 9]
    assert resumed.result.verdicts[0].right_arguments
    turn_rows = rows(tmp_path, "SELECT turn, cached FROM run_turns ORDER BY turn")
    assert [r["cached"] for r in turn_rows] == [1, 1, 1, 0, 0]


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"add_tools": ["refund_order"]}, "user_turns[0].add_tools[0]", "unknown tool 'refund_order'"),
    ({"add_tools": ["lookup_order"]}, "user_turns[0].add_tools[0]",
     "tool 'lookup_order' is offered already"),
    ({"add_tools": ["cancel_order", "cancel_order"]}, "user_turns[0].add_tools[1]",
     "tool 'cancel_order' is offered already"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]},
     "user_turns[0].messages[1].role", "a later user turn holds user messages only"),
    ({"messages": []}, "user_turns[0].messages", "at least 1 item"),
])
def test_a_bad_user_turn_is_refused_at_load(tmp_path: Path, change: dict[str, Any], field: str,
                                            message: str) -> None:
    case = two_turn_case("bad")
    case["user_turns"] = [{**case["user_turns"][0], **change}]
    with pytest.raises(InputError) as caught:
        load_suite(env_suite(tmp_path / "shop", [case]))
    assert caught.value.field == field and message in str(caught.value)


def test_adding_a_tool_to_a_case_that_offers_every_tool_is_refused(tmp_path: Path) -> None:
    case = two_turn_case("all")
    del case["tools"]
    with pytest.raises(InputError, match="offers every catalogue tool") as caught:
        load_suite(env_suite(tmp_path / "shop", [case]))
    assert caught.value.field == "user_turns[0].add_tools[0]"
    case["user_turns"] = []
    with pytest.raises(InputError, match="at least 1 item"):
        load_suite(env_suite(tmp_path / "shop", [case]))


def recorded(*turns: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"case_id": "two", "repeat": 0, "turns": list(turns), **fields}


LOOKUP = assistant(c("lookup_order", order_id="ord_1"))
CANCEL = assistant(c("cancel_order", order_id="ord_1", reason="duplicate"))
TEXT = assistant(content="Done.")


@pytest.mark.parametrize(("line", "message"), [
    (recorded(LOOKUP, TEXT, CANCEL, TEXT), "give user_turn_ends"),
    (recorded(LOOKUP, TEXT, CANCEL, TEXT, user_turn_ends=[2, 3]),
     "the last user turn ends at 3, but the line holds 4 turns"),
    (recorded(LOOKUP, TEXT, CANCEL, TEXT, user_turn_ends=[2, 2, 4]), "counts must rise from 1"),
    (recorded(LOOKUP, TEXT, CANCEL, TEXT, user_turn_ends=[1, 2, 4]),
     "3 user turns, but case 'two' has 2"),
    (recorded(LOOKUP, TEXT, user_turn_ends=[2]), "ends after user turn 1 of 2"),
    (recorded(LOOKUP, TEXT, user_turn_ends="2"), "must be a non-empty list of integers"),
])
def test_a_recorded_line_must_say_where_its_user_turns_end(
    tmp_path: Path, line: dict[str, Any], message: str
) -> None:
    suite = load_suite(env_suite(tmp_path / "shop", [two_turn_case("two")]))
    with pytest.raises(InputError, match=message) as caught:
        score(tmp_path, suite, [line])
    assert caught.value.field == "user_turn_ends" and caught.value.line == 1
    with Store(tmp_path / "callgate.db") as store:
        assert list(store.db.query("SELECT * FROM runs")) == []


def test_a_recorded_conversation_cut_short_in_a_user_turn_is_truncated(tmp_path: Path) -> None:
    suite = load_suite(env_suite(tmp_path / "shop", [two_turn_case("two")]))
    cut = recorded(LOOKUP, TEXT, user_turn_ends=[2], finish_reason="length")
    assert score(tmp_path, suite, [cut]).verdicts[0].status == "truncated"
    whole = recorded(LOOKUP, TEXT, CANCEL, TEXT, user_turn_ends=[2, 4])
    assert score(tmp_path, suite, [whole], release="r2").verdicts[0].right_arguments


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("CALLGATE_DB", None)
    return subprocess.run([CALLGATE, *args], capture_output=True, text=True, env=env, timeout=60,
                          cwd=cwd)


@pytest.mark.slow
def test_suite_check_and_score_refuse_bad_user_turns_in_one_line(tmp_path: Path) -> None:
    case = two_turn_case("bad", add_tools=["refund_order"])
    root = env_suite(tmp_path / "bad", [{"id": "ok", "messages": user("hi"),
                                         "expect": {"type": "no_call"}}, case])
    done = cli(tmp_path, "suite", "check", str(root))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {root / 'cases.jsonl'}:2: user_turns[0].add_tools[0]: unknown tool "
        "'refund_order'"]

    good = env_suite(tmp_path / "shop", [two_turn_case("two")])
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps(recorded(LOOKUP, TEXT, CANCEL, TEXT)) + "\n")
    done = cli(tmp_path, "score", str(good), "-r", str(responses), "-m", "m", "--release", "r1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {responses}:1: user_turn_ends: case 'two' has 2 user turns: give "
        "user_turn_ends, where each one's answers end in turns"]
    assert not (tmp_path / "callgate.db").exists() or not rows(tmp_path, "SELECT * FROM runs")
    responses.write_text(json.dumps(recorded(LOOKUP, TEXT, CANCEL, TEXT,
                                             user_turn_ends=[2, 4])) + "\n")
    done = cli(tmp_path, "score", str(good), "-r", str(responses), "-m", "m", "--release", "r1")
    assert done.returncode == 0, done.stderr

def cancel(order: str) -> dict[str, Any]:
    return {"tool": "cancel_order", "args": {"order_id": order, "reason": "duplicate"}}


def two_cancels(expect: dict[str, Any]) -> dict[str, Any]:
    return {"id": "two", "messages": user("[two] cancel ord_1"), "state": STATE,
            "tools": ["lookup_order", "cancel_order"], "expect": expect,
            "user_turns": [{"messages": user("[two-2] and ord_2")}]}


def test_final_state_per_turn_compares_the_state_at_the_end_of_every_user_turn(
    tmp_path: Path
) -> None:
    per_turn = {"type": "final_state", "per_turn": [[cancel("ord_1")], [cancel("ord_2")]]}
    whole = {"type": "final_state", "calls": [cancel("ord_1"), cancel("ord_2")]}
    suites = {name: load_suite(env_suite(tmp_path / name, [two_cancels(expect)]))
              for name, expect in (("per_turn", per_turn), ("whole", whole))}
    cancel_1 = assistant(c("cancel_order", order_id="ord_1", reason="duplicate"))
    cancel_2 = assistant(c("cancel_order", order_id="ord_2", reason="duplicate"))
    late = recorded(TEXT, cancel_1, cancel_2, TEXT, user_turn_ends=[1, 4])  # both in turn 2
    on_time = recorded(cancel_1, TEXT, cancel_2, TEXT, user_turn_ends=[2, 4])

    assert score(tmp_path, suites["whole"], [late], "w1").verdicts[0].right_arguments
    verdict = score(tmp_path, suites["per_turn"], [late], "p1").verdicts[0]
    assert verdict.right_tool and verdict.arguments == "wrong_value"
    assert verdict.arguments_reason.startswith("after user turn 1, state ")
    assert "orders.ord_1." in verdict.arguments_reason
    right = score(tmp_path, suites["per_turn"], [on_time], "p2").verdicts[0]
    assert right.right_arguments and "at the end of every user turn" in right.reason


@pytest.mark.parametrize(("expect", "field", "message"), [
    ({"type": "final_state", "per_turn": [[cancel("ord_1")]]}, "expect.per_turn",
     "per_turn lists 1 user turns, but the case has 2"),
    ({"type": "final_state", "calls": [cancel("ord_2")],
      "per_turn": [[cancel("ord_1")], []]}, "expect.calls", "give the reference calls once"),
    ({"type": "final_state", "per_turn": [[], [{"tool": "track_shipment",
                                                "args": {"order_id": "ord_1"}}]]},
     "expect.per_turn[1][0].tool", "not offered in this case by user turn 2"),
])
def test_a_bad_per_turn_reference_is_refused_at_load(
    tmp_path: Path, expect: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InputError) as caught:
        load_suite(env_suite(tmp_path / "shop", [two_cancels(expect)]))
    assert caught.value.field == field and message in str(caught.value)


def test_a_per_turn_reference_call_before_its_tool_is_added_is_refused(tmp_path: Path) -> None:
    case = two_turn_case("two", {"type": "final_state",
                                 "per_turn": [[cancel("ord_1")], []]})
    with pytest.raises(InputError, match="not offered in this case by user turn 1") as caught:
        load_suite(env_suite(tmp_path / "shop", [case]))
    assert caught.value.field == "expect.per_turn[0][0].tool"


def test_the_judge_sees_the_later_user_turns_and_what_each_call_got(tmp_path: Path) -> None:
    case = two_turn_case("two", {"type": "judge", "rubric": "Did it cancel ord_1?"})
    suite = load_suite(env_suite(tmp_path / "shop", [case]))
    early = assistant(c("cancel_order", order_id="ord_1", reason="duplicate"))
    line = recorded(early, TEXT, CANCEL, TEXT, user_turn_ends=[2, 4])
    case_doc, answer = judge_payloads(suite, suite.cases["two"], parse_response(line))
    assert case_doc["user_turns"] == case["user_turns"]
    roles = [(m["role"], m.get("content")) for m in answer["turns"]]
    assert roles == [
        ("assistant", None), ("tool", json.dumps({"error": "unknown tool cancel_order"})),
        ("assistant", "Done."), ("user", "[two-2] cancel it"), ("assistant", None),
        ("tool", json.dumps({"order_id": "ord_1", "status": "cancelled"})),
        ("assistant", "Done.")]
