"""Environments and final-state expectations through the real pipeline: equal final states
reached through different call orders, tool errors as tool answers, environment errors excluded
and counted (never the model's fault), load-time checks, and the bundled order_store example."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from multiturn import STATE, c, env_suite, mt_case, score, turns, verdicts

from callgate.checks.parsing import ParsedCall
from callgate.checks.replay import answer_call
from callgate.cli.demo import MULTI_TURN_EXAMPLE, example_path
from callgate.errors import InputError
from callgate.gating.finding import stored_release
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.environment import (
    EnvironmentError_,
    ToolError,
    call_tool,
    fresh,
    state_difference,
    state_hash,
)
from callgate.suites.suite import load_suite

CANCEL_BOTH = {"type": "final_state", "calls": [
    {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}},
    {"tool": "cancel_order", "args": {"order_id": "ord_2", "reason": "other"}},
]}


def cancel(order_id: str, reason: str) -> tuple[str, dict[str, Any]]:
    return c("cancel_order", order_id=order_id, reason=reason)


def test_equal_final_states_through_different_call_orders(tmp_path: Path) -> None:
    names = ("in-order", "reversed", "detour", "wrong-reason", "extra", "nothing", "shipped")
    cases = [mt_case(name, CANCEL_BOTH, state=STATE) for name in names]
    root = env_suite(tmp_path / "shop", cases)
    got = verdicts(tmp_path, root, [
        turns("in-order", [cancel("ord_1", "duplicate")], [cancel("ord_2", "other")], "Done."),
        turns("reversed", [cancel("ord_2", "other"), cancel("ord_1", "duplicate")], "Done."),
        turns("detour", [c("lookup_order", order_id="ord_2")], [cancel("ord_2", "other")],
              [c("lookup_order", order_id="ord_9")], [cancel("ord_1", "duplicate")], "Done."),
        turns("wrong-reason", [cancel("ord_1", "duplicate"), cancel("ord_2", "duplicate")],
              "Done."),
        turns("extra", [cancel("ord_1", "duplicate"), cancel("ord_2", "other")],
              [c("cancel_order", order_id="ord_1", reason="other")], "Done."),  # a tool error
        turns("nothing", "Which orders?"),
        turns("shipped", [cancel("ord_1", "duplicate"), cancel("ord_3", "other")], "Done."),
    ])
    reference = json.loads(json.dumps(STATE))
    reference["orders"]["ord_1"].update(status="cancelled", reason="duplicate")
    reference["orders"]["ord_2"].update(status="cancelled", reason="other")
    for name in ("in-order", "reversed", "detour", "extra"):
        verdict = got[name]
        assert verdict.right_tool and verdict.right_arguments, verdict
        assert verdict.state_hash == state_hash(reference)
        assert verdict.arguments_reason == f"final state {state_hash(reference)[:12]}, " \
                                           "as the reference's"
    assert got["detour"].calls == 4
    wrong = got["wrong-reason"]
    assert wrong.right_tool and wrong.arguments == "wrong_value"
    assert wrong.arguments_reason.endswith(
        "orders.ord_2.reason: expected \"other\", got \"duplicate\"")
    assert f"is not the reference's {state_hash(reference)[:12]}" in wrong.arguments_reason
    assert got["nothing"].tool == "missing_call"
    # Cancelling the shipped ord_3 is a tool error: the model's calls, judged by where they end.
    shipped = got["shipped"]
    assert shipped.right_tool and shipped.arguments == "wrong_value"
    assert "orders.ord_2.reason: missing" in shipped.arguments_reason


def test_state_changing_calls_decide_the_tool_verdict(tmp_path: Path) -> None:
    one = {"type": "final_state", "calls": [
        {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]}
    cases = [mt_case(name, one, state=STATE) for name in ("two-cancels", "lookup-only")]
    got = verdicts(tmp_path, env_suite(tmp_path / "shop", cases), [
        turns("two-cancels", [cancel("ord_1", "duplicate"), cancel("ord_2", "duplicate")], "ok"),
        turns("lookup-only", [c("lookup_order", order_id="ord_1")], "It is pending."),
    ])
    assert got["two-cancels"].tool == "extra_call"
    assert got["two-cancels"].tool_reason.startswith(
        "2 call(s) to cancel_order where the reference makes 1; final state ")
    assert got["lookup-only"].tool == "missing_call"
    assert "orders.ord_1.reason: missing" in got["lookup-only"].tool_reason


def test_environment_errors_are_excluded_and_counted(tmp_path: Path) -> None:
    track = {"type": "trajectory", "calls": [{"tool": "track_shipment"}]}
    cases = [
        mt_case("carrier-down", track, state=STATE),
        mt_case("fine", track, state=STATE),
        mt_case("broken-state", track, state={**STATE, "broken": True}),
    ]
    result = score(tmp_path, load_suite(env_suite(tmp_path / "shop", cases)), [
        turns("carrier-down", [c("track_shipment", order_id="ord_666")], "It is lost."),
        turns("fine", [c("track_shipment", order_id="ord_1")], "At the depot."),
        turns("broken-state", [c("track_shipment", order_id="ord_1")], "At the depot."),
    ])
    got = {v.case_id: v for v in result.verdicts}
    down = got["carrier-down"]
    assert down.status == "environment_error" and down.tool is None
    assert "the carrier database is down" in down.reason and "not the model's" in down.reason
    assert got["broken-state"].status == "environment_error"
    assert "state() is broken" in got["broken-state"].reason
    assert got["fine"].right_arguments
    scores = result.scores
    assert scores.excluded["environment_error"] == 2 and scores.figures.scored == 1
    assert scores.figures.right_tool.pct == 100.0  # not counted against the model
    with Store(tmp_path / "callgate.db") as store:
        release = stored_release(store, store.stored_run(result.run_id))
        rows = list(store.db.query("SELECT status FROM verdicts ORDER BY case_id"))
    assert release.excluded_share == pytest.approx(2 / 3)
    assert [r["status"] for r in rows] == ["environment_error", "environment_error", "scored"]


def test_tool_errors_are_answers_and_other_failures_are_the_environment(tmp_path: Path) -> None:
    root = env_suite(tmp_path / "shop", [mt_case("a", {"type": "no_call"}, state=STATE)])
    suite = load_suite(root)
    assert suite.environment is not None
    env = fresh(suite.environment, STATE)
    assert call_tool(env, "lookup_order", {"order_id": "ord_9"}) == {"error": "no order ord_9"}
    assert call_tool(env, "cancel_order", {"order_id": "ord_3", "reason": "x"}) == {
        "error": "ord_3 is shipped"}
    # Arguments the tool does not take are the call's fault, as with a real API.
    assert call_tool(env, "lookup_order", {"id": "ord_1"}) == {
        "error": "lookup_order: missing a required argument: 'order_id'"}
    assert "unexpected keyword argument 'id'" in call_tool(
        env, "lookup_order", {"order_id": "ord_1", "id": 1})["error"]
    assert call_tool(env, "state", {}) == {"error": "unknown tool state"}
    assert call_tool(env, "_order", {"order_id": "ord_1"}) == {"error": "unknown tool _order"}
    with pytest.raises(EnvironmentError_, match="carrier database"):
        call_tool(env, "track_shipment", {"order_id": "ord_666"})
    offered = {"lookup_order"}
    schemas = suite.parameter_schemas
    broken = ParsedCall(0, "lookup_order", None, "Expecting value")
    assert answer_call(env, broken, offered, schemas, suite.validators) == {
        "error": "arguments are not valid JSON: Expecting value"}
    not_offered = ParsedCall(0, "cancel_order", {"order_id": "ord_1", "reason": "x"}, None)
    assert answer_call(env, not_offered, offered, schemas, suite.validators) == {
        "error": "unknown tool cancel_order"}
    assert STATE["orders"]["ord_1"]["status"] == "pending"  # the case's state is never touched
    assert issubclass(ToolError, Exception) and not issubclass(ToolError, EnvironmentError_)


def test_state_difference_and_hash() -> None:
    a = {"orders": {"ord_1": {"status": "pending", "address": {"city": "Zürich"}}}}
    b = json.loads(json.dumps(a))
    b["orders"]["ord_1"]["address"]["city"] = "Bern"
    assert state_difference(a, a) is None
    assert state_difference(a, b) == 'orders.ord_1.address.city: expected "Zürich", got "Bern"'
    assert state_difference({"x": [1, 2]}, {"x": [1]}) == "x: expected [1, 2], got [1]"
    assert state_difference({"x": True}, {"x": 1}) == "x: expected true, got 1"
    assert state_hash({"a": 1, "b": 2}) == state_hash({"b": 2, "a": 1}) != state_hash({"a": 2})


def test_environment_suites_are_checked_when_loaded(tmp_path: Path) -> None:
    def load_error(cases: list[dict[str, Any]], **files: str) -> InputError:
        root = env_suite(tmp_path / f"s{len(list(tmp_path.iterdir()))}", cases)
        for name, text in files.items():
            (root / name).write_text(text)
        with pytest.raises(InputError) as caught:
            load_suite(root)
        return caught.value

    fine = mt_case("fine", CANCEL_BOTH, state=STATE)
    scripted = mt_case("scripted", {"type": "no_call"}, tool_results=[
        {"tool": "lookup_order", "args": {"order_id": "ord_1"}, "result": {"status": "pending"}}])
    both = load_error([fine, scripted])
    assert (both.line, both.field) == (2, "tool_results")
    replay_fails = mt_case("carrier", {"type": "final_state", "calls": [
        {"tool": "track_shipment", "args": {"order_id": "ord_666"}}]}, state=STATE)
    failed = load_error([fine, replay_fails])
    assert (failed.line, failed.field) == (2, "expect.calls")
    assert "carrier database is down" in failed.message
    no_state = load_error([mt_case("x", CANCEL_BOTH)])
    assert (no_state.line, no_state.field) == (1, "state")
    bad_args = load_error([mt_case("x", {"type": "final_state", "calls": [
        {"tool": "cancel_order", "args": {"order_id": "ord_1"}}]}, state=STATE)])
    assert bad_args.field == "expect.calls[0].args" and "'reason'" in bad_args.message
    unknown = load_error([mt_case("x", {"type": "final_state", "calls": [
        {"tool": "refund", "args": {}}]}, state=STATE)])
    assert unknown.field == "expect.calls[0].tool"
    no_class = load_error([fine], **{"suite.json": json.dumps({"environment": "env:Nope"})})
    assert no_class.field == "environment" and no_class.path.endswith("suite.json")
    bad_module = load_error([fine], **{"env.py": "raise ImportError('no such thing')"})
    assert "cannot import env" in bad_module.message
    not_spec = load_error([fine], **{"suite.json": json.dumps({"environment": "env.Shop"})})
    assert "module:Class" in not_spec.message


def test_each_suite_gets_its_own_environment_module(tmp_path: Path) -> None:
    first = load_suite(env_suite(tmp_path / "a", [mt_case("x", {"type": "no_call"})]))
    other_env = "class Shop:\n    def __init__(self, state):\n        pass\n" \
                "    def state(self):\n        return {'other': True}\n"
    second = load_suite(env_suite(tmp_path / "b", [mt_case("x", {"type": "no_call"})], other_env))
    assert first.environment is not second.environment
    assert fresh(second.environment, {}).state() == {"other": True}  # type: ignore[arg-type]
    assert fresh(first.environment, STATE).state() == STATE  # type: ignore[arg-type]
    assert first.fingerprint != second.fingerprint  # the environment's code is fingerprinted
    assert "env" not in sys.modules or getattr(sys.modules["env"], "__file__", "") != str(
        tmp_path / "a" / "env.py")


# --------------------------------------------------------------------------- the example


def _readme_outcomes(readme: str) -> dict[tuple[str, str, int], str]:
    """(case, release, repeat) -> the README's cell, from its table of intended verdicts."""
    header = next(line for line in readme.splitlines() if line.startswith("| case |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")][2:]
    found = {}
    for line in readme.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != len(columns) + 2 or not re.match(r"^[a-z]", cells[0]) or \
                cells[0] == "case":
            continue
        for column, cell in zip(columns, cells[2:], strict=True):
            release, repeat = column.split(" #")
            found[(cells[0], release, int(repeat))] = cell.replace("*", "")
    return found


