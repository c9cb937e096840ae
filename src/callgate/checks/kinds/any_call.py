"""`any_call`: any call is right; only arguments that cannot be read as a JSON object count
against it."""

from __future__ import annotations

from callgate.checks.attempt import Attempt
from callgate.checks.verdict import Verdict
from callgate.suites.cases import AnyCall

KIND = "any_call"


def check(attempt: Attempt, expect: AnyCall) -> Verdict:
    calls, problems = attempt.calls, attempt.problems
    broken = problems if problems is not None and problems[0] == "invalid_json" else None
    args_verdict, kind, reason = broken or ("not_applicable", None, "")
    return Verdict(
        **attempt.base,
        status="scored",
        calls=len(calls),
        tool="right" if calls else "missing_call",
        tool_reason="" if calls else "no tool call; any call was expected",
        arguments=args_verdict,
        schema_kind=kind,
        arguments_reason=reason,
        right_tool=bool(calls),
        right_arguments=bool(calls) and broken is None,
    )
