"""The cross-checks of a case against its suite that pydantic cannot do alone: tools named
exist and are offered, key arguments can pass the schema, a multi-turn case has what it needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator

from callgate.errors import InputError
from callgate.reading import validate
from callgate.suites import bfcl_environment as bfcl
from callgate.suites.cases import (
    DEFAULT_MATCH,
    BfclMultiTurn,
    Case,
    ExpectedCall,
    FinalState,
    MatchRules,
    OfferedAs,
    ReferenceCall,
    Tool,
    Trajectory,
)
from callgate.suites.environment import EnvironmentError_, EnvironmentFactory, replay
from callgate.suites.matchers import EVERY_KEYWORD, JSON_TYPES, Matcher


def _check_call(
    path: Path,
    line: int,
    call: ExpectedCall,
    where: str,
    tools: dict[str, Tool],
    validators: dict[str, Draft7Validator],
    offered: set[str] | None,
) -> None:
    """The tool exists (and is offered, when `offered` is given); key arguments can pass."""
    if call.tool not in tools:
        raise InputError(path, f"unknown tool {call.tool!r}", line=line, field=f"{where}.tool")
    if offered is not None and call.tool not in offered:
        raise InputError(
            path,
            f"tool {call.tool!r} is expected but not offered in this case",
            line=line,
            field=f"{where}.tool",
        )
    properties = tools[call.tool].function.parameters.get("properties", {})
    for key, spec in call.args.items():
        if key not in properties:
            raise InputError(
                path,
                f"{key!r} is not a parameter of {call.tool}",
                line=line,
                field=f"{where}.args.{key}",
            )
        # The validator's own schema: reduced under `match.schema` "top_level".
        checked = validators[call.tool].schema.get("properties", {})
        prop_validator = validators[call.tool].evolve(schema=checked.get(key, {}))
        if spec.matcher is not None:
            _check_matcher(path, line, spec.matcher, prop_validator, f"{where}.args.{key}")
        for value in spec.one_of:
            error = next(iter(prop_validator.iter_errors(value)), None)
            if error is not None:
                raise InputError(
                    path,
                    f"expected value {value!r} can never pass the schema: {error.message}",
                    line=line,
                    field=f"{where}.args.{key}",
                )


# Keywords that never reject a value: left out when asking which constraints a schema has.
ANNOTATIONS = frozenset({
    "$comment", "$id", "$schema", "contentEncoding", "contentMediaType", "default",
    "definitions", "$defs", "description", "examples", "readOnly", "title", "writeOnly",
})


# Keywords that only ever reject a value of one type (Draft 7).
_ONE_TYPE: dict[str, frozenset[str]] = {
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                         "multipleOf"}),
    "array": frozenset({"items", "additionalItems", "minItems", "maxItems", "uniqueItems",
                        "contains"}),
    "object": frozenset({"properties", "patternProperties", "additionalProperties", "required",
                         "minProperties", "maxProperties", "dependencies", "propertyNames"}),
}


def constraints(schema: Mapping[str, Any], types: frozenset[str]) -> set[str]:
    """The keywords of `schema` that can reject a value of one of `types`."""
    found = set(schema) - ANNOTATIONS
    for kind, keywords in _ONE_TYPE.items():
        if kind not in types and (kind != "number" or "integer" not in types):
            found -= keywords
    return found


@dataclass(frozen=True)
class Feasible:
    """suite check's finding on one matcher against one property's schema: a `witness` (a
    schema-valid value it matches, when `found`), a `refusal` (why none can be), or neither
    (undecided: the value is accepted)."""

    found: bool = False
    witness: Any = None
    refusal: str | None = None


def feasibility(matcher: Matcher, validator: Any) -> Feasible:
    """Whether some value the property's validator takes can match."""
    schema = validator.schema
    if schema is False:
        return Feasible(refusal="the schema takes no value")
    if not isinstance(schema, Mapping):
        schema = {}
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else set(declared or JSON_TYPES)
    if not types & matcher.value_types():
        return Feasible(refusal=f"it matches only {_types(matcher.value_types())}, and the "
                        f"schema takes only {_types(types)}")
    if "const" in schema or "enum" in schema:
        allowed = [schema["const"]] if "const" in schema else list(schema["enum"] or ())
        for value in allowed:
            if validator.is_valid(value) and matcher.matches(value):
                return Feasible(found=True, witness=value)
        return Feasible(refusal="it matches none of the values the schema's " + (
            "const" if "const" in schema else "enum") + " allows")
    search = matcher.search(schema)
    first_error = None
    for value in search.candidates:
        if not matcher.matches(value):
            continue
        error = next(iter(validator.iter_errors(value)), None)
        if error is None:
            return Feasible(found=True, witness=value)
        first_error = first_error or error.message
    decided = search.complete is not None and (
        search.complete is EVERY_KEYWORD
        or constraints(schema, matcher.value_types()) <= search.complete)
    if not decided:
        return Feasible()
    return Feasible(refusal="no value it matches passes the schema"
                    + (f" ({first_error})" if first_error else ""))


def _types(types: set[str] | frozenset[str]) -> str:
    return " or ".join(sorted(types))


