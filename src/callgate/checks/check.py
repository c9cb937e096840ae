"""Stage 2, the deterministic checks: tool selection, JSON, Draft 7 schema, key argument values.

Pure functions: a case, the suite's compiled validators and one response in, a Verdict out.
Everything an equality check or a validator can decide is decided here; only cases whose
expectation is `judge` are left pending for the judge. A multi-turn response is judged on the
calls of all its turns; in a suite with an environment, those calls are run again on a fresh
copy of it (for final_state, and so that an environment that fails is never the model's fault).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft7Validator

from callgate import reading
from callgate.checks import bfcl_rules, trajectory
from callgate.checks.trajectory import MISSING, json_equal
from callgate.checks.validation import surely_valid
from callgate.checks.verdict import (
    Problems,
    SchemaKind,
    ToolVerdict,
    Verdict,
)
from callgate.reading import MAX_ARGUMENTS_CHARS
from callgate.suites.environment import (
    Environment,
    EnvironmentError_,
    EnvironmentFactory,
    ScriptedResult,
    call_tool,
    fresh,
    snapshot,
    state_difference,
    state_hash,
)
from callgate.suites.responses import Response, ToolCall
from callgate.suites.suite import (
    DEFAULT_MATCH,
    AnyCall,
    ArgSpec,
    Case,
    ExpectedCall,
    FinalState,
    Judge,
    MatchRules,
    Mode,
    NoCall,
    Trajectory,
)


@dataclass(frozen=True)
class ParsedCall:
    index: int
    name: str
    arguments: dict[str, Any] | None  # None when the raw string is not a JSON object
    json_error: str | None


# --------------------------------------------------------------------------- values


def arg_matches(
    spec: ArgSpec,
    present: bool,
    value: Any,
    rules: MatchRules = DEFAULT_MATCH,
    schema: Mapping[str, Any] | None = None,
) -> bool:
    """`schema` is the parameter's JSON Schema; only `values: bfcl` reads it (declared type)."""
    if not present:
        return spec.optional
    if rules.values == "bfcl":
        return bfcl_rules.param_matches(schema, value, bfcl_rules.possible_answer(spec))
    return any(json_equal(accepted, value) for accepted in spec.one_of)


def _unlisted(expected: ExpectedCall, call: ParsedCall, rules: MatchRules) -> str | None:
    if rules.unlisted_args == "reject":
        for key in call.arguments or {}:
            if key not in expected.args:
                return key
    return None


def call_matches(
    expected: ExpectedCall,
    call: ParsedCall,
    rules: MatchRules = DEFAULT_MATCH,
    schema: Mapping[str, Any] | None = None,
) -> bool:
    """`schema` is the tool's parameters schema (read under `values: bfcl`)."""
    if call.name != expected.tool or call.arguments is None:
        return False
    if _unlisted(expected, call, rules) is not None:
        return False
    args = call.arguments
    properties = (schema or {}).get("properties", {})
    return all(
        arg_matches(spec, key in args, args.get(key), rules, properties.get(key))
        for key, spec in expected.args.items()
    )


def _describe(spec: ArgSpec) -> str:
    if len(spec.one_of) == 1:
        text = json.dumps(spec.one_of[0], ensure_ascii=False)
    else:
        text = "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in spec.one_of)
    return text + (" (or left out)" if spec.optional else "")


def value_mismatch(
    expected: ExpectedCall,
    call: ParsedCall,
    rules: MatchRules = DEFAULT_MATCH,
    schema: Mapping[str, Any] | None = None,
) -> str | None:
    """The first key argument of `call` that does not match, as a sentence; None if all do."""
    args = call.arguments or {}
    unlisted = _unlisted(expected, call, rules)
    if unlisted is not None:
        return f"{call.name}.{unlisted}: not an expected argument (the suite rejects unlisted ones)"
    properties = (schema or {}).get("properties", {})
    for key, spec in expected.args.items():
        present = key in args
        if not arg_matches(spec, present, args.get(key), rules, properties.get(key)):
            got = json.dumps(args[key], ensure_ascii=False) if present else "nothing (left out)"
            return f"{call.name}.{key}: expected {_describe(spec)}, got {got}"
    return None


