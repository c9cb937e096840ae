"""Every verdict kind, with the source documents' own examples among them."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import calls, case, line, message, tool_call, write_suite

from callgate.checks.check import check_response
from callgate.checks.matching import json_equal, max_matching
from callgate.checks.verdict import Verdict
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite, load_suite


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return load_suite(write_suite(tmp_path / "s", [
        case("ord", calls(("lookup_order", {"order_id": "ord_7281", "include_items": True})),
             "Check ord_7281 and list its items"),
        case("shipped", {"type": "no_call"}, "What does status shipped mean?"),
        case("two", calls(("lookup_order", {"order_id": "ord_1"}),
                          ("lookup_order", {"order_id": "ord_2"}), mode="unordered")),
        case("alt", {"type": "alternatives", "alternatives": [
            [{"tool": "track_shipment", "args": {"order_id": "ord_5"}}],
            [{"tool": "lookup_order", "args": {"order_id": "ord_5"}}],
        ]}),
        case("cancel", calls(("cancel_order", {"order_id": "ord_9",
                                               "reason": {"one_of": ["duplicate", "other"]}}))),
        case("opt", calls(("lookup_order", {"order_id": "ord_3",
                                            "include_items": {"one_of": [False],
                                                              "optional": True}}))),
        case("sup", calls(("lookup_order", {"order_id": "ord_4"}), mode="superset")),
        case("sub", calls(("lookup_order", {"order_id": "ord_6"}),
                          ("track_shipment", {"order_id": "ord_6"}), mode="subset")),
        case("judged", {"type": "judge", "rubric": "any tool that finds the order"}),
    ]))


def verdict(suite: Suite, case_id: str, *tool_calls: dict, finish_reason: str = "tool_calls",
            **extra: object) -> Verdict:
    response = parse_response(line(case_id, message(*tool_calls), finish_reason=finish_reason,
                                   **extra))
    schemas = suite.parameter_schemas
    return check_response(suite.cases[case_id], response, schemas, suite.validators)


LOOKUP_7281 = {"order_id": "ord_7281", "include_items": True}


def test_right_call(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", LOOKUP_7281))
    assert (v.status, v.tool, v.arguments) == ("scored", "right", "right")
    assert v.right_tool and v.right_arguments and v.calls == 1


def test_missing_order_id_is_missing_required(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", {"include_items": True}))
    assert v.tool == "right" and v.arguments == "schema_violation"
    assert v.schema_kind == "missing_required"
    assert "order_id" in v.arguments_reason
    assert v.right_tool and not v.right_arguments


def test_text_instead_of_boolean_is_wrong_type(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", {"order_id": "ord_7281",
                                                         "include_items": "yes"}))
    assert (v.arguments, v.schema_kind) == ("schema_violation", "wrong_type")
    assert "include_items" in v.arguments_reason and "boolean" in v.arguments_reason


def test_undeclared_customer_email_is_unknown_param_without_additional_properties(
    suite: Suite,
) -> None:
    # lookup_order's schema does not set additionalProperties: still reported.
    v = verdict(suite, "ord", tool_call("lookup_order", {**LOOKUP_7281,
                                                         "customer_email": "a@b.se"}))
    assert (v.arguments, v.schema_kind) == ("schema_violation", "unknown_param")
    assert "customer_email" in v.arguments_reason


def test_unknown_param_with_additional_properties_false(suite: Suite) -> None:
    v = verdict(suite, "cancel", tool_call("cancel_order", {"order_id": "ord_9",
                                                            "reason": "other", "force": True}))
    assert (v.arguments, v.schema_kind) == ("schema_violation", "unknown_param")
    assert v.arguments_reason.count("force") == 1  # reported once, not twice


def test_bad_enum(suite: Suite) -> None:
    v = verdict(suite, "cancel", tool_call("cancel_order", {"order_id": "ord_9",
                                                            "reason": "bored"}))
    assert (v.arguments, v.schema_kind) == ("schema_violation", "bad_enum")


def test_pattern_violation_is_other(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", {"order_id": "7281",
                                                         "include_items": True}))
    assert (v.arguments, v.schema_kind) == ("schema_violation", "other")


def test_schema_valid_but_wrong_order_is_wrong_value(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", {"order_id": "ord_7282",
                                                         "include_items": True}))
    assert (v.tool, v.arguments, v.schema_kind) == ("right", "wrong_value", None)
    assert "order_id" in v.arguments_reason
    assert '"ord_7281"' in v.arguments_reason and '"ord_7282"' in v.arguments_reason


def test_boolean_true_never_equals_one(suite: Suite) -> None:
    assert not json_equal(True, 1) and not json_equal(1, True) and json_equal(1, 1.0)
    assert json_equal({"a": [1, {"b": False}]}, {"a": [1.0, {"b": False}]})
    assert not json_equal([1, 2], [2, 1])


def test_call_where_none_expected_is_unexpected_call(suite: Suite) -> None:
    v = verdict(suite, "shipped", tool_call("lookup_order", {"order_id": "ord_1"}))
    assert v.tool == "unexpected_call" and not v.right_tool and not v.right_arguments
    assert "no call was expected" in v.tool_reason


def test_plain_answer_where_none_expected_is_right(suite: Suite) -> None:
    response = parse_response(line("shipped", {"role": "assistant", "content": "It left."},
                                   finish_reason="stop"))
    v = check_response(suite.cases["shipped"], response, {}, suite.validators)
    assert v.right_tool and v.right_arguments and v.arguments == "not_applicable"
    assert v.calls == 0


def test_no_call_where_one_expected_is_missing_call(suite: Suite) -> None:
    response = parse_response(line("ord", {"role": "assistant", "content": "Sure!"},
                                   finish_reason="stop"))
    v = check_response(suite.cases["ord"], response, {}, suite.validators)
    assert v.tool == "missing_call" and v.arguments == "not_applicable"
    assert not v.right_tool


def test_wrong_first_tool(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("track_shipment", {"order_id": "ord_7281"}))
    assert v.tool == "wrong_tool" and "track_shipment" in v.tool_reason


def test_first_right_second_outside_expectation_is_extra_call(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", LOOKUP_7281),
                tool_call("cancel_order", {"order_id": "ord_7281", "reason": "other"}, "c2"))
    assert v.tool == "extra_call" and "call 2 is cancel_order" in v.tool_reason
    assert not v.right_tool and not v.right_arguments and v.calls == 2


def test_a_second_identical_call_is_extra(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", LOOKUP_7281),
                tool_call("lookup_order", LOOKUP_7281, "c2"))
    assert v.tool == "extra_call"


def test_invalid_json_in_any_call(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", '{"order_id": "ord_7281",'))
    assert v.tool == "right" and v.arguments == "invalid_json"
    assert not v.right_arguments
    assert "not valid JSON" in v.arguments_reason


def test_schema_checked_on_every_call_not_only_the_first(suite: Suite) -> None:
    v = verdict(suite, "two", tool_call("lookup_order", {"order_id": "ord_1"}),
                tool_call("lookup_order", {"order_id": "ord_2", "include_items": "no"}, "c2"))
    assert v.tool == "right" and v.arguments == "schema_violation"


def test_cut_off_arguments_are_truncated_not_invalid_json(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", '{"order_id": "ord_72'),
                finish_reason="length")
    assert v.status == "truncated" and v.arguments is None
    assert not v.right_tool and "cut off" in v.tool_reason


def test_provider_error_is_not_a_model_error() -> None:
    response = parse_response({"case_id": "ord", "error": {"kind": "rate_limit",
                                                            "message": "429"}})
    assert response.message is None
    from callgate.suites.suite import Case

    c = Case.model_validate(case("ord", {"type": "no_call"}))
    v = check_response(c, response, {}, {})
    assert v.status == "provider_error" and v.tool is None and "rate_limit" in v.tool_reason


def test_parallel_calls_any_order(suite: Suite) -> None:
    v = verdict(suite, "two", tool_call("lookup_order", {"order_id": "ord_2"}),
                tool_call("lookup_order", {"order_id": "ord_1"}, "c2"))
    assert v.right_arguments


def test_parallel_calls_one_missing(suite: Suite) -> None:
    v = verdict(suite, "two", tool_call("lookup_order", {"order_id": "ord_2"}))
    assert v.tool == "missing_call" and "1 call(s) to lookup_order where 2" in v.tool_reason


def test_parallel_calls_with_duplicate_value_is_wrong_value(suite: Suite) -> None:
    v = verdict(suite, "two", tool_call("lookup_order", {"order_id": "ord_2"}),
                tool_call("lookup_order", {"order_id": "ord_2"}, "c2"))
    assert v.tool == "right" and v.arguments == "wrong_value"
    assert 'expected "ord_1"' in v.arguments_reason


def test_alternatives_any_listed_answer(suite: Suite) -> None:
    assert verdict(suite, "alt", tool_call("track_shipment", {"order_id": "ord_5"})
                   ).right_arguments
    assert verdict(suite, "alt", tool_call("lookup_order", {"order_id": "ord_5"})
                   ).right_arguments
    v = verdict(suite, "alt", tool_call("cancel_order", {"order_id": "ord_5",
                                                         "reason": "other"}))
    assert v.tool == "wrong_tool" and "none of 2 listed answers" in v.tool_reason
    v = verdict(suite, "alt", tool_call("lookup_order", {"order_id": "ord_55"}))
    assert v.tool == "right" and v.arguments == "wrong_value"


def test_one_of_accepts_any_listed_value(suite: Suite) -> None:
    ok = verdict(suite, "cancel", tool_call("cancel_order", {"order_id": "ord_9",
                                                             "reason": "other"}))
    bad = verdict(suite, "cancel", tool_call("cancel_order", {"order_id": "ord_9",
                                                              "reason": "changed_mind"}))
    assert ok.right_arguments and bad.arguments == "wrong_value"
    assert "one of" in bad.arguments_reason


def test_optional_key_argument(suite: Suite) -> None:
    assert verdict(suite, "opt", tool_call("lookup_order", {"order_id": "ord_3"})
                   ).right_arguments
    assert verdict(suite, "opt", tool_call("lookup_order", {"order_id": "ord_3",
                                                            "include_items": False})
                   ).right_arguments
    v = verdict(suite, "opt", tool_call("lookup_order", {"order_id": "ord_3",
                                                         "include_items": True}))
    assert v.arguments == "wrong_value"


def test_missing_key_argument_is_wrong_value(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", {"order_id": "ord_7281"}))
    assert v.arguments == "wrong_value" and "left out" in v.arguments_reason


def test_superset_allows_further_calls(suite: Suite) -> None:
    v = verdict(suite, "sup", tool_call("track_shipment", {"order_id": "ord_4"}),
                tool_call("lookup_order", {"order_id": "ord_4"}, "c2"))
    assert v.right_arguments
    assert verdict(suite, "sup", tool_call("track_shipment", {"order_id": "ord_4"})
                   ).tool == "missing_call"


def test_subset_allows_leaving_out_expected_calls(suite: Suite) -> None:
    assert verdict(suite, "sub", tool_call("track_shipment", {"order_id": "ord_6"})
                   ).right_arguments
    v = verdict(suite, "sub", tool_call("lookup_order", {"order_id": "ord_6"}),
                tool_call("cancel_order", {"order_id": "ord_6", "reason": "other"}, "c2"))
    assert v.tool == "extra_call"


def test_judge_case_waits_for_the_judge_but_keeps_schema_failures(suite: Suite) -> None:
    ok = verdict(suite, "judged", tool_call("track_shipment", {"order_id": "ord_1"}))
    assert ok.status == "pending_judge" and ok.arguments is None
    bad = verdict(suite, "judged", tool_call("lookup_order", {"order_id": 7}))
    assert bad.status == "pending_judge" and bad.arguments == "schema_violation"


def test_empty_argument_string_means_no_arguments(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", ""))
    assert v.arguments == "schema_violation" and v.schema_kind == "missing_required"


def test_arguments_that_are_not_an_object(suite: Suite) -> None:
    v = verdict(suite, "ord", tool_call("lookup_order", "[1, 2]"))
    assert v.arguments == "invalid_json" and "not an object" in v.arguments_reason


def test_full_chat_completion_object_is_accepted(suite: Suite) -> None:
    completion = {
        "id": "gen-1", "object": "chat.completion", "provider": "Fireworks",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": message(tool_call("lookup_order", LOOKUP_7281))}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "cost": 0.00012},
    }
    response = parse_response({"case_id": "ord", "response": completion})
    assert response.provider == "Fireworks" and response.cost == pytest.approx(0.00012)
    assert response.usage is not None and response.usage.prompt_tokens == 12
    assert response.finish_reason == "tool_calls"
    v = check_response(suite.cases["ord"], response,
                       suite.parameter_schemas,
                       suite.validators)
    assert v.right_arguments


def test_max_pairing_is_optimal_not_greedy() -> None:
    # Greedy would give left 0 the right 0 and leave left 1 unmatched.
    edges = [[0, 1], [0]]
    assert max_matching(range(2), range(2), lambda e, a: a in edges[e]) == {0: 1, 1: 0}


def test_date_time_format_is_checked(tmp_path: Path) -> None:
    tool = {"type": "function", "function": {"name": "book", "parameters": {
        "type": "object", "properties": {"at": {"type": "string", "format": "date-time"}},
        "required": ["at"]}}}
    suite = load_suite(write_suite(tmp_path / "dt", [case("b", calls(("book", {})))], [tool]))
    bad = verdict(suite, "b", tool_call("book", {"at": "tomorrow at noon"}))
    good = verdict(suite, "b", tool_call("book", {"at": "2026-12-01T12:00:00+01:00"}))
    assert (bad.arguments, bad.schema_kind) == ("schema_violation", "other")
    assert "date-time" in bad.arguments_reason and good.right_arguments
