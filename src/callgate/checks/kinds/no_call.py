"""`no_call`: the model should answer without calling a tool."""

from __future__ import annotations

from callgate.checks.attempt import Attempt
from callgate.checks.verdict import Verdict
from callgate.suites.cases import ANSWER_KINDS, NoCall

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
        tool_reason=f"no call was expected{_kind(expect)}; called {', '.join(attempt.names)}",
        arguments=args_verdict,
        schema_kind=kind,
        arguments_reason=reason,
    )


def _kind(expect: NoCall) -> str:
    """The kind of answer the case names, in words (a call is never any of them)."""
    if expect.answer == "any":
        return ""
    return f" ({ANSWER_KINDS[expect.answer]}: answer {expect.answer!r})"
