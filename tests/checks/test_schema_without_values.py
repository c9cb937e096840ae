"""Reasons without the arguments' values (`values=False`, as production traces are checked):
every failing rule is named by its place and the schema's constraint, and no value a caller
sent (a card number, a key) reaches the reason; with values, the reasons stay as before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft7Validator

from callgate.checks.parsing import parse_calls
from callgate.checks.schema import schema_problem
from callgate.suites.responses import ToolCall

SECRET = "4111 1111 1111 1111 sk-live-ABCDEF123"
SCHEMA = {"type": "object", "properties": {
    "card": {"type": "string", "pattern": "^[0-9]{4}$", "maxLength": 4},
    "tier": {"enum": ["gold", "silver"]}, "kind": {"const": "refund"},
    "count": {"type": "integer", "maximum": 3}, "note": {"type": "string"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 1}}}


def _problem(arguments: dict[str, Any], values: bool) -> str | None:
    call = parse_calls([ToolCall(id="c1", name="escalate", arguments=json.dumps(arguments))])[0]
    return schema_problem(call, {"escalate": SCHEMA}, {"escalate": Draft7Validator(SCHEMA)},
                          values=values)


@pytest.mark.parametrize(("arguments", "named"), [
    ({"card": SECRET}, "escalate.card: fails the schema's pattern \"^[0-9]{4}$\""),
    ({"tier": SECRET}, "escalate.tier: not one of the values the schema allows"),
    ({"kind": SECRET}, "escalate.kind: not one of the values the schema allows"),
    ({"count": SECRET}, "escalate.count: expected integer, got string"),
    ({"note": {"text": SECRET}}, "escalate.note: expected string, got object"),
    ({"tags": [SECRET, SECRET]}, "escalate.tags: fails the schema's maxItems 1"),
])
def test_a_reason_without_values_names_the_rule_not_the_value(arguments: dict[str, Any],
                                                              named: str) -> None:
    quoted, bare = _problem(arguments, values=True), _problem(arguments, values=False)
    assert quoted is not None and bare is not None
    assert quoted != bare  # as before for a suite's checks (most quote the value)
    assert named in bare
    assert "4111" not in bare and "sk-live" not in bare


def test_a_valid_call_has_no_reason_either_way() -> None:
    assert _problem({"card": "1234", "tier": "gold"}, values=False) is None
    assert _problem({"card": "1234", "tier": "gold"}, values=True) is None
