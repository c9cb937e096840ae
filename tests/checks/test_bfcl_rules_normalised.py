"""BFCL's list and object answers are normalised once per parameter (ParamRule), not for each
value: the verdicts stay those of ast_checker.py, where its code raises included."""

from __future__ import annotations

from typing import Any

import pytest

from callgate.checks.bfcl_rules import ParamRule

OBJECT = {"type": "object"}
ARRAY = {"type": "array"}
ARRAY_OF_OBJECTS = {"type": "array", "items": {"type": "object"}}


@pytest.mark.parametrize(("schema", "answers", "value", "accepted"), [
    (OBJECT, [{"a": ["New York", "NYC"]}], {"a": "new-york"}, True),
    (OBJECT, [{"a": ["x"]}], {"a": "y"}, False),
    (OBJECT, [{"a": ["x"], "b": ["", "z"]}], {"a": "x"}, True),  # b may be left out
    (OBJECT, [{"a": ["x"], "b": ["z"]}], {"a": "x"}, False),
    (OBJECT, [{"a": 5}], {"a": 5}, False),  # BFCL iterates 5 and raises: not accepted
    (OBJECT, [{"a": ["x"], "b": 5}], {"a": "x"}, False),  # raises on the missing key's values
    (OBJECT, [{"a": 5}, {"a": ["x"]}], {"a": "x"}, False),  # raises before the second answer
    (OBJECT, ["", {"a": ["x"]}], {"a": "x"}, True),
    (ARRAY, [["A b", 2]], ["ab", 2], True),
    (ARRAY, [["a"]], ["b"], False),
    (ARRAY, [5], [5], False),  # an answer that is not a list: BFCL raises
    (ARRAY, [""], [], True),  # "" iterates as no items
    (ARRAY_OF_OBJECTS, [[{"k": ["V w"]}, {"k": ["u"]}]], [{"k": "vw"}, {"k": "u"}], True),
    (ARRAY_OF_OBJECTS, [[{"k": ["v"]}]], [{"k": "v"}, {"k": "v"}], False),
    (ARRAY_OF_OBJECTS, [[{"k": 3}]], [{"k": 3}], False),
])
def test_object_and_list_answers_decide_as_bfcl(
    schema: dict[str, Any], answers: list[Any], value: Any, accepted: bool
) -> None:
    rule = ParamRule(schema, answers)
    assert rule.matches(value) is accepted
    assert rule.matches(value) is accepted  # asked again, the normalised answers unchanged