# --------------------------------------------------------------------------- parsing


def parse_calls(tool_calls: Sequence[ToolCall]) -> list[ParsedCall]:
    parsed = []
    for index, call in enumerate(tool_calls):
        text = call.arguments
        if not text.strip():
            # Several servers send "" for a call without arguments.
            parsed.append(ParsedCall(index, call.name, {}, None))
            continue
        if len(text) > MAX_ARGUMENTS_CHARS:
            parsed.append(ParsedCall(index, call.name, None, (
                f"arguments are {len(text)} characters long; callgate reads at most "
                f"{MAX_ARGUMENTS_CHARS}")))
            continue
        try:
            value = reading.loads(text)
        except json.JSONDecodeError as exc:
            parsed.append(ParsedCall(index, call.name, None, f"{exc.msg} at character {exc.pos}"))
            continue
        except reading.JSONLimitError as exc:  # too deep, NaN: refused, never a crash
            where = f" at character {exc.pos}" if exc.pos is not None else ""
            field = f" ({exc.field})" if exc.field else ""
            parsed.append(ParsedCall(index, call.name, None, f"{exc.message}{field}{where}"))
            continue
        if isinstance(value, dict):
            parsed.append(ParsedCall(index, call.name, value, None))
        else:
            parsed.append(
                ParsedCall(
                    index, call.name, None, f"arguments are {type(value).__name__}, not an object"
                )
            )
    return parsed


# --------------------------------------------------------------------------- schema

_KIND_ORDER: dict[SchemaKind, int] = {
    "missing_required": 0,
    "wrong_type": 1,
    "bad_enum": 2,
    "unknown_param": 3,
    "other": 4,
}
_JSON_TYPE = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def _declares_extras(schema: Mapping[str, Any]) -> bool:
    """True when the schema deliberately accepts parameters beyond `properties`."""
    extra = schema.get("additionalProperties")
    return isinstance(extra, dict) or "patternProperties" in schema


def schema_errors(
    tool: str, schema: Mapping[str, Any], validator: Draft7Validator, args: dict[str, Any]
) -> list[tuple[SchemaKind, str]]:
    """All schema problems of one call's arguments, most basic first."""
    problems: list[tuple[SchemaKind, str]] = []
    properties = schema.get("properties", {})
    if not _declares_extras(schema):
        for key in args:
            if key not in properties:
                problems.append(("unknown_param", f"{tool}: {key!r} is not a parameter of {tool}"))
    if not problems and surely_valid(validator, args):
        return problems  # the compiled fast path; jsonschema explains only failing calls
    for error in validator.iter_errors(args):
        path = ".".join(str(p) for p in error.absolute_path)
        where = f"{tool}.{path}" if path else tool
        if error.validator == "additionalProperties" and not error.absolute_path:
            continue  # reported above, whatever the schema says about additionalProperties
        if error.validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else error.message
            problems.append(("missing_required", f"{where}: missing required argument {missing!r}"))
        elif error.validator == "type":
            got = _JSON_TYPE.get(type(error.instance), type(error.instance).__name__)
            shown = json.dumps(error.instance, ensure_ascii=False)[:60]
            problems.append(
                ("wrong_type", f"{where}: expected {error.validator_value}, got {got} {shown}")
            )
        elif error.validator in ("enum", "const"):
            problems.append(("bad_enum", f"{where}: {error.message}"))
        elif error.validator == "additionalProperties":
            problems.append(("unknown_param", f"{where}: {error.message}"))
        else:
            problems.append(("other", f"{where}: {error.message}"))
    problems.sort(key=lambda p: _KIND_ORDER[p[0]])
    return problems


# --------------------------------------------------------------------------- tool selection