def _check_matcher(path: Path, line: int, matcher: Matcher, validator: Draft7Validator,
                   where: str) -> None:
    refusal = feasibility(matcher, validator).refusal
    if refusal is not None:
        raise InputError(
            path, f"{matcher.describe()} can never match: {refusal}", line=line, field=where)


def _no_matchers(path: Path, line: int, case: Case) -> None:
    """Under `values: bfcl` a key argument is BFCL's list of acceptable values."""
    for alt_index, calls in enumerate(case.expected_call_lists()):
        for call_index, call in enumerate(calls):
            for key, spec in call.args.items():
                if spec.matcher is not None:
                    prefix = ("expect.calls" if case.expect.type == "calls"
                              else f"expect.alternatives[{alt_index}]")
                    raise InputError(
                        path, f"a {spec.matcher.KEY} matcher is not read under the suite's "
                        "match values \"bfcl\", which compares listed values only", line=line,
                        field=f"{prefix}[{call_index}].args.{key}")


def _check_faults(path: Path, line: int, case: Case, offered: set[str]) -> None:
    """A case's fault rules and its fallback name tools it offers."""
    for index, rule in enumerate(case.faults or ()):
        if rule.tool != "*" and rule.tool not in offered:
            raise InputError(path, f"{rule.tool!r} is not a tool this case offers (a "
                             "catalogue name, or * for every tool)", line=line,
                             field=f"faults[{index}].tool")
    fallback = case.after_fault.fallback if case.after_fault is not None else None
    if fallback is not None and fallback not in offered:
        raise InputError(path, f"{fallback!r} is not a tool this case offers", line=line,
                         field="after_fault.fallback")


def check_case(
    path: Path,
    line: int,
    case: Case,
    tools: dict[str, Tool],
    validators: dict[str, Draft7Validator],
    environment: EnvironmentFactory | None = None,
    rules: MatchRules = DEFAULT_MATCH,
) -> None:
    """Cross-checks pydantic cannot do alone: tool names and key arguments against the schema,
    and what a multi-turn case needs from its suite."""
    if rules.values == "bfcl":
        _no_matchers(path, line, case)
    offered = case.offered_names(tools)
    sent: set[str] = set()
    for index, (key, entry) in enumerate(zip(case.tool_keys() or (), case.tools or (),
                                             strict=True)):
        where = f"tools[{index}]" if isinstance(entry, str) else f"tools[{index}].tool"
        if key not in tools:
            raise InputError(path, f"unknown tool {key!r}", line=line, field=where)
        name = entry.name if isinstance(entry, OfferedAs) else key
        if name in sent:
            raise InputError(path, f"two tools offered as {name!r}", line=line,
                             field=f"tools[{index}]")
        sent.add(name)
    if case.user_turns is not None:
        _check_added_tools(path, line, case, tools, sent)
    _check_faults(path, line, case, offered)
    for alt_index, calls in enumerate(case.expected_call_lists()):
        prefix = (
            "expect.calls" if case.expect.type == "calls" else f"expect.alternatives[{alt_index}]"
        )
        for call_index, call in enumerate(calls):
            _check_call(
                path, line, call, f"{prefix}[{call_index}]", tools, validators, offered
            )
    expect = case.expect
    if isinstance(expect, Trajectory):
        _check_trajectory(path, line, expect, tools, validators, offered)
    if case.tool_results is not None:
        if environment is not None:
            raise InputError(
                path,
                "a case gets its tool results from the suite's environment or from "
                "tool_results, not both",
                line=line,
                field="tool_results",
            )
        for index, scripted in enumerate(case.tool_results):
            _check_call(path, line, scripted, f"tool_results[{index}]", tools, validators, None)
    if case.state is not None and environment is None:
        raise InputError(
            path,
            "a state needs an environment: name one in suite.json (\"environment\": "
            "\"module:Class\")",
            line=line,
            field="state",
        )
    if isinstance(expect, FinalState):
        _check_final_state(path, line, case, expect, tools, validators, offered, environment)
    if isinstance(expect, BfclMultiTurn):
        _check_bfcl_multi_turn(path, line, case, expect, environment)


def _check_bfcl_multi_turn(path: Path, line: int, case: Case, expect: BfclMultiTurn,
                           environment: EnvironmentFactory | None) -> None:
    """A BFCL multi-turn case: BFCL's environment, its state, one list of ground-truth calls
    per user turn, each a call BFCL's way."""
    if not isinstance(environment, bfcl.BfclEnvironments):
        raise InputError(path, "a bfcl_multi_turn expectation needs BFCL's environment in "
                         "suite.json (\"environment\": {\"bfcl\": WHEEL, \"sha256\": ...})",
                         line=line, field="expect")
    validate(bfcl.BfclState, case.state or {}, path, line=line, prefix="state.")
    turns = 1 + len(case.user_turns or ())
    if len(expect.ground_truth) != turns:
        raise InputError(path, f"{len(expect.ground_truth)} turns of ground truth for {turns} "
                         "user turns", line=line, field="expect.ground_truth")
    for turn, calls in enumerate(expect.ground_truth):
        for index, text in enumerate(calls):
            try:
                bfcl.parse_source_call(text)
            except ValueError as exc:
                raise InputError(path, str(exc), line=line,
                                 field=f"expect.ground_truth[{turn}][{index}]") from None


