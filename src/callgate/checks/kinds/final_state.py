"""`final_state`: the environment's state after the model's calls, against the state after the
reference calls (both run on fresh copies of the suite's environment)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from callgate.checks.attempt import Attempt, count_text, scored_verdict
from callgate.checks.parsing import ParsedCall
from callgate.checks.replay import Replay, reference_run
from callgate.checks.verdict import Problems, ToolVerdict, Verdict
from callgate.suites.cases import Case, FinalState
from callgate.suites.environment import (
    EnvironmentError_,
    EnvironmentFactory,
    state_difference,
    state_hash,
)

KIND = "final_state"


def check(attempt: Attempt, expect: FinalState) -> Verdict:
    base, calls, environment = attempt.base, attempt.calls, attempt.environment
    if environment is None:
        raise ValueError(f"case {attempt.case.id}: a final_state expectation needs the environment")
    if attempt.agent_run is None:  # the environment failed, and the arguments fail anyway
        return _unknown_state_verdict(base, environment, attempt.case, expect, calls,
                                      attempt.problems, attempt.failure or "")
    try:
        reference = reference_run(environment, attempt.case, expect)
    except EnvironmentError_ as exc:
        return Verdict(
            **base,
            status="environment_error",
            calls=len(calls),
            tool_reason=f"environment error, not the model's (reference replay): {exc}",
        )
    return _final_state_verdict(base, expect, calls, attempt.problems, attempt.agent_run,
                                reference)


def _state_tool_verdict(
    calls: Sequence[ParsedCall], expect: FinalState, agent: Replay, reference: Replay
) -> tuple[ToolVerdict, str]:
    """When the final states differ: compare the calls to the tools that change the state."""
    state_tools = set(agent.changed) | set(reference.changed)
    got = Counter(call.name for call in calls if call.name in state_tools)
    want = Counter(call.tool for call in expect.calls if call.tool in state_tools)
    missing, extra = want - got, got - want
    if not calls:
        return "missing_call", f"no tool call; the reference calls {count_text(want)}"
    if missing and extra:
        return "wrong_tool", (
            f"called {count_text(got) or 'nothing that changes the state'} where the "
            f"reference calls {count_text(want)}"
        )
    if extra:
        name = sorted(extra)[0]
        return "extra_call", f"{got[name]} call(s) to {name} where the reference makes {want[name]}"
    if missing:
        name = sorted(missing)[0]
        return "missing_call", (
            f"{got[name]} call(s) to {name} where the reference makes {want[name]}"
        )
    return "right", ""


def _unknown_state_verdict(
    base: dict[str, Any],
    environment: EnvironmentFactory,
    case: Case,
    expect: FinalState,
    calls: Sequence[ParsedCall],
    problems: Problems,
    failure: str,
) -> Verdict:
    """A final_state attempt whose own run failed in the environment but whose arguments fail
    their schema: scored on those, with a tool verdict from the calls to state-changing tools."""
    try:
        changed = reference_run(environment, case, expect).changed
    except EnvironmentError_:
        changed = tuple(call.tool for call in expect.calls)
    reference = Replay({}, changed)
    tool_verdict, tool_reason = _state_tool_verdict(calls, expect, Replay({}, ()), reference)
    unknown = f"the final state is unknown (environment error: {failure})"
    tool_reason = f"{tool_reason}; {unknown}" if tool_reason else unknown
    return scored_verdict(base, len(calls), tool_verdict, tool_reason, problems, lambda: None)


def _final_state_verdict(
    base: dict[str, Any],
    expect: FinalState,
    calls: Sequence[ParsedCall],
    problems: Problems,
    agent: Replay,
    reference: Replay,
) -> Verdict:
    got_hash = state_hash(agent.state)
    difference = _state_reason(expect, agent, reference)
    if difference is None:
        tool_verdict: ToolVerdict = "right"
        tool_reason = ""
        state_reason = f"final state {got_hash[:12]}, as the reference's" + (
            " (and at the end of every user turn)" if expect.per_turn is not None else "")
    else:
        tool_verdict, tool_reason = _state_tool_verdict(calls, expect, agent, reference)
        state_reason = difference
    if tool_verdict != "right":
        tool_reason = f"{tool_reason}; {state_reason}"
    return scored_verdict(
        base, len(calls), tool_verdict, tool_reason, problems,
        lambda: None if difference is None else state_reason, right_reason=state_reason,
        state_hash=got_hash,
    )


def _state_reason(expect: FinalState, agent: Replay, reference: Replay) -> str | None:
    """How the agent's state differs from the reference's: at the end (or, with `per_turn`,
    at the end of the first user turn where they differ); None when it does not."""
    pairs = [(agent.state, reference.state, "final state")]
    if expect.per_turn is not None:
        pairs = [(got, want, f"after user turn {turn + 1}, state")
                 for turn, (got, want) in enumerate(zip(agent.turn_states, reference.turn_states,
                                                        strict=True))]
    for got, want, which in pairs:
        difference = state_difference(want, got)
        if difference is not None:
            return (f"{which} {state_hash(got)[:12]} is not the reference's "
                    f"{state_hash(want)[:12]}: {difference}")
    return None