def select_tools(
    names: Sequence[str], expected: Sequence[ExpectedCall], mode: Mode
) -> tuple[ToolVerdict, str]:
    """Tool verdict over the whole array of called names against one expected call list."""
    want = Counter(call.tool for call in expected)
    wanted = " + ".join(f"{n}×{c}" if c > 1 else n for n, c in want.items())
    if not names:
        return "missing_call", f"no tool call; expected {wanted}"
    got = Counter(names)
    if mode != "superset" and names[0] not in want:
        return "wrong_tool", f"called {names[0]}; expected {wanted}"
    if mode != "superset":
        for index, name in enumerate(names):
            if name not in want:
                return "extra_call", (
                    f"call {index + 1} is {name}, which is outside the expectation ({wanted})"
                )
    for name, count in want.items():
        if got[name] < count and mode != "subset":
            return "missing_call", f"{got[name]} call(s) to {name} where {count} are expected"
        if got[name] > count and mode in ("strict", "unordered", "subset"):
            return "extra_call", f"{got[name]} calls to {name} where {count} are expected"
    return "right", ""


# --------------------------------------------------------------------------- pairing


def first_fit_pairing(edges: Sequence[Sequence[int]]) -> list[int | None]:
    """Each left i, in order, takes the first right index still free (BFCL pairs this way)."""
    taken: set[int] = set()
    pairing: list[int | None] = []
    for options in edges:
        right = next((j for j in options if j not in taken), None)
        if right is not None:
            taken.add(right)
        pairing.append(right)
    return pairing


def check_values(
    expected: Sequence[ExpectedCall],
    calls: Sequence[ParsedCall],
    mode: Mode,
    rules: MatchRules = DEFAULT_MATCH,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
) -> str | None:
    """None when the key arguments pair up as the mode requires; else the first mismatch."""
    schemas = schemas or {}
    edges = [
        [j for j, call in enumerate(calls) if call_matches(exp, call, rules, schemas.get(exp.tool))]
        for exp in expected
    ]
    if rules.pairing == "first_fit":
        pairing = first_fit_pairing(edges)
    else:
        # Optimal, not greedy: a call is never paired away from the one it alone can match.
        matched = trajectory.max_matching(
            range(len(edges)), range(len(calls)), lambda e, j: j in edges[e]
        )
        pairing = [matched.get(e) for e in range(len(edges))]
    used = {j for j in pairing if j is not None}
    if mode == "subset":
        # Every call made must match a distinct expected call; left-out ones are fine.
        unmatched_calls = [call for j, call in enumerate(calls) if j not in used]
        if not unmatched_calls:
            return None
        call = unmatched_calls[0]
        candidates = [exp for exp in expected if exp.tool == call.name]
        found = (
            value_mismatch(candidates[0], call, rules, schemas.get(call.name))
            if candidates
            else None
        )
        return found or f"call {call.index + 1} ({call.name}) matches no expected call"
    for exp, j in zip(expected, pairing, strict=True):
        if j is not None:
            continue
        same_name = [c for k, c in enumerate(calls) if c.name == exp.tool and k not in used] or [
            c for c in calls if c.name == exp.tool
        ]
        if same_name:
            return (
                value_mismatch(exp, same_name[0], rules, schemas.get(exp.tool))
                or f"{exp.tool}: arguments do not match"
            )
        return f"{exp.tool}: no matching call"
    return None


# --------------------------------------------------------------------------- tool results


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


def schema_problem(
    call: ParsedCall,
    schemas: Mapping[str, Mapping[str, Any]],
    validators: Mapping[str, Draft7Validator],
) -> str | None:
    """Why a call's arguments cannot be run, as the error a real API answers with; else None."""
    if call.arguments is None:
        return f"arguments are not valid JSON: {call.json_error}"
    if call.name not in validators:
        return None
    found = schema_errors(call.name, schemas[call.name], validators[call.name], call.arguments)
    if not found:
        return None
    return "arguments do not match the schema: " + "; ".join(message for _, message in found)


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
class _Run:
    """The calls run on a fresh environment: the final state, and which calls changed it."""

    state: dict[str, Any]
    changed: tuple[str, ...]  # names of the calls after which the state was different


