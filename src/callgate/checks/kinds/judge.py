"""`judge`: left pending for the model judge (`callgate.judging`), with any JSON or schema
problem of the calls noted."""

from __future__ import annotations

from callgate.checks.attempt import Attempt
from callgate.checks.verdict import Verdict
from callgate.suites.cases import JudgeRubric

KIND = "judge"


def check(attempt: Attempt, expect: JudgeRubric) -> Verdict:
    args_verdict, kind, reason = attempt.problems or (None, None, "")
    return Verdict(
        **attempt.base,
        status="pending_judge",
        calls=len(attempt.calls),
        tool_reason="waiting for the judge",
        arguments=args_verdict,
        schema_kind=kind,
        arguments_reason=reason,
    )
