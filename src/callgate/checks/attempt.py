"""One attempt as every expectation kind sees it (`Attempt`), and the assembly of a scored
verdict from a tool verdict and the argument problems (`scored_verdict`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from jsonschema import Draft7Validator

from callgate.checks.parsing import ParsedCall
from callgate.checks.replay import Replay
from callgate.checks.verdict import Problems, ToolVerdict, Verdict
from callgate.suites.environment import EnvironmentFactory
from callgate.suites.suite import Case, MatchRules


class Attempt(NamedTuple):
    """An attempt past the checks every kind shares (provider error, truncation, environment
    failure, turn limit), handed to its expectation kind's `check(attempt, expect)`.

    `calls` are every call of every turn, in order, and `steps` the turn of each; `problems`
    the first JSON or schema problem of the calls; `agent_run` the calls run again on the
    suite's environment (None without one, or when it failed: `failure` says why)."""

    base: dict[str, Any]  # case_id and repeat
    case: Case
    calls: Sequence[ParsedCall]
    steps: Sequence[int]
    problems: Problems
    rules: MatchRules
    schemas: Mapping[str, Mapping[str, Any]]
    validators: Mapping[str, Draft7Validator]
    environment: EnvironmentFactory | None
    agent_run: Replay | None
    failure: str | None
    call_turns: Sequence[int] = ()  # the user turn of each call (none: all in turn 0)
    started: Any = None  # what a kind's check plays on, started by check_response (or None)

    @property
    def names(self) -> list[str]:
        return [call.name for call in self.calls]


def scored_verdict(
    base: dict[str, Any],
    calls: int,
    tool_verdict: ToolVerdict,
    tool_reason: str,
    problems: Problems,
    value_mismatch: Callable[[], str | None],
    right_reason: str = "",
    **extra: Any,
) -> Verdict:
    """Assemble a scored verdict. JSON and schema problems come first, whatever the tool;
    values are compared (lazily) only when the tool is right."""
    right_tool = tool_verdict == "right"
    if problems is not None:
        args_verdict, kind, args_reason = problems
    elif not right_tool:
        args_verdict, kind, args_reason = "not_applicable", None, ""
    else:
        mismatch = value_mismatch()
        args_verdict, kind, args_reason = (
            ("wrong_value", None, mismatch) if mismatch is not None else
            ("right", None, right_reason))
    return Verdict(
        **base, status="scored", calls=calls, tool=tool_verdict, tool_reason=tool_reason,
        arguments=args_verdict, schema_kind=kind, arguments_reason=args_reason,
        right_tool=right_tool, right_arguments=right_tool and args_verdict == "right", **extra,
    )

def count_text(counts: Counter[str]) -> str:
    return " + ".join(f"{name}×{n}" if n > 1 else name for name, n in sorted(counts.items()))

