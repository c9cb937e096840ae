"""JSON Schema (Draft 7) problems of a call's arguments, in the order a person fixes them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jsonschema import Draft7Validator

from callgate.checks.parsing import ParsedCall
from callgate.checks.validation import explaining_validator, surely_valid
from callgate.checks.verdict import Problems, SchemaKind

_JSON_TYPE = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


_KIND_ORDER: dict[SchemaKind, int] = {
    "missing_required": 0,
    "wrong_type": 1,
    "bad_enum": 2,
    "unknown_param": 3,
    "other": 4,
}


def _declares_extras(schema: Mapping[str, Any]) -> bool:
    """True when the schema deliberately accepts parameters beyond `properties`."""
    extra = schema.get("additionalProperties")
    return isinstance(extra, dict) or "patternProperties" in schema


def schema_errors(
    tool: str, schema: Mapping[str, Any], validator: Draft7Validator, args: dict[str, Any],
    *, values: bool = True,
) -> list[tuple[SchemaKind, str]]:
    """All schema problems of one call's arguments, most basic first. `values=False`: the
    reasons name where and which rule, never the argument's value (production traces hold
    real users' data)."""
    problems: list[tuple[SchemaKind, str]] = []
    properties = schema.get("properties", {})
    extras_declared = _declares_extras(schema)
    if not extras_declared:
        for key in args:
            if key not in properties:
                problems.append(("unknown_param", f"{tool}: {key!r} is not a parameter of {tool}"))
    if not problems and surely_valid(validator, args):
        return problems  # the compiled fast path; jsonschema explains only failing calls
    for error in explaining_validator(validator, args).iter_errors(args):
        path = ".".join(str(p) for p in error.absolute_path)
        where = f"{tool}.{path}" if path else tool
        if (error.validator == "additionalProperties" and not error.absolute_path
                and not extras_declared):
            continue  # reported above, whatever the schema says about additionalProperties
        if not values and error.validator not in ("required", "additionalProperties"):
            problems.append(_without_value(where, error))
        elif error.validator == "required":
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


def _without_value(where: str, error: Any) -> tuple[SchemaKind, str]:
    """A failed rule named by its place and the schema's constraint, not the value."""
    if error.validator == "type":
        got = _JSON_TYPE.get(type(error.instance), type(error.instance).__name__)
        return "wrong_type", f"{where}: expected {error.validator_value}, got {got}"
    if error.validator in ("enum", "const"):
        return "bad_enum", f"{where}: not one of the values the schema allows"
    constraint = json.dumps(error.validator_value, ensure_ascii=False)
    constraint = constraint if len(constraint) <= 60 else constraint[:59] + "…"
    return "other", f"{where}: fails the schema's {error.validator} {constraint}"


def schema_problem(
    call: ParsedCall,
    schemas: Mapping[str, Mapping[str, Any]],
    validators: Mapping[str, Draft7Validator],
    *, values: bool = True,
) -> str | None:
    """Why a call's arguments cannot be run, as the error a real API answers with; else None.
    `values=False`: without the arguments' values (schema_errors)."""
    if call.arguments is None:
        return f"arguments are not valid JSON: {call.json_error}"
    if call.name not in validators:
        return None
    found = schema_errors(call.name, schemas[call.name], validators[call.name], call.arguments,
                          values=values)
    if not found:
        return None
    return "arguments do not match the schema: " + "; ".join(message for _, message in found)


def argument_problems(
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