def _run_calls(
    factory: EnvironmentFactory,
    initial: Mapping[str, Any],
    calls: Sequence[tuple[str, Any]],
    track: bool,
) -> _Run:
    env = fresh(factory, initial)
    changed: list[str] = []
    before = snapshot(env) if track else None
    for name, run in calls:
        run(env)
        if track:
            after = snapshot(env)
            if state_difference(before, after) is not None:
                changed.append(name)
            before = after
    return _Run(snapshot(env), tuple(changed))


def _agent_run(
    factory: EnvironmentFactory, case: Case, calls: Sequence[ParsedCall],
    schemas: Mapping[str, Mapping[str, Any]], validators: Mapping[str, Draft7Validator],
    track: bool,
) -> _Run:
    # Tool results do not change the state, so the calls can be run without the turns between.
    offered = case.offered_names(schemas)
    steps = [
        (call.name, lambda env, call=call: answer_call(env, call, offered, schemas, validators))
        for call in calls
    ]
    return _run_calls(factory, case.state or {}, steps, track)


def _reference_run(factory: EnvironmentFactory, case: Case, expect: FinalState) -> _Run:
    steps = [
        (call.tool, lambda env, call=call: call_tool(env, call.tool, call.args))
        for call in expect.calls
    ]
    return _run_calls(factory, case.state or {}, steps, track=True)


# --------------------------------------------------------------------------- trajectories


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
        return _describe(self.spec)  # JSON values, as in every other reason


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
) -> trajectory.TrajectoryResult:
    """The trajectory comparison of the calls made (step = turn index) with the expectation."""
    schemas = schemas or {}
    actual = [
        trajectory.Call(call.name, call.arguments or {}, steps[call.index]) for call in calls
    ]
    reference = []
    for call in expect.calls:
        properties = schemas.get(call.tool, {}).get("properties", {})
        arguments = {
            key: _Accepts(spec, rules, properties.get(key)) for key, spec in call.args.items()
        }
        reference.append(trajectory.ExpectedCall(call.tool, arguments, call.step))
    if names_only:
        return trajectory.match_trajectory(actual, reference, expect.mode, args="ignore")
    return trajectory.match_trajectory(
        actual,
        reference,
        expect.mode,
        args=expect.args,
        per_tool=expect.per_tool,
        value_match=_accepts,
    )


def trajectory_tool_verdict(result: trajectory.TrajectoryResult) -> ToolVerdict:
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


def _count_text(counts: Counter[str]) -> str:
    return " + ".join(f"{name}×{n}" if n > 1 else name for name, n in sorted(counts.items()))


