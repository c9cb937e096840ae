"""Responses built from BFCL's possible answers: right by construction (for tests and
benchmarks that compare callgate's verdicts with BFCL's)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from callgate.checks import bfcl_types
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
    argument, leaving out the ones that may be left out (unless the doc requires them). A Java
    or JavaScript parameter gets the value written in that language, as the model sends it."""
    parameters = suite.tools[call.tool].function.parameters
    required = set(parameters.get("required", []))
    properties = parameters.get("properties", {})
    sources = suite.match.source_types.get(call.tool, {})
    args: dict[str, Any] = {}
    for key, spec in call.args.items():
        if spec.optional and key not in required:
            continue
        source = sources.get(key)
        if source is None:
            args[key] = first_value(properties.get(key), spec)
        else:
            args[key] = source_text(source, _first_of_type(source, spec))
    return args


def _first_of_type(source: Mapping[str, str], spec: ArgSpec) -> Any:
    value = spec.one_of[0]
    declared = bfcl_types.TYPES[source["language"]].get(source["type"])
    if declared is dict and isinstance(value, dict):
        return _first_object(value)
    return value


def source_text(source: Mapping[str, str], value: Any) -> str:
    """`value` as Java or JavaScript source text that BFCL's converter for the parameter's
    declared type reads back as `value` (for tests and benchmarks; see `bfcl_types`)."""
    kind, items = source["type"], source.get("items")
    if source["language"] == "java":
        return _java_text(kind, items, value)
    return _js_text(kind, items, value)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def _quoted(value: Any) -> str:
    """An item or entry: text in double quotes, anything else as a scalar."""
    return json.dumps(value) if isinstance(value, str) else _scalar(value)


def _java_text(kind: str, items: str | None, value: Any) -> str:
    if kind == "long":
        return f"{value}L"
    if kind == "float":
        return f"{value}f"
    if kind == "Array" and isinstance(value, list):
        # The items are converted by their type, a String's quotes kept: so none are written.
        listed = ", ".join(_java_text(items or "any", None, v) for v in value)
        return "new Object[]{" + listed + "}"
    if kind == "ArrayList" and isinstance(value, list):
        if items in ("String", "char"):  # these items lose their first and last character
            listed = ", ".join(json.dumps(v) for v in value)
        else:
            listed = ", ".join(_java_text(items or "any", None, v) for v in value)
        return f"new ArrayList<>(Arrays.asList({listed}))"
    if kind == "HashMap" and isinstance(value, dict):
        puts = "".join(f"put({json.dumps(k)}, {_quoted(v)}); " for k, v in value.items())
        return "new HashMap<String, Object>() {{ " + puts + "}}"
    return _scalar(value)


def _js_text(kind: str, items: str | None, value: Any) -> str:
    if kind == "Bigint":
        return f"{value}n"
    if kind == "array" and isinstance(value, list):
        return "[" + ", ".join(_quoted(v) for v in value) + "]"
    if kind == "dict" and isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_quoted(v)}" for k, v in value.items()) + "}"
    return _scalar(value)


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
