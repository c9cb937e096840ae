"""Trajectory expectations through the real pipeline: suites loaded from disk, recorded `turns`
lines scored into a temporary store. Every mode, every argument rule, duplicated calls, parallel
calls split across turns, a pairing greedy matching gets wrong, the turn limit."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from multiturn import c, mt_case, plain_suite, score, turns, verdicts

from callgate.errors import InputError
from callgate.suites.responses import parse_response
from callgate.suites.suite import canonical_json, load_suite


def trajectory(*calls: tuple[str, dict[str, Any], int | None], mode: str = "strict",
               args: str = "key", per_tool: dict[str, str] | None = None) -> dict[str, Any]:
    listed = []
    for name, arguments, step in calls:
        item: dict[str, Any] = {"tool": name, "args": arguments}
        if step is not None:
            item["step"] = step
        listed.append(item)
    out: dict[str, Any] = {"type": "trajectory", "mode": mode, "args": args, "calls": listed}
    if per_tool:
        out["per_tool"] = per_tool
    return out


LOOKUP_1 = ("lookup_order", {"order_id": "ord_1"}, 0)
CANCEL_1 = ("cancel_order", {"order_id": "ord_1", "reason": "duplicate"}, 1)


def test_strict_mode_over_turns(tmp_path: Path) -> None:
    cases = [mt_case(name, trajectory(LOOKUP_1, CANCEL_1)) for name in
             ("ok", "reversed", "skipped", "extra", "swapped", "value")]
    lookup, cancel = c("lookup_order", order_id="ord_1"), c(
        "cancel_order", order_id="ord_1", reason="duplicate")
    got = verdicts(tmp_path, plain_suite(tmp_path / "s", cases), [
        turns("ok", [lookup], [cancel], "Cancelled."),
        turns("reversed", [cancel], [lookup], "Done."),
        turns("skipped", [cancel], "Done."),
        turns("extra", [lookup], [c("track_shipment", order_id="ord_1")], [cancel], "Done."),
        turns("swapped", [c("track_shipment", order_id="ord_1")], [cancel], "Done."),
        turns("value", [lookup], [c("cancel_order", order_id="ord_1", reason="other")], "Done."),
    ])
    assert got["ok"].right_arguments and got["ok"].calls == 2
    assert got["reversed"].tool == "wrong_tool"
    assert got["reversed"].tool_reason.startswith("order: cancel_order (step 1, call 1) came "
                                                  "before lookup_order (step 2, call 2)")
    assert got["skipped"].tool == "missing_call"
    assert got["skipped"].tool_reason == "missing call to lookup_order at step 1"
    assert got["extra"].tool == "extra_call" and got["extra"].calls == 3
    assert got["extra"].tool_reason == "unexpected call to track_shipment at step 2, call 2"
    assert got["swapped"].tool == "wrong_tool"
    value = got["value"]
    assert value.right_tool and value.arguments == "wrong_value" and not value.right_arguments
    assert value.arguments_reason == (
        'step 2, call 2 cancel_order: argument reason expected "duplicate", got "other"')


def test_unordered_superset_and_subset(tmp_path: Path) -> None:
    lookup_2 = ("lookup_order", {"order_id": "ord_2"}, 1)
    track_1 = ("track_shipment", {"order_id": "ord_1"}, 1)
    cases = [
        mt_case("unordered", trajectory(LOOKUP_1, lookup_2, mode="unordered")),
        mt_case("unordered-dup", trajectory(LOOKUP_1, lookup_2, mode="unordered")),
        mt_case("superset", trajectory(("cancel_order", {"order_id": "ord_1"}, 0),
                                       mode="superset")),
        mt_case("superset-missing", trajectory(("cancel_order", {"order_id": "ord_1"}, 0),
                                               mode="superset")),
        mt_case("subset", trajectory(LOOKUP_1, track_1, mode="subset")),
        mt_case("subset-extra", trajectory(LOOKUP_1, track_1, mode="subset")),
        mt_case("subset-none", trajectory(LOOKUP_1, track_1, mode="subset")),
    ]
    got = verdicts(tmp_path, plain_suite(tmp_path / "s", cases), [
        turns("unordered", [c("lookup_order", order_id="ord_2")],
              [c("lookup_order", order_id="ord_1")], "Both found."),
        turns("unordered-dup", [c("lookup_order", order_id="ord_1")],
              [c("lookup_order", order_id="ord_1")], "Found."),
        turns("superset", [c("lookup_order", order_id="ord_1")],
              [c("cancel_order", order_id="ord_1", reason="other")], "Cancelled."),
        turns("superset-missing", [c("lookup_order", order_id="ord_1")], "It is pending."),
        turns("subset", [c("lookup_order", order_id="ord_1")], "It is pending."),
        turns("subset-extra", [c("lookup_order", order_id="ord_1")],
              [c("cancel_order", order_id="ord_1", reason="other")], "Cancelled."),
        turns("subset-none", "Which order?"),
    ])
    assert got["unordered"].right_arguments
    dup = got["unordered-dup"]
    assert dup.right_tool and dup.arguments == "wrong_value"
    assert 'argument order_id expected "ord_2", got "ord_1"' in dup.arguments_reason
    assert got["superset"].right_arguments
    assert got["superset-missing"].tool == "missing_call"
    assert got["subset"].right_arguments
    assert got["subset-extra"].tool == "extra_call"
    assert got["subset-none"].tool == "missing_call" and got["subset-none"].calls == 0


def test_argument_rules_exact_key_ignore_and_per_tool(tmp_path: Path) -> None:
    lookup = ("lookup_order", {"order_id": "ord_1"}, 0)
    cancel = ("cancel_order", {"order_id": "ord_1", "reason": "duplicate"}, 1)
    cases = [
        mt_case("exact", trajectory(lookup, args="exact")),
        mt_case("key", trajectory(lookup, args="key")),
        mt_case("ignore", trajectory(lookup, args="ignore")),
        mt_case("per-tool", trajectory(lookup, cancel, args="exact",
                                       per_tool={"lookup_order": "ignore"})),
        mt_case("per-tool-strict", trajectory(lookup, cancel, args="ignore",
                                              per_tool={"cancel_order": "exact"})),
    ]
    with_items = [c("lookup_order", order_id="ord_1", include_items=True)]
    got = verdicts(tmp_path, plain_suite(tmp_path / "s", cases), [
        turns("exact", with_items, "Here."),
        turns("key", with_items, "Here."),
        turns("ignore", [c("lookup_order", order_id="ord_9")], "Here."),
        turns("per-tool", [c("lookup_order", order_id="ord_7")],
              [c("cancel_order", order_id="ord_1", reason="duplicate")], "Done."),
        turns("per-tool-strict", [c("lookup_order", order_id="ord_7")],
              [c("cancel_order", order_id="ord_2", reason="duplicate")], "Done."),
    ])
    assert got["exact"].arguments == "wrong_value"
    assert got["exact"].arguments_reason == (
        "step 1, call 1 lookup_order: unexpected argument include_items=true")
    assert got["key"].right_arguments
    assert got["ignore"].right_arguments
    assert got["per-tool"].right_arguments
    assert got["per-tool-strict"].arguments == "wrong_value"
    assert 'cancel_order: argument order_id expected "ord_1", got "ord_2"' in (
        got["per-tool-strict"].arguments_reason)


def test_duplicated_calls(tmp_path: Path) -> None:
    twice = trajectory(("lookup_order", {"order_id": "ord_1"}, 0),
                       ("lookup_order", {"order_id": "ord_1"}, 1))
    cases = [mt_case(name, twice) for name in ("once", "twice", "thrice")]
    one = [c("lookup_order", order_id="ord_1")]
    got = verdicts(tmp_path, plain_suite(tmp_path / "s", cases), [
        turns("once", one, "Here."),
        turns("twice", one, one, "Here."),
        turns("thrice", one, one, one, "Here."),
    ])
    assert got["once"].tool == "missing_call"
    assert got["once"].tool_reason == "missing call to lookup_order at step 2"
    assert got["twice"].right_arguments
    assert got["thrice"].tool == "extra_call" and got["thrice"].calls == 3


def test_parallel_reference_calls_split_across_turns(tmp_path: Path) -> None:
    parallel = trajectory(("lookup_order", {"order_id": "ord_1"}, 0),
                          ("lookup_order", {"order_id": "ord_2"}, 0),
                          ("cancel_order", {"order_id": "ord_2", "reason": "duplicate"}, 1))
    cases = [mt_case(name, parallel) for name in ("one-message", "split", "too-late")]
    l1, l2 = c("lookup_order", order_id="ord_1"), c("lookup_order", order_id="ord_2")
    cancel = c("cancel_order", order_id="ord_2", reason="duplicate")
    got = verdicts(tmp_path, plain_suite(tmp_path / "s", cases), [
        turns("one-message", [l2, l1], [cancel], "Done."),
        turns("split", [l2], [l1], [cancel], "Done."),  # the parallel pair, one per turn
        turns("too-late", [l2], [cancel], [l1], "Done."),
    ])
    assert got["one-message"].right_arguments
    assert got["split"].right_arguments and got["split"].calls == 3
    assert got["too-late"].tool == "wrong_tool"
    assert got["too-late"].tool_reason.startswith("order: cancel_order (step 2, call 2) came "
                                                  "before lookup_order (step 3, call 3)")


def test_optimal_pairing_where_greedy_first_fit_fails(tmp_path: Path) -> None:
    # The first reference call accepts either order, the second only ord_1. Taking the first
    # call that fits (ord_1) for the first reference leaves ord_2 for the second: no match.
    either = {"order_id": {"one_of": ["ord_1", "ord_2"]}}
    expect = trajectory(("lookup_order", either, 0), ("lookup_order", {"order_id": "ord_1"}, 0),
                        mode="unordered")
    made = [c("lookup_order", order_id="ord_1"), c("lookup_order", order_id="ord_2")]
    accepts = [lambda a: a["order_id"] in ("ord_1", "ord_2"), lambda a: a["order_id"] == "ord_1"]
    free = [args for _, args in made]
    greedy = []
    for fits in accepts:
        found = next((a for a in free if fits(a)), None)
        greedy.append(found)
        if found is not None:
            free.remove(found)
    assert greedy[1] is None  # first-fit leaves the second reference call unmatched

    got = verdicts(tmp_path, plain_suite(tmp_path / "s", [mt_case("pair", expect)]),
                   [turns("pair", made, "Both.")])
    assert got["pair"].right_arguments


def test_optional_key_arguments_and_messages(tmp_path: Path) -> None:
    optional = {"order_id": "ord_1", "include_items": {"one_of": [True], "optional": True}}
    cases = [mt_case(name, trajectory(("lookup_order", optional, 0)))
             for name in ("left-out", "given", "wrong")]
    got = verdicts(tmp_path, plain_suite(tmp_path / "s", cases), [
        turns("left-out", [c("lookup_order", order_id="ord_1")], "Here."),
        turns("given", [c("lookup_order", order_id="ord_1", include_items=True)], "Here."),
        turns("wrong", [c("lookup_order", order_id="ord_1", include_items=False)], "Here."),
    ])
    assert got["left-out"].right_arguments and got["given"].right_arguments
    assert got["wrong"].arguments_reason == (
        "step 1, call 1 lookup_order: argument include_items expected true (or left out), "
        "got false")


def test_json_and_schema_checks_cover_every_turn(tmp_path: Path) -> None:
    expect = trajectory(LOOKUP_1, CANCEL_1)
    cases = [mt_case(name, expect) for name in ("broken", "schema")]
    broken = {"case_id": "broken", "turns": [
        {"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function",
             "function": {"name": "lookup_order", "arguments": '{"order_id": "ord_1"}'}}]},
        {"role": "assistant", "tool_calls": [
            {"id": "b", "type": "function",
             "function": {"name": "cancel_order", "arguments": '{"order_id": "ord_1", "rea'}}]},
        {"role": "assistant", "content": "Done."}]}
    got = verdicts(tmp_path, plain_suite(tmp_path / "s", cases), [
        broken,
        turns("schema", [c("lookup_order", order_id="ord_1")],
              [c("cancel_order", order_id="ord_1", reason="dup")], "Done."),
    ])
    assert got["broken"].arguments == "invalid_json"
    assert got["broken"].arguments_reason.startswith("call 2 (cancel_order): arguments are not")
    assert got["schema"].arguments == "schema_violation"
    assert got["schema"].schema_kind == "bad_enum"


def test_turn_limit(tmp_path: Path) -> None:
    expect = trajectory(LOOKUP_1, CANCEL_1)
    cases = [mt_case(name, expect, max_turns=2) for name in ("limited", "in-time", "recorded")]
    lookup, cancel = c("lookup_order", order_id="ord_1"), c(
        "cancel_order", order_id="ord_1", reason="duplicate")
    limited = turns("limited", [lookup], [cancel], "Done.")  # a third turn is never sent
    marked = turns("recorded", [lookup], [cancel])
    marked["finish_reason"] = "turn_limit"  # as the live loop records it
    result = score(tmp_path, load_suite(plain_suite(tmp_path / "s", cases)), [
        limited, turns("in-time", [lookup, cancel], "Done."), marked])
    got = {v.case_id: v for v in result.verdicts}
    assert got["limited"].tool == "turn_limit" and not got["limited"].right_tool
    assert got["limited"].tool_reason == "still calling tools at turn 2 of max_turns 2"
    assert got["limited"].status == "scored" and got["limited"].calls == 2
    assert got["in-time"].right_arguments
    assert got["recorded"].tool == "turn_limit"
    assert result.scores.figures.scored == 3  # a turn limit is the model's, and scored


def test_calls_are_counted_across_turns_for_every_expectation(tmp_path: Path) -> None:
    cases = [
        mt_case("calls", {"type": "calls", "mode": "superset",
                          "calls": [{"tool": "cancel_order", "args": {"order_id": "ord_1"}}]}),
        mt_case("nothing", {"type": "no_call"}),
    ]
    result = score(tmp_path, load_suite(plain_suite(tmp_path / "s", cases)), [
        turns("calls", [c("lookup_order", order_id="ord_1")],
              [c("cancel_order", order_id="ord_1", reason="other")], "Done."),
        turns("nothing", [c("lookup_order", order_id="ord_1")], "It shipped."),
    ])
    got = {v.case_id: v for v in result.verdicts}
    assert got["calls"].right_arguments and got["calls"].calls == 2
    assert got["nothing"].tool == "unexpected_call"
    assert result.scores.figures.calls_per_task == 1.5


def test_a_single_response_line_is_one_turn(tmp_path: Path) -> None:
    expect = trajectory(("lookup_order", {"order_id": "ord_1"}, 0),
                        ("lookup_order", {"order_id": "ord_2"}, 0))
    root = plain_suite(tmp_path / "s", [mt_case("one", expect)])
    line = turns("one", [c("lookup_order", order_id="ord_2"), c("lookup_order", order_id="ord_1")])
    single = {"case_id": "one", "response": line["turns"][0], "finish_reason": "tool_calls"}
    assert verdicts(tmp_path, root, [single])["one"].right_arguments


def test_turns_lines_sum_usage_and_cost() -> None:
    def completion(message: dict[str, Any], finish: str, cost: float | None) -> dict[str, Any]:
        usage: dict[str, Any] = {"prompt_tokens": 10, "completion_tokens": 3}
        if cost is not None:
            usage["cost"] = cost
        return {"choices": [{"message": message, "finish_reason": finish}], "usage": usage,
                "provider": "P"}

    first = turns("x", [c("lookup_order", order_id="ord_1")])["turns"][0]
    priced = parse_response({"case_id": "x", "turns": [
        completion(first, "tool_calls", 0.001), completion({"content": "Hi."}, "stop", 0.002)]})
    assert priced.turns is not None and len(priced.turns) == 2
    assert priced.message == priced.turns[-1] and priced.message.content == "Hi."
    assert priced.finish_reason == "stop" and priced.provider == "P"
    assert priced.usage is not None and priced.usage.prompt_tokens == 20
    assert priced.usage.completion_tokens == 6
    assert priced.cost == pytest.approx(0.003)
    partly = parse_response({"case_id": "x", "turns": [
        completion(first, "tool_calls", 0.001), completion({"content": "Hi."}, "stop", None)]})
    assert partly.cost is None  # unknown is unknown, not a partial sum
    with pytest.raises(ValueError, match="turns"):
        parse_response({"case_id": "x", "turns": []})


def test_trajectory_suites_are_checked_when_loaded(tmp_path: Path) -> None:
    def load_error(expect: dict[str, Any], **extra: Any) -> InputError:
        root = plain_suite(tmp_path / f"s{len(list(tmp_path.iterdir()))}",
                           [mt_case("fine", {"type": "no_call"}), mt_case("bad", expect, **extra)])
        with pytest.raises(InputError) as caught:
            load_suite(root)
        return caught.value

    unknown = load_error(trajectory(("refund", {}, 0)))
    assert (unknown.line, unknown.field) == (2, "expect.calls[0].tool")
    not_a_param = load_error(trajectory(("lookup_order", {"order": "ord_1"}, 0)))
    assert not_a_param.field == "expect.calls[0].args.order"
    never = load_error(trajectory(("lookup_order", {"order_id": "A1"}, 0)))
    assert "can never pass the schema" in never.message
    per_tool = load_error(trajectory(LOOKUP_1, per_tool={"refund": "ignore"}))
    assert per_tool.field == "expect.per_tool.refund"
    exact = load_error(trajectory(("cancel_order", {"order_id": "ord_1"}, 0), args="exact"))
    assert exact.field == "expect.calls[0].args" and "'reason'" in exact.message
    mode = load_error(trajectory(LOOKUP_1, mode="sideways"))
    assert mode.field == "expect.mode"
    turns_ = load_error(trajectory(LOOKUP_1), max_turns=0)
    assert turns_.field == "max_turns"
    final = load_error({"type": "final_state", "calls": []}, state={})
    assert final.field == "state" and "environment" in final.message
    final = load_error({"type": "final_state", "calls": []})
    assert final.field == "expect" and "environment" in final.message

    steps = load_suite(plain_suite(tmp_path / "steps", [mt_case("s", {
        "type": "trajectory", "calls": [{"tool": "lookup_order"}, {"tool": "track_shipment"},
                                        {"tool": "cancel_order", "step": 1}]})]))
    expect = steps.cases["s"].expect
    assert [call.step for call in expect.calls] == [0, 1, 1]  # type: ignore[union-attr]
    assert expect.args == "key" and expect.mode == "strict"  # type: ignore[union-attr]


def test_plain_suites_keep_their_fingerprint(tmp_path: Path) -> None:
    # A suite without environment or multi-turn fields fingerprints as before.
    root = plain_suite(tmp_path / "s", [mt_case("a", {"type": "no_call"})])
    suite = load_suite(root)
    assert suite.environment is None and not suite.loops(suite.cases["a"])
    raw = {"tools": json.loads((root / "tools.json").read_text()),
           "cases": [json.loads((root / "cases.jsonl").read_text())]}
    assert suite.fingerprint == hashlib.sha256(canonical_json(raw).encode()).hexdigest()
