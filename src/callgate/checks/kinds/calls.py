"""`calls` and `alternatives`: the expected calls (or one of several lists of them), checked by
tool selection, then JSON, schema and key values; the best-matching alternative decides."""

from __future__ import annotations

from callgate.checks.attempt import Attempt, scored_verdict
from callgate.checks.values import check_values, select_tools
from callgate.checks.verdict import ToolVerdict, Verdict
from callgate.suites.cases import Alternatives, Calls

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
