"""Fault plans in live runs against the loopback model (tests/fault_model.py): what the model
is sent after a fault, the `faults` a turns line records, the recovery figure per fault kind
recovering the probability the model retries with, and recorded answers read under a plan only
where their recorded tool results allow it (docs/faults.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fault_model import FOUND, GIVE_UP, RetryingModel
from live_runs import config, rows, run, settings
from loopback import Loopback
from multiturn import STATE, env_suite, mt_case, score, turns

from callgate.errors import CallgateError
from callgate.suites.fault_runs import with_fault_plan
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite, load_suite

TRAJECTORY = {"type": "trajectory", "mode": "superset", "calls": [{"tool": "lookup_order"}]}
AFTER = {"retries": 2, "no_success_claim": True}


def fault_case(case_id: str, kind: str = "timeout", **extra: Any) -> dict[str, Any]:
    return mt_case(case_id, TRAJECTORY, state=STATE, after_fault=AFTER,
                   faults=[{"tool": "lookup_order", "kind": kind, "calls": [1]}], **extra)


def final(line: dict[str, Any]) -> str | None:
    message = parse_response(line).message
    return message.content if message is not None else None


def served(tmp_path: Path, cases: list[dict[str, Any]]) -> Suite:
    return load_suite(env_suite(tmp_path / "shop", cases))


def test_a_fault_reaches_the_model_and_the_line_records_it(tmp_path: Path) -> None:
    server = Loopback(default=RetryingModel(1.0)).start()
    try:
        live = run(tmp_path, served(tmp_path, [fault_case("a", "rate_limit")]), server)
        sent = [s.body["messages"] for s in server.requests]
    finally:
        server.stop()
    assert [len(m) for m in sent] == [1, 3, 5]
    fault = json.loads(sent[1][-1]["content"])["error"]
    assert fault["type"] == "rate_limit" and fault["retry_after"] == 2.0
    assert json.loads(sent[2][-1]["content"]) == {"order_id": "ord_1", "status": "pending"}
    (line,) = [json.loads(r["body"]) for r in rows(tmp_path, "SELECT body FROM responses")]
    assert line["faults"] == [{"tool": "lookup_order", "call": 0, "kind": "rate_limit"}]
    assert final(line) == FOUND
    recovery = live.result.scores.recovery
    assert recovery is not None and recovery["rate_limit"].pct == 100.0
    assert live.result.scores.recovery["rate_limit"].n == 1  # type: ignore[index]


def test_recovery_per_kind_recovers_the_models_retry_probability(tmp_path: Path) -> None:
    cases = [fault_case(f"k{i}", "server_error" if i % 2 else "empty") for i in range(24)]
    suite = served(tmp_path, cases)
    model = RetryingModel(0.6, seed=11)
    server = Loopback(default=model).start()
    try:
        live = run(tmp_path, suite, server, settings(repeats=3, concurrency=8))
    finally:
        server.stop()
    recovery = live.result.scores.recovery
    assert recovery is not None and set(recovery) == {"server_error", "empty"}
    assert sum(share.n for share in recovery.values()) == 72
    assert sum(share.successes for share in recovery.values()) == model.retried
    for share in recovery.values():
        assert share.low is not None and share.high is not None
        assert share.low <= 60.0 <= share.high, share


def test_a_clean_recording_is_refused_under_a_plan_that_would_change_its_turns(
        tmp_path: Path) -> None:
    suite = served(tmp_path, [mt_case("a", TRAJECTORY, state=STATE)])
    plan = tmp_path / "faults.json"
    plan.write_text(json.dumps({"faults": [{"tool": "lookup_order", "kind": "timeout",
                                            "calls": [1]}], "after_fault": AFTER}))
    planned = with_fault_plan(suite, plan)
    clean = turns("a", [("lookup_order", {"order_id": "ord_1"})], FOUND)
    assert score(tmp_path, suite, [clean]).verdicts[0].status == "scored"  # no plan: read
    with pytest.raises(CallgateError, match=(
            r"case 'a' repeat 0: the fault plan replaces the result of call 1 of lookup_order "
            r"\(timeout\), but the recorded answer goes on for 1 turn\(s\) after it")):
        score(tmp_path, planned, [clean], release="r2")
    # the refused run left nothing behind
    assert [r["release"] for r in rows(tmp_path, "SELECT release FROM runs")] == ["r1"]
    # a call of the last turn got no result: a fault on it changes nothing recorded
    cut = {**turns("a", [("lookup_order", {"order_id": "ord_1"})]), "finish_reason": "length"}
    assert score(tmp_path, planned, [cut], release="r3").verdicts[0].status == "truncated"
    # recorded with the fault it saw: read under the plan, recovery counted
    seen = {**turns("a", [("lookup_order", {"order_id": "ord_1"})],
                    [("lookup_order", {"order_id": "ord_1"})], FOUND),
            "faults": [{"tool": "lookup_order", "call": 0, "kind": "timeout"}]}
    replayed = score(tmp_path, planned, [seen], release="r4")
    assert replayed.scores.recovery["timeout"].pct == 100.0  # type: ignore[index]
    with pytest.raises(CallgateError, match=r"saw a timeout on call 1 of lookup_order, which "
                                            r"the fault plan does not make"):
        score(tmp_path, suite, [seen], release="r5")


def test_a_live_faulted_run_scores_again_the_same_from_its_own_lines(tmp_path: Path) -> None:
    suite = served(tmp_path, [fault_case(f"c{i}") for i in range(4)])
    server = Loopback(default=RetryingModel(0.5, seed=3)).start()
    try:
        live = run(tmp_path, suite, server, settings(repeats=2))
    finally:
        server.stop()
    lines = [json.loads(r["body"]) for r in rows(tmp_path, "SELECT body FROM responses")]
    answered = [{key: line[key] for key in ("case_id", "repeat", "turns", "faults")}
                for line in lines]
    again = score(tmp_path, suite, answered, release="again")
    assert again.scores.recovery == live.result.scores.recovery
    gave_up = [line for line in lines if final(line) == GIVE_UP]
    assert 0 < len(gave_up) < len(lines)


@pytest.mark.slow
def test_the_cli_takes_a_plan_and_refuses_what_it_cannot_read(
        tmp_path: Path, callgate_exe: str, cli_env: dict[str, str], loopback: Loopback) -> None:
    suite = env_suite(tmp_path / "shop", [mt_case("a", TRAJECTORY, state=STATE)])
    responses = tmp_path / "answers.jsonl"
    responses.write_text(json.dumps(turns("a", [("lookup_order", {"order_id": "ord_1"})],
                                          FOUND)) + "\n")
    plan = tmp_path / "faults.json"
    plan.write_text(json.dumps({"seed": 1, "faults": [
        {"tool": "lookup_order", "kind": "timeout", "calls": [1]}]}))
    common = ["--model", "m", "--db", str(tmp_path / "callgate.db")]

    def callgate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([callgate_exe, *args], env=cli_env, capture_output=True,
                              text=True, timeout=180)

    refused = callgate("score", str(suite), "-r", str(responses), "--release", "r1", *common,
                       "--faults", str(plan))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "error: case 'a' repeat 0: the fault plan replaces the result of call 1 of "
        "lookup_order (timeout), but the recorded answer goes on for 1 turn(s) after it, "
        "answered to the tool's real result; record it again under the plan (callgate run "
        "--faults), or score it without the plan"]
    plan.write_text('{\n "faults": [\n  {"tool": "lookup_order", "kind": "slow"}\n ]\n}')
    bad = callgate("run", str(suite), "--release", "r2", "--config",
                   str(config(tmp_path, loopback)), "--faults", str(plan))
    assert bad.returncode == 2
    assert bad.stderr.startswith(f"error: {plan}:3: faults[0].kind: ")
    plan.write_text(json.dumps({"faults": [
        {"tool": "lookup_order", "kind": "server_error", "calls": [1]}],
        "after_fault": {"retries": 1}}))
    loopback.default = RetryingModel(1.0)
    ran = callgate("run", str(suite), "--release", "r3", "--model", "router", "--config",
                   str(config(tmp_path, loopback)), "--faults", str(plan), "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["scores"]["recovery"]["server_error"]["pct"] == 100.0
