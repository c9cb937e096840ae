"""Running a response's calls again on a fresh copy of the suite's environment (or answering
them from the case's scripted results)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft7Validator

from callgate.checks.parsing import ParsedCall
from callgate.checks.schema import (
    schema_problem,
)
from callgate.checks.values import arg_matches
from callgate.suites.environment import (
    Environment,
    EnvironmentFactory,
    ScriptedResult,
    call_tool,
    fresh,
    snapshot,
    state_difference,
)
from callgate.suites.suite import (
    DEFAULT_MATCH,
    Case,
    ExpectedCall,
    FinalState,
    MatchRules,
)


def scripted_results(
    case: Case,
    rules: MatchRules = DEFAULT_MATCH,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[ScriptedResult]:
    """The case's `tool_results`, matched on key arguments as expectations are."""
    schemas = schemas or {}

    def matcher(entry: ExpectedCall) -> Any:
        def matches(arguments: Mapping[str, Any]) -> bool:
            properties = schemas.get(entry.tool, {}).get("properties", {})
            return all(
                arg_matches(spec, key in arguments, arguments.get(key), rules, properties.get(key))
                for key, spec in entry.args.items()
            )

        return matches

    return [
        ScriptedResult(entry.tool, matcher(entry), entry.result)
        for entry in case.tool_results or ()
    ]


def answer_call(
    env: Environment,
    call: ParsedCall,
    offered: Collection[str],
    schemas: Mapping[str, Mapping[str, Any]],
    validators: Mapping[str, Draft7Validator],
) -> Any:
    """What one call gets back from the environment; EnvironmentError_ when it fails.

    A call that is not valid JSON, names a tool not offered, or fails its tool's schema gets an
    error back and is never run: only a schema-valid call can make the environment fail."""
    if call.arguments is None:
        return {"error": f"arguments are not valid JSON: {call.json_error}"}
    if call.name not in offered:
        return {"error": f"unknown tool {call.name}"}
    problem = schema_problem(call, schemas, validators)
    if problem is not None:
        return {"error": problem}
    return call_tool(env, call.name, call.arguments)


@dataclass(frozen=True)
class Replay:
    """The calls run on a fresh environment: the final state, and which calls changed it."""

    state: dict[str, Any]
    changed: tuple[str, ...]  # names of the calls after which the state was different
    turn_states: tuple[dict[str, Any], ...] = ()  # tracked with user turns: at each one's end
    results: tuple[Any, ...] = ()  # what each call got back, in order (checks.claims reads it)


def _run_calls(
    factory: EnvironmentFactory,
    initial: Mapping[str, Any],
    calls: Sequence[tuple[str, Any]],
    track: bool,
    turn_of: Sequence[int] = (),
    user_turns: int = 1,
) -> Replay:
    """`turn_of`: each call's user turn, for the state at the end of each of `user_turns`
    (when tracked)."""
    env = fresh(factory, initial)
    changed: list[str] = []
    before = snapshot(env) if track else None
    states: list[dict[str, Any]] = []
    results: list[Any] = []
    for index, (name, run) in enumerate(calls):
        while track and turn_of and len(states) < turn_of[index]:
            states.append(snapshot(env))  # the user turns before this call's have ended
        results.append(run(env))
        if track:
            after = snapshot(env)
            if state_difference(before, after) is not None:
                changed.append(name)
            before = after
    final = snapshot(env)
    if track and user_turns > 1:
        states += [final] * (user_turns - len(states))
    return Replay(final, tuple(changed), tuple(states), tuple(results))


def agent_run(
    factory: EnvironmentFactory, case: Case, calls: Sequence[ParsedCall],
    schemas: Mapping[str, Mapping[str, Any]], validators: Mapping[str, Draft7Validator],
    track: bool, call_turns: Sequence[int] = (),
) -> Replay:
    """The calls run again; `call_turns` gives each call's user turn (none: turn 0 for all),
    which says the tools offered to it."""
    # Tool results do not change the state, so the calls can be run without the turns between.
    offered = [case.offered_names(schemas, turn)
               for turn in range(1 + len(case.user_turns or ()))]
    turn_of = list(call_turns) or [0] * len(calls)
    names_of = [offered[min(turn, len(offered) - 1)] for turn in turn_of]
    steps = [
        (call.name, lambda env, call=call, names=names_of[call.index]:
         answer_call(env, call, names, schemas, validators))
        for call in calls
    ]
    return _run_calls(factory, case.state or {}, steps, track, turn_of, len(offered))


def reference_run(factory: EnvironmentFactory, case: Case, expect: FinalState) -> Replay:
    steps = [
        (call.tool, lambda env, call=call: call_tool(env, call.tool, call.args))
        for call in expect.calls
    ]
    turn_of = [turn for turn, calls in enumerate(expect.per_turn or ()) for _ in calls]
    return _run_calls(factory, case.state or {}, steps, True, turn_of,
                      1 + len(case.user_turns or ()))
