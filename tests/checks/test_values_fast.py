"""The fast paths of tool selection and key values decide exactly as the plain rules do.

`select_tools` counts without Counter and takes a shortcut for one call of the one expected
tool; `check_values` can skip its sentence (explain=False) and keeps a matcher per expected call
(built once per rules and schema). Each is compared here with a plain statement of the rule on
generated inputs, or with a fresh expected call.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate.checks.parsing import ParsedCall
from callgate.checks.values import check_values, matcher, select_tools, value_mismatch
from callgate.suites.suite import ExpectedCall, MatchRules

TOOLS = ["a", "b", "c"]
MODES = ["strict", "unordered", "superset", "subset"]


def plain_select_tools(names: list[str], expected: list[ExpectedCall], mode: str) -> Any:
    """The rule as it read before the fast path (Counter, no shortcut)."""
    want = Counter(call.tool for call in expected)
    wanted = " + ".join(f"{n}×{c}" if c > 1 else n for n, c in want.items())
    if not names:
        return "missing_call", f"no tool call; expected {wanted}"
    got = Counter(names)
    if mode != "superset" and names[0] not in want:
        return "wrong_tool", f"called {names[0]}; expected {wanted}"
    if mode != "superset":
        for index, name in enumerate(names):
            if name not in want:
                return "extra_call", (
                    f"call {index + 1} is {name}, which is outside the expectation ({wanted})")
    for name, count in want.items():
        if got[name] < count and mode != "subset":
            return "missing_call", f"{got[name]} call(s) to {name} where {count} are expected"
        if got[name] > count and mode in ("strict", "unordered", "subset"):
            return "extra_call", f"{got[name]} calls to {name} where {count} are expected"
    return "right", ""


expected_calls = st.lists(
    st.builds(lambda tool, value: ExpectedCall(tool=tool, args={"x": value}),
              st.sampled_from(TOOLS), st.sampled_from([1, 2, "s"])),
    min_size=1, max_size=4,
)
made_calls = st.lists(
    st.tuples(st.sampled_from(TOOLS), st.sampled_from([{"x": 1}, {"x": 2}, {"x": "s"}, {}])),
    max_size=5,
)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(TOOLS), max_size=5), expected_calls, st.sampled_from(MODES))
def test_select_tools_decides_as_the_plain_rule(
    names: list[str], expected: list[ExpectedCall], mode: str
) -> None:
    assert select_tools(names, expected, mode) == plain_select_tools(names, expected, mode)  # type: ignore[arg-type]


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(expected_calls, made_calls, st.sampled_from(MODES),
       st.sampled_from(["optimal", "first_fit"]), st.sampled_from(["ignore", "reject"]))
def test_values_unexplained_say_the_same_as_explained(
    expected: list[ExpectedCall], made: list[tuple[str, dict[str, Any]]], mode: str,
    pairing: str, unlisted: str,
) -> None:
    rules = MatchRules(pairing=pairing, unlisted_args=unlisted)  # type: ignore[arg-type]
    calls = [ParsedCall(i, name, args, None) for i, (name, args) in enumerate(made)]
    explained = check_values(expected, calls, mode, rules)  # type: ignore[arg-type]
    quiet = check_values(expected, calls, mode, rules, explain=False)  # type: ignore[arg-type]
    assert (explained is None) == (quiet is None)


def test_one_expected_call_checked_under_other_rules_and_schemas_gets_their_matcher() -> None:
    call = ExpectedCall(tool="f", args={"city": "New York", "n": 2})
    given = ParsedCall(0, "f", {"city": "new york", "n": 2.0}, None)
    city = {"properties": {"city": {"type": "string"}, "n": {"type": "integer"}}}
    bfcl = MatchRules(values="bfcl")
    # callgate's own rules: the exact string; BFCL's: normalised, and 2.0 is not an integer.
    assert value_mismatch(call, given) == 'f.city: expected "New York", got "new york"'
    assert value_mismatch(call, given, bfcl, city) == "f.n: expected 2, got 2.0"
    # Under a schema that declares n a number, BFCL accepts 2.0: a new matcher, not the old one.
    number = {"properties": {"city": {"type": "string"}, "n": {"type": "number"}}}
    assert value_mismatch(call, given, bfcl, number) is None
    assert matcher(call, bfcl, number) is matcher(call, bfcl, number)
    assert matcher(call, bfcl, number) is not matcher(call, bfcl, city)
    # The same answers as an expected call never used before.
    for rules, schema in ((MatchRules(), None), (bfcl, city), (bfcl, number)):
        fresh = ExpectedCall(tool="f", args={"city": "New York", "n": 2})
        assert value_mismatch(call, given, rules, schema) == value_mismatch(
            fresh, given, rules, schema)


def test_a_copy_with_other_arguments_gets_its_own_matcher() -> None:
    call = ExpectedCall(tool="f", args={"n": 1})
    given = ParsedCall(0, "f", {"n": 2}, None)
    assert value_mismatch(call, given) == "f.n: expected 1, got 2"
    # model_copy shares the memo with the original; the copy's matcher must not be the old one.
    other = call.model_copy(update={"args": ExpectedCall(tool="f", args={"n": 2}).args})
    assert value_mismatch(other, given) is None
    assert value_mismatch(call, given) == "f.n: expected 1, got 2"


def test_the_fast_right_verdict_is_the_validated_one() -> None:
    from callgate.checks.kinds.calls import _right_verdict
    from callgate.checks.verdict import Verdict

    fast = _right_verdict({"case_id": "c7", "repeat": 3})
    built = Verdict(case_id="c7", repeat=3, status="scored", calls=1, tool="right",
                    arguments="right", right_tool=True, right_arguments=True)
    assert fast == built and hash(fast) == hash(built)
    assert list(fast.model_dump().items()) == list(built.model_dump().items())
    assert fast.model_fields_set == built.model_fields_set
    assert fast.model_dump_json() == built.model_dump_json()
    assert fast.model_copy(update={"repeat": 4}) == built.model_copy(update={"repeat": 4})
    assert _right_verdict({"case_id": "c8", "repeat": 0}).case_id == "c8"  # no shared state
    assert fast.case_id == "c7"


@pytest.mark.parametrize("mode", ["strict", "unordered", "superset", "subset"])
@pytest.mark.parametrize("rules", [MatchRules(), MatchRules(unlisted_args="reject"),
                                   MatchRules(values="bfcl")])
@pytest.mark.parametrize("arguments", [{"city": "Paris"}, {"city": "Rome"}, {},
                                       {"city": "Paris", "unit": "c"}, {"city": 3}])
def test_the_one_call_fast_path_decides_as_the_full_path(
    mode: str, rules: MatchRules, arguments: dict[str, Any]
) -> None:
    from callgate.checks.attempt import Attempt
    from callgate.checks.kinds import calls as calls_kind
    from callgate.suites.suite import Case

    case = Case.model_validate({
        "id": "c1", "messages": [{"role": "user", "content": "weather?"}],
        "expect": {"type": "calls", "mode": mode,
                   "calls": [{"tool": "weather", "args": {"city": "Paris"}}]}})
    schemas = {"weather": {"type": "object", "properties": {"city": {"type": "string"},
                                                            "unit": {"type": "string"}}}}
    made = [ParsedCall(0, "weather", arguments, None)]
    base = {"case_id": "c1", "repeat": 2}
    fast = calls_kind.right_single_call(base, case, made, None, rules, schemas)
    attempt = Attempt(base, case, made, [0], None, rules, schemas, {}, None, None, None)
    full = calls_kind.check(attempt, case.expect)
    assert fast is not None
    assert fast == full and fast.model_dump() == full.model_dump()
    assert calls_kind.right_single_call(base, case, [made[0], made[0]], None, rules,
                                        schemas) is None  # two calls: the full path


def test_every_verdict_names_its_first_call_fast_path_or_not() -> None:
    """The confusion table reads each verdict's first call: the one-call fast path gives it
    as the full path does (an attempt's first call, '' for none)."""
    from paths import EXAMPLES

    from callgate.checks.check import check
    from callgate.suites.responses import read_responses
    from callgate.suites.suite import load_suite

    suite = load_suite(EXAMPLES / "order_support")
    seen = Counter()
    for release in ("2026.10", "2026.11"):
        for response in read_responses(EXAMPLES / "order_support" / f"responses-{release}.jsonl"):
            verdict = check(suite, response)
            if verdict.status != "scored":
                continue
            calls = response.message.tool_calls if response.message is not None else []
            assert verdict.first_tool == (calls[0].name if calls else ""), verdict
            seen[(len(calls) == 1, verdict.right_arguments)] += 1
    assert seen[(True, True)] and seen[(True, False)] and seen[(False, True)]
