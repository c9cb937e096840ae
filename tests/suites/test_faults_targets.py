"""Faults through an agent target's own tools (docs/faults.md, "Agent targets"): each kind of
target (Python, command, HTTP) gets the faults of its attempt in `metadata.faults`, its tools
answer them (tests/fault_agents.py), the recorded line keeps the faults its calls met and the
recovery figure counts them; a target that ignores them is a target_error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from multiturn import plain_suite
from paths import TESTS
from target_runs import run, target_of

from callgate.running.targets.contract import applied_faults, scheduled_faults
from callgate.store.db import Store
from callgate.suites.faults import FAULT_KINDS
from callgate.suites.suite import Suite, load_suite

AGENT = TESTS / "fault_agents.py"
AFTER = {"retries": 1, "tells_user": True}


def case(case_id: str, kind: str, text: str = "Where is ord_1?") -> dict[str, Any]:
    return {"id": case_id, "messages": [{"role": "user", "content": f"[{case_id}] {text}"}],
            "tools": ["lookup_order"], "expect": {"type": "calls", "calls": [
                {"tool": "lookup_order", "args": {"order_id": "ord_1"}}]},
            "faults": [{"tool": "lookup_order", "kind": kind, "calls": [1]}],
            "after_fault": AFTER}


def suite_of(tmp_path: Path, cases: list[dict[str, Any]]) -> Suite:
    return load_suite(plain_suite(tmp_path / "suite", cases))


def test_the_schedule_a_target_gets_and_what_its_transcript_met(tmp_path: Path) -> None:
    suite = suite_of(tmp_path, [case("a", "rate_limit"), case("t", "truncated")])
    (entry,) = scheduled_faults(suite, suite.cases["a"], 0)
    assert entry == {"tool": "lookup_order", "call": 0, "kind": "rate_limit", "result": {
        "error": {"type": "rate_limit", "status": 429, "retry_after": 2.0,
                  "message": "lookup_order: rate limit exceeded; retry after 2 s"}}}
    (cut,) = scheduled_faults(suite, suite.cases["t"], 0)
    assert cut == {"tool": "lookup_order", "call": 0, "kind": "truncated", "keep": 0.5}
    calls = [{"role": "assistant", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}]}]
    met = [*calls, {"role": "tool", "tool_call_id": "x", "content": json.dumps(entry["result"])}]
    assert applied_faults(met, [entry]) == [{"tool": "lookup_order", "call": 0,
                                             "kind": "rate_limit"}]
    assert applied_faults(calls, [entry]) == applied_faults(met, [entry])  # taken at its word
    assert applied_faults([], [entry]) == []  # the call never came
    ignored = [*calls, {"role": "tool", "tool_call_id": "x", "content": '{"status": "ok"}'}]
    with pytest.raises(ValueError, match=r"the tool message of call 1 of lookup_order is not "
                                         r"the rate_limit metadata.faults\[0\] gives it"):
        applied_faults(ignored, [entry])


@pytest.mark.parametrize("kind", ["python", pytest.param("cmd", marks=pytest.mark.slow),
                                  pytest.param("http", marks=pytest.mark.slow)])
def test_each_target_kind_answers_every_fault_kind(kind: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TESTS))
    cases = [case(fault, fault) for fault in FAULT_KINDS]
    cases.append(case("deaf", "server_error", "[deaf] Where is ord_1?"))
    with target_of(kind, agent=AGENT) as spec:
        live = run(tmp_path, suite_of(tmp_path, cases), spec)
    verdicts = {v.case_id: v for v in live.result.verdicts}
    assert verdicts["deaf"].status == "target_error"
    assert "is not the server_error metadata.faults[0]" in verdicts["deaf"].tool_reason
    assert all(verdicts[fault].status == "scored" for fault in FAULT_KINDS)
    recovery = live.result.scores.recovery
    assert recovery is not None and sorted(recovery) == sorted(FAULT_KINDS)
    assert all(share.pct == 100.0 and share.n == 1 for share in recovery.values())


def test_a_target_conversation_counts_its_calls_over_the_user_turns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TESTS))
    talk = {**case("talk", "timeout"), "user_turns": [
        {"messages": [{"role": "user", "content": "[talk] And once more?"}]}]}
    talk["faults"] = [{"tool": "lookup_order", "kind": "timeout", "calls": [2]}]
    live = run(tmp_path, suite_of(tmp_path, [talk]), "python:fault_agents:answer")
    (verdict,) = live.result.verdicts
    assert verdict.status == "scored", verdict
    with Store(tmp_path / "callgate.db") as store:
        (line,) = [json.loads(r["body"]) for r in store.db.query("SELECT body FROM responses")]
        requests = sorted((json.loads(r["request"])["body"]["metadata"]
                           for r in store.db.query("SELECT request FROM live_responses")),
                          key=lambda metadata: metadata["user_turn"])
    # the second user turn's request counts from the call it has not made yet
    assert [m.get("faults", []) for m in requests][1][0]["call"] == 0
    assert [len(m.get("faults", [])) for m in requests] == [1, 1]
    assert line["faults"] == [{"tool": "lookup_order", "call": 1, "kind": "timeout"}]
    recovery = live.result.scores.recovery
    assert recovery is not None and recovery["timeout"].pct == 100.0
