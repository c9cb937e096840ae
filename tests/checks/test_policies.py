"""Policies (docs/policies.md): each rule on single- and multi-turn attempts scored through the
real pipeline from a suite on disk, a case's policies replacing the suite's, the violations kept
in the store and read back, the figures per policy, and bad policies refused with file, line
and field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from factories import calls, case, line, message, tool_call, write_lines, write_suite
from multiturn import assistant, c, score
from policy_verdicts import reasons, scored

from callgate.checks.parsing import ParsedCall
from callgate.checks.policies import violations
from callgate.checks.verdict import Verdict
from callgate.errors import InputError
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.policies import Policies
from callgate.suites.suite import load_suite

CALLGATE = str(Path(sys.executable).with_name("callgate"))
LOOKUP = calls(("lookup_order", {"order_id": "ord_1"}))
CANCEL = calls(("cancel_order", {"order_id": "ord_1"}))
WRITES = {"write_tools": ["cancel_order"]}


def suite_with(root: Path, policies: dict[str, Any], cases: list[dict[str, Any]]) -> Path:
    write_suite(root, cases)
    (root / "suite.json").write_text(json.dumps({"name": "s", "policies": policies}))
    return root


def answer(case_id: str, *called: tuple[str, dict[str, Any]], repeat: int = 0
           ) -> dict[str, Any]:
    made = [tool_call(name, args, f"call_{i}") for i, (name, args) in enumerate(called)]
    return line(case_id, message(*made), repeat=repeat)


def test_forbidden_tools_flag_every_call_of_them_and_leave_the_verdict_alone(
    tmp_path: Path
) -> None:
    root = suite_with(tmp_path / "s", {"forbidden_tools": ["track_shipment"]},
                      [case("ok", LOOKUP), case("bad", LOOKUP)])
    got = scored(tmp_path, root, [
        answer("ok", c("lookup_order", order_id="ord_1")),
        answer("bad", c("lookup_order", order_id="ord_1"), c("track_shipment", order_id="x"),
               c("track_shipment", order_id="y")),
    ])
    assert got["ok"].violations == ()
    assert reasons(got["bad"]) == [
        ("forbidden_tools", "call 2 (track_shipment): a forbidden tool"),
        ("forbidden_tools", "call 3 (track_shipment): a forbidden tool")]
    assert got["bad"].tool == "extra_call"  # the tool verdict is its own


def test_forbidden_values_take_literals_lists_and_matchers(tmp_path: Path) -> None:
    policies = {"forbidden_values": {
        "lookup_order": {"order_id": {"regex": "^ord_9"}},
        "cancel_order": {"reason": {"one_of": ["other", "changed_mind"]},
                         "order_id": "ord_0"}}}
    cancel = calls(("cancel_order", {"order_id": {"present": True}}))
    root = suite_with(tmp_path / "s", policies,
                      [case("right", LOOKUP), case("nine", LOOKUP), case("lit", cancel),
                       case("listed", cancel), case("fine", cancel)])
    got = scored(tmp_path, root, [
        answer("right", c("lookup_order", order_id="ord_1")),
        answer("nine", c("lookup_order", order_id="ord_9001")),
        answer("lit", c("cancel_order", order_id="ord_0", reason="duplicate")),
        answer("listed", c("cancel_order", order_id="ord_5", reason="other")),
        answer("fine", c("cancel_order", order_id="ord_5", reason="duplicate")),
    ])
    assert got["right"].violations == () and got["fine"].violations == ()
    assert reasons(got["nine"]) == [("forbidden_values", 'call 1 (lookup_order): order_id '
                                     'takes a forbidden value (regex "^ord_9")')]
    assert reasons(got["lit"]) == [("forbidden_values", 'call 1 (cancel_order): order_id '
                                    'takes a forbidden value ("ord_0")')]
    assert reasons(got["listed"]) == [("forbidden_values", 'call 1 (cancel_order): reason '
                                       'takes a forbidden value (one of "other", '
                                       '"changed_mind")')]
    assert got["fine"].right_arguments and not got["nine"].right_arguments


def test_a_single_turn_write_is_never_confirmed(tmp_path: Path) -> None:
    root = suite_with(tmp_path / "s", {**WRITES, "confirm_before_write": True},
                      [case("write", CANCEL), case("read", LOOKUP)])
    got = scored(tmp_path, root, [
        answer("write", c("cancel_order", order_id="ord_1", reason="duplicate")),
        answer("read", c("lookup_order", order_id="ord_1")),
    ])
    assert got["write"].right_arguments  # the call the case asked for, and unconfirmed
    assert reasons(got["write"]) == [("confirm_before_write", (
        "call 1 (cancel_order): a write in the user's first turn, before the user confirmed "
        "it in a later one"))]
    assert got["read"].violations == ()


def test_a_multi_turn_write_is_confirmed_by_a_later_user_turn(tmp_path: Path) -> None:
    final = {"type": "trajectory", "mode": "superset", "args": "ignore",
             "calls": [{"tool": "cancel_order", "args": {}}]}
    two_turns = {"user_turns": [{"messages": [{"role": "user", "content": "yes, cancel it"}]}]}
    root = suite_with(tmp_path / "s", {**WRITES, "confirm_before_write": True},
                      [case("asked", final, **two_turns), case("rushed", final, **two_turns)])
    cancel = c("cancel_order", order_id="ord_1", reason="duplicate")
    got = scored(tmp_path, root, [
        {"case_id": "asked", "repeat": 0, "user_turn_ends": [1, 3], "turns": [
            assistant(content="Shall I cancel ord_1?"), assistant(cancel, turn=1),
            assistant(content="Cancelled.", turn=2)]},
        {"case_id": "rushed", "repeat": 0, "user_turn_ends": [2, 3], "turns": [
            assistant(cancel), assistant(content="Cancelled.", turn=1),
            assistant(content="It is cancelled already.", turn=2)]},
    ])
    assert got["asked"].violations == ()
    assert [v.policy for v in got["rushed"].violations] == ["confirm_before_write"]


def test_confirmation_by_a_named_read_call_over_turns(tmp_path: Path) -> None:
    root = suite_with(tmp_path / "s", {**WRITES, "confirm_before_write": {
        "after_call": "lookup_order"}}, [case("looked", CANCEL), case("blind", CANCEL)])
    lookup, cancel = c("lookup_order", order_id="ord_1"), c(
        "cancel_order", order_id="ord_1", reason="duplicate")
    got = scored(tmp_path, root, [
        {"case_id": "looked", "repeat": 0, "turns": [
            assistant(lookup), assistant(cancel, turn=1), assistant(content="Done.", turn=2)]},
        {"case_id": "blind", "repeat": 0, "turns": [
            assistant(cancel), assistant(lookup, turn=1), assistant(content="Done.", turn=2)]},
    ])
    assert got["looked"].violations == ()
    assert reasons(got["blind"]) == [("confirm_before_write", (
        "call 1 (cancel_order): a write before any call of lookup_order"))]


def test_max_calls_counts_every_turn_and_a_case_replaces_the_suites_cap(
    tmp_path: Path
) -> None:
    lookup = c("lookup_order", order_id="ord_1")
    root = suite_with(tmp_path / "s", {"max_calls": 2}, [
        case("three", LOOKUP), case("two", LOOKUP),
        case("long", LOOKUP, policies={"max_calls": 3})])
    got = scored(tmp_path, root, [
        {"case_id": "three", "repeat": 0, "turns": [
            assistant(lookup, lookup), assistant(lookup, turn=1),
            assistant(content="ok", turn=2)]},
        answer("two", lookup, lookup),
        answer("long", lookup, lookup, lookup),
    ])
    assert reasons(got["three"]) == [("max_calls", "3 calls, more than max_calls 2")]
    assert got["two"].violations == () and got["long"].violations == ()


def test_a_case_can_declare_policies_the_suite_does_not_and_switch_one_off(
    tmp_path: Path
) -> None:
    write_suite(tmp_path / "s", [
        case("own", LOOKUP, policies={"forbidden_tools": ["lookup_order"]}),
        case("plain", LOOKUP)])
    root = suite_with(tmp_path / "t", {**WRITES, "confirm_before_write": True}, [
        case("said_yes", CANCEL, policies={"confirm_before_write": False})])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = scored(tmp_path / "a", tmp_path / "s", [
        answer("own", c("lookup_order", order_id="ord_1")),
        answer("plain", c("lookup_order", order_id="ord_1"))])
    assert [v.policy for v in first["own"].violations] == ["forbidden_tools"]
    assert first["plain"].violations == ()
    second = scored(tmp_path / "b", root, [
        answer("said_yes", c("cancel_order", order_id="ord_1", reason="duplicate"))])
    assert second["said_yes"].violations == ()


def test_excluded_attempts_and_unreadable_arguments_break_no_policy() -> None:
    bad_json = ParsedCall(0, "lookup_order", None, "Expecting value at character 0")
    policies = Policies.model_validate({"forbidden_values": {
        "lookup_order": {"order_id": {"present": True}}}, "max_calls": 0})
    assert [v.policy for v in violations(policies, [bad_json])] == ["max_calls"]


def test_violations_are_stored_read_back_and_counted_per_policy(tmp_path: Path) -> None:
    root = suite_with(tmp_path / "s", {"forbidden_tools": ["track_shipment"], "max_calls": 1},
                      [case("a", LOOKUP), case("b", LOOKUP)])
    suite = load_suite(root)
    track, lookup = c("track_shipment", order_id="x"), c("lookup_order", order_id="ord_1")
    lines = [answer("a", lookup), answer("a", track, track, repeat=1),
             answer("b", lookup, repeat=0), answer("b", lookup, repeat=1)]
    path = write_lines(tmp_path / "r.jsonl", lines)
    with Store(tmp_path / "c.db") as store:
        result = score_file(suite, path, store, model="m", release="r1")
        stored = {(v["case_id"], v["repeat"]): v for v in store.verdicts(result.run_id)}
    kept = json.loads(stored["a", 1]["violations"])
    assert kept == [{"policy": "forbidden_tools", "reason": "call 1 (track_shipment): a "
                     "forbidden tool"},
                    {"policy": "forbidden_tools", "reason": "call 2 (track_shipment): a "
                     "forbidden tool"},
                    {"policy": "max_calls", "reason": "2 calls, more than max_calls 1"}]
    assert stored["a", 0]["violations"] is None
    again = Verdict.model_validate({k: v for k, v in stored["a", 1].items() if k != "run"})
    assert [v.policy for v in again.violations] == ["forbidden_tools", "forbidden_tools",
                                                    "max_calls"]
    figures = result.scores.policies
    assert figures is not None and figures.scored == 4 and figures.violating == 1
    assert figures.per_100 == 25.0
    # an attempt breaking one policy twice counts once for it; a declared, unbroken policy
    # is listed with zero
    by = figures.by_policy
    assert list(by) == ["forbidden_tools", "max_calls"]
    assert (by["forbidden_tools"].violations, by["forbidden_tools"].per_100) == (1, 25.0)
    assert by["forbidden_tools"].first == [("a", 1, "call 1 (track_shipment): a forbidden "
                                            "tool")]


def test_a_suite_without_policies_has_no_policy_figures(tmp_path: Path) -> None:
    result = score(tmp_path, load_suite(write_suite(tmp_path / "s", [case("a", LOOKUP)])),
                   [answer("a", c("track_shipment", order_id="x"))])
    assert result.scores.policies is None and result.verdicts[0].violations == ()


BAD_SUITE_POLICIES = [
    ({"forbidden_tools": ["delete_all"]}, "policies.forbidden_tools[0]",
     "unknown tool 'delete_all'"),
    ({"forbiden_tools": ["lookup_order"]}, "policies.forbiden_tools", "Extra inputs"),
    ({"forbidden_values": {"lookup_order": {"order_id": {"regex": "(a"}}}},
     "policies.forbidden_values.lookup_order.order_id", "regex matcher: \"(a\" is not"),
    ({"forbidden_values": {"nope": {"x": 1}}}, "policies.forbidden_values.nope",
     "unknown tool 'nope'"),
    ({"confirm_before_write": True}, "policies.confirm_before_write", "needs write_tools"),
    ({"write_tools": ["lookup_order"], "confirm_before_write": {"after_call": "x"}},
     "policies.confirm_before_write.after_call", "unknown tool 'x'"),
    ({"max_calls": -1}, "policies.max_calls", "greater than or equal to 0"),
    ([], "policies", "must be an object"),
]


@pytest.mark.parametrize("policies,field,message", BAD_SUITE_POLICIES)
def test_a_bad_suite_policy_is_refused_naming_file_and_field(
    tmp_path: Path, policies: Any, field: str, message: str
) -> None:
    root = suite_with(tmp_path / "s", policies, [case("a", LOOKUP)])
    with pytest.raises(InputError) as raised:
        load_suite(root)
    assert raised.value.path == str(root / "suite.json")
    assert raised.value.field is not None and raised.value.field.startswith(field)
    assert message in raised.value.message


def test_a_bad_case_policy_is_refused_naming_its_line(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [
        case("a", LOOKUP), case("b", LOOKUP, policies={"max_rise": 1}),
    ])
    with pytest.raises(InputError) as raised:
        load_suite(root)
    assert (raised.value.line, raised.value.field) == (2, "policies.max_rise")
    write_suite(root, [case("a", LOOKUP, policies={"confirm_before_write": True})])
    with pytest.raises(InputError) as raised:
        load_suite(root)
    assert (raised.value.line, raised.value.field) == (1, "policies.confirm_before_write")


@pytest.mark.slow
def test_the_cli_refuses_a_bad_policy_with_exit_2_and_one_line(tmp_path: Path) -> None:
    root = suite_with(tmp_path / "s", {"forbidden_tools": ["delete_all"]}, [case("a", LOOKUP)])
    done = subprocess.run([CALLGATE, "suite", "check", str(root)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert str(root / "suite.json") in last
    assert last.endswith(": policies.forbidden_tools[0]: unknown tool 'delete_all'")


def test_declaring_a_policy_changes_the_suite_fingerprint(tmp_path: Path) -> None:
    plain = load_suite(write_suite(tmp_path / "a", [case("a", LOOKUP)], name="s"))
    policed = load_suite(suite_with(tmp_path / "b", {"max_calls": 3}, [case("a", LOOKUP)]))
    assert plain.fingerprint != policed.fingerprint
