"""The compiled validation fast path never changes a verdict (issue 13, point 1).

Both paths run on the same calls: the fast one (jsonschema-rs accepts, else jsonschema explains)
and jsonschema alone (the fast path switched off). They must give identical verdicts and
reasons on every bundled suite, every BFCL fixture category with BFCL's perturbed responses,
and generated payloads against schemas that use the Draft 7 corners where two validators
tend to disagree (regular expressions, formats, 1 vs 1.0 vs true, float multipleOf, big bounds).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from bfcl_fixture import FIXTURES, load_harness
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator

from callgate.checks import schema as checks
from callgate.checks.check import check_response
from callgate.checks.parsing import parse_calls
from callgate.checks.schema import schema_errors
from callgate.checks.validation import compiled_check, surely_valid
from callgate.cli.demo import example_path
from callgate.importers.bfcl import CATEGORIES, import_category
from callgate.suites.responses import parse_response
from callgate.suites.schemas import tool_validator
from callgate.suites.suite import Suite, load_suite

EXAMPLES = example_path("examples")



@contextlib.contextmanager
def slow_path() -> Iterator[None]:
    """jsonschema alone, as before the fast path existed: no compiled check, and failures
    explained by the whole schema (no property left out)."""
    whole = mock.patch.object(checks, "explaining_validator", lambda validator, _: validator)
    with mock.patch.object(checks, "surely_valid", lambda validator, _: False), whole:
        yield


def corpus(tmp: Path) -> Iterator[tuple[str, Suite, list[dict[str, Any]]]]:
    for root in sorted(p for p in EXAMPLES.iterdir() if (p / "tools.json").exists()):
        suite = load_suite(root)
        raws = [
            json.loads(line)
            for responses in sorted(root.glob("responses-*.jsonl"))
            for line in responses.read_text().splitlines()
            if line.strip()
        ]
        yield root.name, suite, raws
    harness = load_harness()
    for category in CATEGORIES:
        suite = load_suite(import_category(FIXTURES / "data", category, tmp / category).out)
        raws = [
            {"case_id": case.id, "repeat": repeat, "response": message}
            for case in suite.cases.values()
            for repeat, (_, message) in enumerate(harness.perturbations(suite, case))
        ]
        yield category, suite, raws


@pytest.mark.slow
def test_both_paths_agree_on_every_bundled_and_bfcl_response(tmp_path: Path) -> None:
    schemas_seen = accepted = valid = compared = 0
    for name, suite, raws in corpus(tmp_path):
        assert raws, name
        schemas = suite.parameter_schemas
        responses = [parse_response(raw) for raw in raws]

        def verdicts(
            suite: Suite = suite, responses: list[Any] = responses, schemas: Any = schemas
        ) -> list[Any]:
            return [
                check_response(
                    suite.cases[r.case_id], r, schemas, suite.validators,
                    rules=suite.match, environment=suite.environment,
                )
                for r in responses
            ]

        fast = verdicts()
        with slow_path():
            slow = verdicts()
        assert fast == slow, name
        compared += len(fast)
        schemas_seen += len(suite.validators)
        for response in responses:
            calls = response.message.tool_calls if response.message else []
            for turn in response.turns or ():
                calls = [*calls, *turn.tool_calls]
            for call in parse_calls(calls):
                validator = suite.validators.get(call.name)
                if validator is None or call.arguments is None:
                    continue
                problems = schema_errors(call.name, schemas[call.name], validator, call.arguments)
                with slow_path():
                    assert problems == schema_errors(
                        call.name, schemas[call.name], validator, call.arguments
                    )
                if validator.is_valid(call.arguments):
                    valid += 1
                    accepted += surely_valid(validator, call.arguments)
                else:
                    assert not surely_valid(validator, call.arguments)
    assert compared > 1000 and schemas_seen > 100
    # The fast path is really taken: nearly every valid call is accepted without jsonschema.
    assert accepted >= 0.95 * valid > 0


# --- generated payloads against schemas with the corners two validators disagree on ----------

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                      "day": {"type": "string", "format": "date"},
                                      "at": {"type": "string", "format": "time"},
                                      "mail": {"type": "string", "format": "email"},
                                      "ip": {"format": "ipv4"}, "ip6": {"format": "ipv6"},
                                      "re": {"format": "regex"}, "uri": {"format": "uri"}}},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^\\d{3}$"},
                                      "word": {"pattern": "^\\w+$"},
                                      "gap": {"pattern": "^a\\sb$"},
                                      "edge": {"pattern": "\\bfoo"},
                                      "tail": {"pattern": "x$"},
                                      "letters": {"pattern": "^\\p{L}+$"}},
     "required": ["code"], "additionalProperties": False},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 10},
                                      "x": {"type": "number", "exclusiveMaximum": 1.5},
                                      "e": {"enum": [1, "1", None, [1], {"a": 0}]},
                                      "c": {"const": True}, "f": {"const": 1.0},
                                      "u": {"type": "array", "uniqueItems": True}}},
    {"type": "object", "properties": {"m": {"multipleOf": 0.1}, "k": {"multipleOf": 3}}},
    {"type": "object", "properties": {"big": {"maximum": 2**60},
                                      "anyOf": {"anyOf": [{"type": "null"},
                                                          {"oneOf": [{"minimum": 2},
                                                                     {"maximum": 3}]}]}}},
    {"type": "object", "properties": {"items": {"type": "array",
                                                "items": {"$ref": "#/definitions/i"},
                                                "minItems": 1, "maxItems": 3,
                                                "contains": {"type": "integer"}},
                                      "s": {"type": "string", "minLength": 1, "maxLength": 2}},
     "definitions": {"i": {"type": ["integer", "string"], "not": {"const": 0}}},
     "dependencies": {"s": ["items"]}, "propertyNames": {"pattern": "^[a-z]+$"},
     "if": {"required": ["s"]}, "then": {"properties": {"s": {"const": "ab"}}},
     "else": {"maxProperties": 1}},
    {"type": "object", "patternProperties": {"^x_\\d$": {"type": "integer"}},
     "additionalProperties": {"type": "string"},
     "properties": {"anyOf": {"anyOf": [{"type": "null"}, {"oneOf": [{"minimum": 2},
                                                                     {"maximum": 3}]}]}}},
    {"type": "object", "patternProperties": {"^x_\\d$": {"type": "integer"}, "^Q$": {}},
     "properties": {"s": {"pattern": "^(\\w+\\s?)+$"}}, "additionalProperties": False},
]
KEYS = st.sampled_from(
    ["when", "day", "at", "mail", "ip", "ip6", "re", "uri", "code", "word", "gap", "edge", "tail",
     "letters", "n", "x", "e", "c", "f", "u", "m", "k", "big", "items", "s", "x_1", "x_a", "x_١",
     "x_1\n", "anyOf", "Q"]
)
TRICKY_STRINGS = st.sampled_from(
    ["2026-02-30T10:00:00Z", "2026-11-30T10:00:00+01:00", "2026-11-30t10:00:00z",
     "2026-11-30T10:00:00", "2026-11-30", "abc", "2026-13-01", "10:00:00Z", "25:00:00Z", "a@b",
     "no-at", "127.0.0.1", "256.1.1.1", "::1", "(", "[a-z]+", "123", "١٢٣", "12\n", "é",
     "a\ufeffb", "a b", "a\u2028b", "éfoo", "x\n", "ab", "", "😀😀", "\x00", "0"]
)
TRICKY_NUMBERS = st.sampled_from(
    [0, 1, 1.0, True, False, 0.3, 0.7, 2**60, 2**60 + 1, 6.0, 1e300, -0.0, 1.5,
     float("inf"), float("nan"), 11, -1]
)
SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**65), 2**65) | TRICKY_NUMBERS
    | st.floats(allow_nan=False, width=32) | TRICKY_STRINGS | st.text(max_size=4)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
VALIDATORS = [tool_validator(schema) for schema in SCHEMAS] + [
    tool_validator(schema, formats=False) for schema in SCHEMAS  # as in top_level mode
]


@st.composite
def cases(draw: st.DrawFn) -> tuple[int, dict[str, Any]]:
    which = draw(st.sampled_from(range(len(VALIDATORS))))
    validator = VALIDATORS[which]
    # Mostly the schema's own property names with values picked to hit its corners.
    own = [*sorted(validator.schema.get("properties", {})), "x_1", "x_a", "Q"]
    keys = st.sampled_from(own) | KEYS
    values = TRICKY_STRINGS | TRICKY_NUMBERS | VALUES
    return which, draw(st.dictionaries(keys, values, max_size=5))


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(cases())
def test_both_paths_agree_on_generated_payloads(
    case: tuple[int, dict[str, Any]],
) -> None:
    which, payload = case
    validator = VALIDATORS[which]
    fast = outcome(validator, payload)
    with slow_path():
        assert fast == outcome(validator, payload)


def outcome(validator: Draft7Validator, payload: dict[str, Any]) -> Any:
    # jsonschema itself raises on a float multipleOf of NaN or infinity (which json.loads
    # accepts); the fast path must leave even that as it was.
    try:
        return schema_errors("t", validator.schema, validator, payload)
    except (ValueError, OverflowError) as exc:
        return type(exc)


def test_schemas_with_risky_keywords_are_not_compiled() -> None:
    # multipleOf is left to jsonschema (see validation.py); patternProperties is compiled, its
    # keys matched by the engine jsonschema's path uses too.
    compiled = [compiled_check(validator) is not None for validator in VALIDATORS[: len(SCHEMAS)]]
    assert compiled == [True, True, True, False, True, True, True, True]
    # A validator matching patterns with Python's re (not callgate's) is never compiled.
    assert compiled_check(Draft7Validator(SCHEMAS[1])) is None


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("2026-11-30T10:00:00Z", True),
        ("2026-02-30T10:00:00Z", False),  # rfc3339-validator knows February
        ("2026-11-30T10:00:00", False),  # no offset
    ],
)
def test_date_time_is_decided_by_rfc3339_validator(value: str, valid: bool) -> None:
    validator = VALIDATORS[0]
    assert surely_valid(validator, {"when": value}) is valid
    assert validator.is_valid({"when": value}) is valid


@pytest.mark.parametrize(
    ("schema", "payload"),
    [
        ({"properties": {"m": {"multipleOf": 0.1}}}, {"m": 0.3}),
        ({"properties": {"m": {"multipleOf": 0.01}}}, {"m": 0.07}),
        ({"properties": {"n": {"maximum": 3}}}, {"n": float("inf")}),
        ({"properties": {"n": {"exclusiveMinimum": 0}}}, {"n": float("-inf")}),
    ],
)
def test_corners_where_jsonschema_rs_alone_would_accept(schema: Any, payload: Any) -> None:
    # jsonschema-rs on its own accepts each of these; jsonschema, the reference, does not.
    validator = tool_validator({"type": "object", **schema})
    assert not validator.is_valid(payload)
    assert not surely_valid(validator, payload)
    fast = schema_errors("t", validator.schema, validator, payload)
    assert fast
    with slow_path():
        assert fast == schema_errors("t", validator.schema, validator, payload)


@pytest.mark.parametrize(
    ("schema", "payload", "valid"),
    [
        ({"patternProperties": {"^x_\\d$": {"type": "integer"}}}, {"x_١": "s"}, True),
        ({"patternProperties": {"^x_\\d$": {"type": "integer"}}}, {"x_1\n": "s"}, True),
        ({"properties": {"gap": {"pattern": "^a\\sb$"}}}, {"gap": "a\ufeffb"}, True),
        ({"properties": {"code": {"pattern": "^\\d+$"}}}, {"code": "١٢"}, False),
        ({"properties": {"code": {"pattern": "^[a-z]+$"}}}, {"code": "abc\n"}, False),
        ({"properties": {"ctl": {"pattern": "^\\cA$"}}}, {"ctl": "\x01"}, True),
        ({"patternProperties": {"^x_": {"type": "integer"}}, "additionalProperties": False},
         {"y": 1}, False),
    ],
)
def test_patterns_are_ecma_262_on_both_paths(schema: Any, payload: Any, valid: bool) -> None:
    # ECMA's \d is ASCII, $ is the end of the text, \s takes U+FEFF, \cA is a control
    # character; Python's re (jsonschema's own engine) decides each of these the other way.
    validator = tool_validator({"type": "object", **schema})
    assert validator.is_valid(payload) is valid
    assert surely_valid(validator, payload) is valid
    fast = schema_errors("t", validator.schema, validator, payload)
    assert (not fast) is valid
    with slow_path():
        assert fast == schema_errors("t", validator.schema, validator, payload)


def test_a_lone_surrogate_is_matched_as_a_replacement_character() -> None:
    # Rust strings cannot hold one: the compiled path hands the call to jsonschema's path.
    validator = tool_validator({"type": "object", "properties": {"n": {"pattern": "^a.$"}}})
    assert not surely_valid(validator, {"n": "a\ud800"})
    assert schema_errors("t", validator.schema, validator, {"n": "a\ud800"}) == []
    assert schema_errors("t", validator.schema, validator, {"n": "b\ud800"})


def test_the_cache_does_not_keep_a_validator_alive() -> None:
    import gc
    import weakref

    from callgate.checks.validation import explaining_validator

    validator = Draft7Validator({"type": "object", "properties": {"a": {"type": "integer"},
                                                                  "b": {"type": "string"}},
                                 "required": ["c"]})
    assert surely_valid(validator, {"a": 1, "b": "x", "c": 0})
    # A failing call with a valid property builds an explaining validator that leaves it out.
    explained = explaining_validator(validator, {"a": 1, "b": 2})
    assert explained is not validator and list(explained.schema["properties"]) == ["b"]
    gone = weakref.ref(validator)
    del validator, explained
    # The young generations first: a full collection walks the whole test process's heap
    # (1 s late in a run); the last try is the full one, so the assertion is as before.
    for generation in (0, 1, 2):
        gc.collect(generation)
        if gone() is None:
            break
    assert gone() is None
