"""`trajectory`: the sequence of calls over every turn, compared in a mode by the matcher in
`callgate.checks.matching`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate.checks import matching
from callgate.checks.attempt import Attempt, count_text, scored_verdict
from callgate.checks.matching import MISSING, json_equal
from callgate.checks.parsing import ParsedCall
from callgate.checks.values import arg_matches, describe, why_not
from callgate.checks.verdict import Problems, ToolVerdict, Verdict
from callgate.suites.cases import DEFAULT_MATCH, ArgSpec, MatchRules, Trajectory

KIND = "trajectory"


def check(attempt: Attempt, expect: Trajectory) -> Verdict:
    return _trajectory_verdict(attempt.base, expect, attempt.calls, attempt.steps,
                               attempt.problems, attempt.rules, attempt.schemas)


@dataclass(frozen=True)
class _Accepts:
    """A key argument inside a trajectory comparison; its repr is what messages show."""

    spec: ArgSpec
    rules: MatchRules
    schema: Mapping[str, Any] | None

    def __call__(self, got: Any) -> bool:
        if got is MISSING:
            return self.spec.optional
        return arg_matches(self.spec, True, got, self.rules, self.schema)

    def __repr__(self) -> str:
        return describe(self.spec)  # JSON values, as in every other reason

    def why_not(self, got: Any) -> str:
        return why_not(self.spec, got)


def _accepts(want: Any, got: Any) -> bool:
    return want(got) if isinstance(want, _Accepts) else json_equal(want, got)


def match_calls(
    expect: Trajectory,
    calls: Sequence[ParsedCall],
    steps: Sequence[int],
    rules: MatchRules = DEFAULT_MATCH,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    names_only: bool = False,
) -> matching.TrajectoryResult:
    """The trajectory comparison of the calls made (step = turn index) with the expectation."""
    schemas = schemas or {}
    actual = [
        matching.Call(call.name, call.arguments or {}, steps[call.index]) for call in calls
    ]
    reference = []
    for call in expect.calls:
        properties = schemas.get(call.tool, {}).get("properties", {})
        arguments = {
            key: _Accepts(spec, rules, properties.get(key)) for key, spec in call.args.items()
        }
        reference.append(matching.ReferenceStepCall(call.tool, arguments, call.step))
    if names_only:
        return matching.match_trajectory(actual, reference, expect.mode, args="ignore")
    return matching.match_trajectory(
        actual,
        reference,
        expect.mode,
        args=expect.args,
        per_tool=expect.per_tool,
        value_match=_accepts,
    )


def trajectory_tool_verdict(result: matching.TrajectoryResult) -> ToolVerdict:
    """The tool verdict of a names-only trajectory comparison."""
    if result.ok:
        return "right"
    missing = any(m.call_index is None for m in result.mismatches)
    unexpected = any(m.call_index is not None and m.expected is None for m in result.mismatches)
    out_of_order = any(
        m.call_index is not None and m.expected is not None for m in result.mismatches
    )
    if out_of_order or (missing and unexpected):
        return "wrong_tool"
    return "extra_call" if unexpected else "missing_call"


def _trajectory_verdict(
    base: dict[str, Any],
    expect: Trajectory,
    calls: Sequence[ParsedCall],
    steps: Sequence[int],
    problems: Problems,
    rules: MatchRules,
    schemas: Mapping[str, Mapping[str, Any]],
) -> Verdict:
    if not calls:
        wanted = count_text(Counter(call.tool for call in expect.calls))
        tool_verdict: ToolVerdict = "missing_call"
        tool_reason = f"no tool call; expected {wanted}"
    else:
        by_name = match_calls(expect, calls, steps, rules, schemas, names_only=True)
        tool_verdict = trajectory_tool_verdict(by_name)
        tool_reason = "" if by_name.ok else by_name.reason

    def mismatch() -> str | None:
        full = match_calls(expect, calls, steps, rules, schemas)
        return None if full.ok else full.reason

    return scored_verdict(base, len(calls), tool_verdict, tool_reason, problems, mismatch)
