"""`no_call`: the model should answer without calling a tool."""

from __future__ import annotations

from callgate.checks.attempt import Attempt
from callgate.checks.verdict import Verdict
from callgate.suites.cases import NoCall

KIND = "no_call"


def check(attempt: Attempt, expect: NoCall) -> Verdict:
    base, calls = attempt.base, attempt.calls
    if not calls:
        return Verdict(
            **base,
            status="scored",
            tool="right",
            arguments="not_applicable",
            right_tool=True,
            right_arguments=True,
        )
    args_verdict, kind, reason = attempt.problems or ("not_applicable", None, "")
    return Verdict(
        **base,
        status="scored",
        calls=len(calls),
        tool="unexpected_call",
        tool_reason=f"no call was expected; called {', '.join(attempt.names)}",
        arguments=args_verdict,
        schema_kind=kind,
        arguments_reason=reason,
    )
