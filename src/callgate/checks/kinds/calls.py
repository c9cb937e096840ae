"""`calls` and `alternatives`: the expected calls (or one of several lists of them), checked by
tool selection, then JSON, schema and key values; the best-matching alternative decides."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from callgate.checks.attempt import Attempt, scored_verdict
from callgate.checks.parsing import ParsedCall
from callgate.checks.values import check_values, matcher, select_tools, value_mismatch
from callgate.checks.verdict import Problems, ToolVerdict, Verdict
from callgate.suites.cases import Alternatives, Calls, Case, MatchRules

KINDS = ("calls", "alternatives")


def check(attempt: Attempt, expect: Calls | Alternatives) -> Verdict:
    calls, names = attempt.calls, attempt.names
    alternatives = attempt.case.expected_call_lists()
    mode = expect.mode
    outcomes: list[tuple[int, ToolVerdict, str, str | None]] = []
    for index, expected in enumerate(alternatives):
        tool_verdict, tool_reason = select_tools(names, expected, mode)
        mismatch = (
            # With a JSON or schema problem, the verdict takes its reason, never this one.
            check_values(expected, calls, mode, attempt.rules, attempt.schemas,
                         explain=attempt.problems is None)
            if tool_verdict == "right" else None
        )
        outcomes.append((index, tool_verdict, tool_reason, mismatch))
        if tool_verdict == "right" and mismatch is None:
            break  # the best there can be: no later alternative is looked at
    # Best alternative: right tool and values first, then right tool, then the first listed.
    index, tool_verdict, tool_reason, mismatch = outcomes[-1] if len(outcomes) == 1 else min(
        outcomes, key=lambda o: (o[1] != "right", o[3] is not None, o[0])
    )
    if tool_verdict != "right" and len(alternatives) > 1:
        tool_reason = f"none of {len(alternatives)} listed answers matches; first: {tool_reason}"
    return scored_verdict(attempt.base, len(calls), tool_verdict, tool_reason, attempt.problems,
                          lambda: mismatch)


def right_single_call(
    base: dict[str, Any],
    case: Case,
    calls: Sequence[ParsedCall],
    problems: Problems,
    rules: MatchRules,
    schemas: Mapping[str, Mapping[str, Any]],
) -> Verdict | None:
    """The verdict `check` gives, for the commonest attempt: one call expected (`calls`, no
    environment: the caller sees to that), one call made, of that tool, valid. Right when its
    key values match, else `wrong_value` with check_values' reason. None for anything else:
    the full path decides it, so every other failure keeps its reason. (One call of the one
    expected tool is the right tool in every mode, and its values match in every mode when
    the call matches.)"""
    expect = case.expect
    if (problems is not None or len(calls) != 1 or case.never_right is not None
            or not isinstance(expect, Calls) or len(expect.calls) != 1):
        return None
    expected, call = expect.calls[0], calls[0]
    if call.name != expected.tool:
        return None
    schema = schemas.get(expected.tool)
    if matcher(expected, rules, schema).matches(call):
        return _right_verdict(base)
    # What check_values says of one expected call and one call of its tool that do not match.
    mismatch = value_mismatch(expected, call, rules, schema) or (
        f"call {call.index + 1} ({call.name}) matches no expected call"
        if expect.mode == "subset" else f"{expected.tool}: arguments do not match")
    return scored_verdict(base, 1, "right", "", None, lambda: mismatch)


# The right verdict of right_single_call, validated once: each attempt's is a copy with its
# case_id and repeat (both read from a validated Response), built as pydantic's model_copy
# builds one, at half the cost of validating the same fields again.
_RIGHT = Verdict(case_id="", repeat=0, status="scored", calls=1, tool="right",
                 arguments="right", right_tool=True, right_arguments=True)
_new, _set = object.__new__, object.__setattr__


def _right_verdict(base: dict[str, Any]) -> Verdict:
    fields = _RIGHT.__dict__.copy()
    fields.update(base)
    verdict = _new(Verdict)
    _set(verdict, "__dict__", fields)
    _set(verdict, "__pydantic_fields_set__", set(_RIGHT.__pydantic_fields_set__))
    _set(verdict, "__pydantic_extra__", None)
    _set(verdict, "__pydantic_private__", None)
    return verdict