def _state_tool_verdict(
    calls: Sequence[ParsedCall], expect: FinalState, agent: _Run, reference: _Run
) -> tuple[ToolVerdict, str]:
    """When the final states differ: compare the calls to the tools that change the state."""
    state_tools = set(agent.changed) | set(reference.changed)
    got = Counter(call.name for call in calls if call.name in state_tools)
    want = Counter(call.tool for call in expect.calls if call.tool in state_tools)
    missing, extra = want - got, got - want
    if not calls:
        return "missing_call", f"no tool call; the reference calls {_count_text(want)}"
    if missing and extra:
        return "wrong_tool", (
            f"called {_count_text(got) or 'nothing that changes the state'} where the "
            f"reference calls {_count_text(want)}"
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


# --------------------------------------------------------------------------- the verdict


def _argument_problems(
    calls: Sequence[ParsedCall],
    schemas: Mapping[str, Mapping[str, Any]],
    validators: Mapping[str, Draft7Validator],
) -> Problems:
    for call in calls:
        if call.json_error is not None:
            return (
                "invalid_json",
                None,
                (
                    f"call {call.index + 1} ({call.name}): arguments are not valid JSON: "
                    f"{call.json_error}"
                ),
            )
    found: list[tuple[SchemaKind, str]] = []
    for call in calls:
        if call.name in validators:
            found.extend(
                schema_errors(
                    call.name, schemas[call.name], validators[call.name], call.arguments or {}
                )
            )
    if found:
        found.sort(key=lambda p: _KIND_ORDER[p[0]])
        kind, message = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        return "schema_violation", kind, message + more
    return None


def check_response(
    case: Case,
    response: Response,
    schemas: Mapping[str, Mapping[str, Any]],
    validators: Mapping[str, Draft7Validator],
    *,
    rules: MatchRules = DEFAULT_MATCH,
    environment: EnvironmentFactory | None = None,
) -> Verdict:
    """Decide one attempt. `schemas`/`validators` map tool name to parameters and validator;
    `rules` are the suite's match rules; `environment` is the suite's, if it names one.

    The calls of a multi-turn attempt are every call of every turn, in order."""
    base = {"case_id": response.case_id, "repeat": response.repeat}
    if response.error is not None:
        return Verdict(
            **base,
            status="provider_error",
            tool_reason=f"provider error ({response.error.kind}): {response.error.message}".rstrip(
                ": "
            ),
        )
    hit_limit = response.finish_reason == "turn_limit"
    if response.turns is None:
        message = response.message
        calls = parse_calls(message.tool_calls) if message is not None else []
        steps = [0] * len(calls)
    else:
        # The loop stops after max_turns turns: a model still calling tools then hit the limit,
        # and turns recorded beyond it were never sent.
        turns = response.turns[: case.max_turns]
        hit_limit = hit_limit or (len(turns) == case.max_turns and bool(turns[-1].tool_calls))
        steps = [step for step, turn in enumerate(turns) for _ in turn.tool_calls]
        calls = parse_calls([call for turn in turns for call in turn.tool_calls])
    if response.finish_reason == "length":
        return Verdict(
            **base,
            status="truncated",
            calls=len(calls),
            tool_reason="the response was cut off (finish_reason length); "
            "not counted as an argument error",
        )
    names = [call.name for call in calls]
    problems = _argument_problems(calls, schemas, validators)
    expect = case.expect

    agent_run: _Run | None = None
    failure: str | None = None  # why the environment failed, if it did
    if environment is not None:
        # Run the calls again: the environment failing on them is the environment's fault.
        try:
            agent_run = _agent_run(
                environment, case, calls, schemas, validators,
                track=isinstance(expect, FinalState),
            )
        except EnvironmentError_ as exc:
            failure = str(exc)
    if failure is None and response.finish_reason == "environment_error":  # set by the live loop
        failure = "the environment failed during the run"
    if failure is not None and problems is None:
        # Only schema-valid calls are ever run, so the failure is not the model's. A JSON or
        # schema problem, though, is the model's whatever the environment did: it is scored.
        return Verdict(
            **base,
            status="environment_error",
            calls=len(calls),
            tool_reason=f"environment error, not the model's: {failure}",
        )

    if hit_limit:
        args_verdict, kind, reason = problems or ("not_applicable", None, "")
        return Verdict(
            **base,
            status="scored",
            calls=len(calls),
            tool="turn_limit",
            tool_reason=f"still calling tools at turn {case.max_turns} of max_turns "
            f"{case.max_turns}",
            arguments=args_verdict,
            schema_kind=kind,
            arguments_reason=reason,
        )

    if isinstance(expect, Judge):
        args_verdict, kind, reason = problems or (None, None, "")
        return Verdict(
            **base,
            status="pending_judge",
            calls=len(calls),
            tool_reason="waiting for the judge",
            arguments=args_verdict,
            schema_kind=kind,
            arguments_reason=reason,
        )

    if isinstance(expect, NoCall):
        if not calls:
            return Verdict(
                **base,
                status="scored",
                tool="right",
                arguments="not_applicable",
                right_tool=True,
                right_arguments=True,
            )
        args_verdict, kind, reason = problems or ("not_applicable", None, "")
        return Verdict(
            **base,
            status="scored",
            calls=len(calls),
            tool="unexpected_call",
            tool_reason=f"no call was expected; called {', '.join(names)}",
            arguments=args_verdict,
            schema_kind=kind,
            arguments_reason=reason,
        )

    if isinstance(expect, AnyCall):
        # Any call is right; only arguments that cannot be read as a JSON object count against.
        broken = problems if problems is not None and problems[0] == "invalid_json" else None
        args_verdict, kind, reason = broken or ("not_applicable", None, "")
        return Verdict(
            **base,
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

    if isinstance(expect, Trajectory):
        return _trajectory_verdict(base, expect, calls, steps, problems, rules, schemas)

    if isinstance(expect, FinalState):
        if environment is None:
            raise ValueError(f"case {case.id}: a final_state expectation needs the environment")
        if agent_run is None:  # the environment failed, and the arguments fail anyway
            return _unknown_state_verdict(base, environment, case, expect, calls, problems,
                                          failure or "")
        try:
            reference = _reference_run(environment, case, expect)
        except EnvironmentError_ as exc:
            return Verdict(
                **base,
                status="environment_error",
                calls=len(calls),
                tool_reason=f"environment error, not the model's (reference replay): {exc}",
            )
        return _final_state_verdict(base, expect, calls, problems, agent_run, reference)

    alternatives = case.expected_call_lists()
    mode = expect.mode
    outcomes: list[tuple[int, ToolVerdict, str, str | None]] = []
    for index, expected in enumerate(alternatives):
        tool_verdict, tool_reason = select_tools(names, expected, mode)
        mismatch = (
            check_values(expected, calls, mode, rules, schemas) if tool_verdict == "right" else None
        )
        outcomes.append((index, tool_verdict, tool_reason, mismatch))
    # Best alternative: right tool and values first, then right tool, then the first listed.
    index, tool_verdict, tool_reason, mismatch = min(
        outcomes, key=lambda o: (o[1] != "right", o[3] is not None, o[0])
    )
    if tool_verdict != "right" and len(alternatives) > 1:
        tool_reason = f"none of {len(alternatives)} listed answers matches; first: {tool_reason}"
    return scored_verdict(base, len(calls), tool_verdict, tool_reason, problems,
                          lambda: mismatch)


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
        wanted = _count_text(Counter(call.tool for call in expect.calls))
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
        changed = _reference_run(environment, case, expect).changed
    except EnvironmentError_:
        changed = tuple(call.tool for call in expect.calls)
    reference = _Run({}, changed)
    tool_verdict, tool_reason = _state_tool_verdict(calls, expect, _Run({}, ()), reference)
    unknown = f"the final state is unknown (environment error: {failure})"
    tool_reason = f"{tool_reason}; {unknown}" if tool_reason else unknown
    return scored_verdict(base, len(calls), tool_verdict, tool_reason, problems, lambda: None)


def _final_state_verdict(
    base: dict[str, Any],
    expect: FinalState,
    calls: Sequence[ParsedCall],
    problems: Problems,
    agent: _Run,
    reference: _Run,
) -> Verdict:
    got_hash, want_hash = state_hash(agent.state), state_hash(reference.state)
    difference = state_difference(reference.state, agent.state)
    if difference is None:
        tool_verdict: ToolVerdict = "right"
        tool_reason = ""
        state_reason = f"final state {got_hash[:12]}, as the reference's"
    else:
        tool_verdict, tool_reason = _state_tool_verdict(calls, expect, agent, reference)
        state_reason = (
            f"final state {got_hash[:12]} is not the reference's {want_hash[:12]}: {difference}"
        )
    if tool_verdict != "right":
        tool_reason = f"{tool_reason}; {state_reason}"
    return scored_verdict(
        base, len(calls), tool_verdict, tool_reason, problems,
        lambda: None if difference is None else state_reason, right_reason=state_reason,
        state_hash=got_hash,
    )