def test_the_order_store_example_scores_as_its_readme_says(tmp_path: Path) -> None:
    root = example_path(MULTI_TURN_EXAMPLE)
    suite = load_suite(root)
    assert suite.environment_spec == "env:OrderStore" and len(suite.cases) >= 10
    expected = _readme_outcomes((root / "README.md").read_text(encoding="utf-8"))
    assert len(expected) == 4 * len(suite.cases)
    releases = {"2026.10": (24, 25), "2026.11": (13, 18)}  # right arguments, right tool of 26
    with Store(tmp_path / "callgate.db") as store:
        for release, (right_arguments, right_tool) in releases.items():
            result = score_file(suite, root / f"responses-{release}.jsonl", store,
                                model="example-agent", release=release)
            assert not result.missing
            for verdict in result.verdicts:
                cell = expected[(verdict.case_id, release, verdict.repeat)]
                assert verdict.status == "scored"
                assert verdict.right_arguments == cell.startswith("pass"), (verdict, cell)
                if "turn_limit" in cell:
                    assert verdict.tool == "turn_limit"
            figures = result.scores.figures
            assert figures.right_arguments.successes == right_arguments
            assert figures.right_tool.successes == right_tool
            assert figures.scored == 26


@pytest.mark.slow
def test_demo_shows_the_multi_turn_example(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("callgate")
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("CALLGATE_DB", None)
    done = subprocess.run([str(exe), "demo", "--db", str(tmp_path / "demo.db")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Several calls and several turns" in out and "order-store: example-agent" in out
    assert "cases that changed" in out
    assert "cancel-too-slow (final_state) 2/2 → 1/2: 2026.11 #1 turn_limit" in out
    assert "address-and-cancel" not in out  # same verdicts in both releases
    assert "excluded: environment error" in out
    assert out.index("The gate") < out.index("Several calls and several turns")


def test_a_schema_invalid_call_is_answered_with_an_error_and_never_run(tmp_path: Path) -> None:
    # The example's OrderStore crashes (unhashable list) if a list id ever reaches it.
    root = example_path(MULTI_TURN_EXAMPLE)
    suite = load_suite(root)
    result = score(tmp_path, suite, [
        turns("cancel-unshipped", [c("lookup_order", order_id=["ord_5102"])], "Sorry."),
    ])
    verdict = result.verdicts[0]
    assert verdict.status == "scored", verdict
    assert (verdict.arguments, verdict.schema_kind) == ("schema_violation", "wrong_type")
    assert "lookup_order.order_id: expected string, got array" in verdict.arguments_reason
    assert result.scores.figures.scored == 1 and not result.scores.excluded.get("environment_error")

    # answer_call checks the schema first: the model gets the error, the tool never runs.
    shop = load_suite(env_suite(tmp_path / "shop", [mt_case("a", {"type": "no_call"},
                                                           state=STATE)]))
    assert shop.environment is not None
    env = fresh(shop.environment, STATE)
    schemas = shop.parameter_schemas
    bad = ParsedCall(0, "cancel_order", {"order_id": "ord_1", "reason": "nope"}, None)
    answer = answer_call(env, bad, set(schemas), schemas, shop.validators)
    assert answer == {"error": "arguments do not match the schema: cancel_order.reason: 'nope' "
                               "is not one of ['changed_mind', 'duplicate', 'other']"}
    assert env.state()["orders"]["ord_1"] == {"status": "pending"}  # never executed
    good = ParsedCall(0, "cancel_order", {"order_id": "ord_1", "reason": "other"}, None)
    assert answer_call(env, good, set(schemas), schemas, shop.validators)["status"] == "cancelled"


def test_schema_problems_win_over_an_environment_failure(tmp_path: Path) -> None:
    cancel_1 = {"type": "final_state", "calls": [
        {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]}
    track = {"type": "trajectory", "mode": "superset", "calls": [{"tool": "track_shipment"}]}
    cases = [mt_case("trajectory", track, state=STATE), mt_case("state", cancel_1, state=STATE),
             mt_case("only-valid", track, state=STATE)]
    crash = c("track_shipment", order_id="ord_666")  # schema-valid; the environment fails
    result = score(tmp_path, load_suite(env_suite(tmp_path / "shop", cases)), [
        turns("trajectory", [c("track_shipment", order_id=7)], [crash], "Lost."),
        turns("state", [cancel("ord_1", "duplicate"), c("lookup_order", id="ord_1")], [crash],
              "Done."),
        turns("only-valid", [crash], "Lost."),
    ])
    got = {v.case_id: v for v in result.verdicts}
    assert got["trajectory"].status == "scored" and got["trajectory"].right_tool
    assert (got["trajectory"].arguments, got["trajectory"].schema_kind) == (
        "schema_violation", "wrong_type")
    state = got["state"]
    assert state.status == "scored" and not state.right_arguments
    assert (state.arguments, state.schema_kind) == ("schema_violation", "missing_required")
    assert "the final state is unknown" in state.tool_reason
    assert "carrier database is down" in state.tool_reason
    assert got["only-valid"].status == "environment_error"  # schema-valid: the environment's
    assert result.scores.figures.scored == 2