def _check_added_tools(path: Path, line: int, case: Case, tools: dict[str, Tool],
                       sent: set[str]) -> None:
    """A later user turn adds catalogue tools the case does not offer yet, under their names
    (or `{"tool": KEY, "name": SENT}`, as in `tools`)."""
    for turn_index, turn in enumerate(case.user_turns or ()):
        for index, (name, entry) in enumerate(zip(turn.added_keys(), turn.add_tools,
                                                  strict=True)):
            where = f"user_turns[{turn_index}].add_tools[{index}]"
            if name not in tools:
                raise InputError(path, f"unknown tool {name!r}", line=line, field=where)
            sent_as = entry.name if isinstance(entry, OfferedAs) else name
            if case.tools is None:
                raise InputError(path, "the case offers every catalogue tool (it has no "
                                 "`tools`), so a user turn has none to add", line=line,
                                 field=where)
            if sent_as in sent or name in (case.tool_keys() or ()):
                raise InputError(path, f"tool {sent_as!r} is offered already", line=line,
                                 field=where)
            sent.add(sent_as)


def _check_trajectory(
    path: Path,
    line: int,
    expect: Trajectory,
    tools: dict[str, Tool],
    validators: dict[str, Draft7Validator],
    offered: set[str],
) -> None:
    for name in expect.per_tool:
        if name not in tools:
            raise InputError(
                path, f"unknown tool {name!r}", line=line, field=f"expect.per_tool.{name}"
            )
    for index, call in enumerate(expect.calls):
        where = f"expect.calls[{index}]"
        _check_call(path, line, call, where, tools, validators, offered)
        if expect.per_tool.get(call.tool, expect.args) != "exact":
            continue
        # Compared exactly, a call must carry every required argument: list them all.
        required = tools[call.tool].function.parameters.get("required", [])
        left_out = [key for key in required if key not in call.args]
        if left_out:
            raise InputError(
                path,
                f"arguments are compared exactly, but the required {left_out[0]!r} is not "
                "listed, so no valid call can match",
                line=line,
                field=f"{where}.args",
            )


def _reference_calls(path: Path, line: int, case: Case, expect: FinalState
                     ) -> list[tuple[str, ReferenceCall, int | None]]:
    """Each reference call with where it is written and its user turn (None: not by turn)."""
    if expect.per_turn is None:
        return [(f"expect.calls[{index}]", call, None) for index, call in enumerate(expect.calls)]
    user_turns = 1 + len(case.user_turns or ())
    if len(expect.per_turn) != user_turns:
        raise InputError(path, f"per_turn lists {len(expect.per_turn)} user turns, but the case "
                         f"has {user_turns} (messages and its user_turns)", line=line,
                         field="expect.per_turn")
    return [(f"expect.per_turn[{turn}][{index}]", call, turn)
            for turn, calls in enumerate(expect.per_turn) for index, call in enumerate(calls)]


def _check_final_state(
    path: Path,
    line: int,
    case: Case,
    expect: FinalState,
    tools: dict[str, Tool],
    validators: dict[str, Draft7Validator],
    offered: set[str],
    environment: EnvironmentFactory | None,
) -> None:
    if environment is None:
        raise InputError(
            path,
            "a final_state expectation needs an environment: name one in suite.json "
            "(\"environment\": \"module:Class\")",
            line=line,
            field="expect",
        )
    if getattr(environment, "reads_state", True) is False:
        raise InputError(
            path,
            "a final_state expectation needs the MCP server's state: name the tool that reads "
            "it in suite.json (\"environment\": {\"mcp\": ..., \"state\": TOOL})",
            line=line,
            field="expect",
        )
    if case.state is None:
        raise InputError(
            path, "a final_state expectation needs the case's initial state", line=line,
            field="state",
        )
    for where, call, turn in _reference_calls(path, line, case, expect):
        if call.tool not in tools:
            raise InputError(path, f"unknown tool {call.tool!r}", line=line, field=f"{where}.tool")
        if call.tool not in (offered if turn is None else case.offered_names(tools, turn)):
            raise InputError(
                path,
                f"tool {call.tool!r} is called by the reference but not offered in this case"
                + ("" if turn is None else f" by user turn {turn + 1}"),
                line=line,
                field=f"{where}.tool",
            )
        error = next(iter(validators[call.tool].iter_errors(call.args)), None)
        if error is not None:
            at = ".".join(str(p) for p in error.absolute_path)
            raise InputError(
                path,
                f"the reference call does not pass the schema: {error.message}",
                line=line,
                field=f"{where}.args" + (f".{at}" if at else ""),
            )
    try:
        replay(environment, case.state, [(call.tool, call.args) for call in expect.calls])
    except EnvironmentError_ as exc:
        raise InputError(
            path,
            f"replaying the reference calls fails in the environment: {exc}",
            line=line,
            field="expect.calls",
        ) from None
