"""Responses built from BFCL's possible answers: right by construction (for tests and
benchmarks that compare callgate's verdicts with BFCL's)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from callgate.checks.bfcl_rules import declared_type
from callgate.suites.suite import ArgSpec, Case, ExpectedCall, Suite


def first_value(schema: Mapping[str, Any] | None, spec: ArgSpec) -> Any:
    """The first acceptable value, made concrete: BFCL's object answers list acceptable values
    per key, so an object (or a list of objects) is built from the first of each key's values,
    leaving out keys that may be left out."""
    value = spec.one_of[0]
    expected = declared_type(schema)
    items = schema.get("items") if isinstance(schema, Mapping) else None
    if expected is dict and isinstance(value, dict):
        return _first_object(value)
    if expected is list and declared_type(items) is dict and isinstance(value, list):
        return [_first_object(v) if isinstance(v, dict) else v for v in value]
    return value


def _first_object(pattern: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, values in pattern.items():
        if not isinstance(values, list) or "" in values or not values:
            continue
        out[key] = values[0]
    return out


def answer_arguments(suite: Suite, call: ExpectedCall) -> dict[str, Any]:
    """Arguments built from the possible answers: the first acceptable value of each key
    argument, leaving out the ones that may be left out (unless the doc requires them)."""
    parameters = suite.tools[call.tool].function.parameters
    required = set(parameters.get("required", []))
    properties = parameters.get("properties", {})
    args: dict[str, Any] = {}
    for key, spec in call.args.items():
        if spec.optional and key not in required:
            continue
        args[key] = first_value(properties.get(key), spec)
    return args


def message(calls: Sequence[tuple[str, Mapping[str, Any] | str]]) -> dict[str, Any]:
    """A bare assistant message making these calls (arguments as objects or raw strings)."""
    if not calls:
        return {"role": "assistant", "content": "I cannot help with that using these tools."}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for index, (name, args) in enumerate(calls)
        ],
    }


def answer_message(suite: Suite, case: Case) -> dict[str, Any]:
    """The response BFCL's possible answers describe: right by construction."""
    expect = case.expect
    if expect.type == "no_call":
        return message([])
    if expect.type == "any_call":
        offered = suite.offered_tools(case)
        return message([(offered[0]["function"]["name"] if offered else "any_tool", {})])
    calls = case.expected_call_lists()[0]
    sent = case.sent_names()
    return message([(sent.get(c.tool, c.tool), answer_arguments(suite, c)) for c in calls])


def answer_lines(suite: Suite) -> Iterator[str]:
    """Recorded-response lines (JSON) answering every case of an imported suite."""
    for case in suite.cases.values():
        yield json.dumps({"case_id": case.id, "response": answer_message(suite, case)})
