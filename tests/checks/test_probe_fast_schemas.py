"""The probe's quick schema test (checks/probe_fast.has_schema_problem) says "a problem"
exactly when the check's own argument_problems does, over schema shapes with shortcuts of
their own: a top-level $ref (Draft 7 ignores the keywords beside it), patternProperties,
schema-valued additionalProperties, nested required lists."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft7Validator

from callgate.checks.parsing import parse_calls
from callgate.checks.probe_fast import has_schema_problem
from callgate.checks.schema import argument_problems
from callgate.suites.responses import ToolCall

SCHEMAS: dict[str, dict[str, Any]] = {
    "ref": {"type": "object", "$ref": "#/definitions/p", "required": ["note", "order_id"],
            "definitions": {"p": {"type": "object", "properties": {
                "order_id": {"type": "string"}}, "required": ["order_id"]}},
            "properties": {"order_id": {"type": "string"}, "note": {"type": "string"}}},
    "pattern": {"type": "object", "patternProperties": {"^x_": {"type": "integer"}},
                "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    "extras": {"type": "object", "additionalProperties": {"type": "string"},
               "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    "nested": {"type": "object", "properties": {"order_id": {"type": "string"}, "address": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        "required": ["order_id"], "additionalProperties": False},
}
ARGUMENTS: list[dict[str, Any]] = [
    {}, {"order_id": "o1"}, {"order_id": 7}, {"order_id": "o1", "note": "n"},
    {"order_id": "o1", "x_1": 3}, {"order_id": "o1", "x_1": "three"}, {"order_id": "o1", "y": 1},
    {"order_id": "o1", "y": "s"}, {"order_id": "o1", "address": {}},
    {"order_id": "o1", "address": {"city": "Linz"}},
]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_quick_schema_test_agrees_with_the_checks_own(name: str) -> None:
    schemas = {name: SCHEMAS[name]}
    validators = {name: Draft7Validator(SCHEMAS[name])}
    for arguments in ARGUMENTS:
        (call,) = parse_calls([ToolCall(id="c", name=name, arguments=json.dumps(arguments))])
        expected = argument_problems([call], schemas, validators) is not None
        assert has_schema_problem(call, schemas, validators) == expected, (name, arguments)
