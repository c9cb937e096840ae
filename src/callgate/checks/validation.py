"""A compiled fast path for Draft 7 validation of tool-call arguments.

jsonschema's `iter_errors` builds several validator objects per call and explains every
error; on a scoring run almost every call is valid and needs no explanation. So each tool's
schema is also compiled once with jsonschema-rs (Rust), and a call it accepts is valid. A call
it rejects (or cannot judge: a schema or value it refuses) goes to jsonschema, which stays the
only judge of failures and writes every reason, so verdicts, reasons and sub-kinds do not
change. The fast path must never accept what jsonschema rejects: `format` is checked by
jsonschema's own format checkers (date-time through rfc3339-validator, ...), plugged into the
compiled validator; `pattern` and `patternProperties` run on one engine on both paths (the
linear-time regex crate, suites/schemas.py); and tests/checks/test_validation.py compares both paths
on every bundled suite, the BFCL fixtures and generated payloads.

jsonschema-rs was measured against fastjsonschema on the same calls, formats plugged in
(benchmarks/validator_choice.py): two to three times as fast in the same run, and it builds a
validator without generating and exec'ing Python source. Both need the same guards here
(fastjsonschema also divides floats differently for multipleOf).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema_rs
from jsonschema import Draft7Validator

from callgate.suites.schemas import (
    ONE_SCHEMA,
    PATTERN_OPTIONS,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    like,
    mentions,
    runs_patterns_here,
)

_Accepts = Callable[[Any], bool]


_BOUNDS = ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum")
_ANY_TYPE = ["array", "boolean", "null", "number", "object", "string"]
# Where jsonschema-rs could accept what jsonschema rejects, the compiled path is not used:
# multipleOf (jsonschema divides floats: 0.3 is not a multiple of 0.1 there), and patterns
# for a validator that matches them with Python's re (one not made by suites/schemas.py).


def _walk(schema: Any) -> Iterator[dict[str, Any]]:
    """Every subschema (dict) of a Draft 7 schema, by the keywords that hold schemas."""
    if not isinstance(schema, dict):
        return
    yield schema
    for keyword in ONE_SCHEMA:
        if isinstance(schema.get(keyword), dict):
            yield from _walk(schema[keyword])
    for keyword in SCHEMA_LISTS:
        if isinstance(schema.get(keyword), list):
            for item in schema[keyword]:
                yield from _walk(item)
    for keyword in SCHEMA_MAPS:
        if isinstance(schema.get(keyword), dict):
            for item in schema[keyword].values():
                yield from _walk(item)


def _unsafe(validator: Draft7Validator) -> bool:
    schema = validator.schema
    return mentions(schema, "multipleOf") or (
        not runs_patterns_here(validator)
        and (mentions(schema, "pattern") or mentions(schema, "patternProperties"))
    )


def _for_jsonschema_rs(schema: Any) -> Any:
    """A copy of the schema that jsonschema-rs judges as jsonschema does, or more strictly.

    Beside a bound, a type list of every JSON type makes jsonschema-rs reject an infinite
    number, which it sees as no type at all and lets past the bound (json.loads reads
    Infinity and 1e999; jsonschema compares them as numbers)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for keyword in ONE_SCHEMA:
        if isinstance(out.get(keyword), dict):
            out[keyword] = _for_jsonschema_rs(out[keyword])
    for keyword in SCHEMA_LISTS:
        if isinstance(out.get(keyword), list):
            out[keyword] = [_for_jsonschema_rs(item) for item in out[keyword]]
    for keyword in SCHEMA_MAPS:
        if isinstance(out.get(keyword), dict):
            out[keyword] = {
                name: _for_jsonschema_rs(item) for name, item in out[keyword].items()
            }
    if any(keyword in out for keyword in _BOUNDS):
        out["allOf"] = [*out.get("allOf", []), {"type": _ANY_TYPE}]
    return out


def _compile(validator: Draft7Validator) -> _Accepts | None:
    if not isinstance(validator.schema, dict) or _unsafe(validator):
        return None
    schema = _for_jsonschema_rs(validator.schema)
    checker = validator.format_checker
    formats: dict[str, Callable[[str], bool]] = {}
    for sub in _walk(schema):
        name = sub.get("format")
        if isinstance(name, str) and name not in formats:
            # Every format is decided as jsonschema decides it: by its own checker (which
            # accepts formats it does not know), or not at all without one.
            formats[name] = _conforms(checker, name)
    try:
        # offline: no reference is ever retrieved (jsonschema's registry refuses too).
        compiled = jsonschema_rs.Draft7Validator(
            schema, formats=formats, validate_formats=True, offline=True,
            pattern_options=PATTERN_OPTIONS,
        )
    except Exception:  # a schema jsonschema accepts and jsonschema-rs does not: always explain
        return None
    return compiled.is_valid


def _conforms(checker: Any, name: str) -> Callable[[str], bool]:
    if checker is None:
        return lambda value: True
    return lambda value: bool(checker.conforms(value, name))


def compiled_check(validator: Draft7Validator) -> _Accepts | None:
    """The compiled check for this validator's schema, built on first use and kept with it."""
    return _compiled(validator).check


def surely_valid(validator: Draft7Validator, instance: Any) -> bool:
    """True when the compiled check accepts `instance`; False means "ask jsonschema"."""
    return _accepts(compiled_check(validator), instance)


def _accepts(check: _Accepts | None, value: Any) -> bool:
    if check is None:
        return False
    try:
        return check(value)
    except Exception:  # a value jsonschema-rs cannot take in: let jsonschema decide
        return False


# --------------------------------------------------------------------------- explaining faster
#
# jsonschema explains a failing call by walking every keyword, and it descends into every
# property given, valid or not; that walk, not the failure, is most of its cost. A top-level
# property whose value the compiled path accepts yields no error there (the compiled path never
# accepts what jsonschema rejects), so it can be left out of `properties` for the explanation:
# jsonschema then reports the same errors, in the same order, with the same messages and paths.
# Left out only where that holds: no `additionalProperties` schema or `patternProperties` (they
# would take a property `properties` no longer lists), and no `$ref` or `$id` in the property's
# schema (resolved against the whole schema, not the property alone).

_PRUNED_KEPT = 64  # explaining validators kept per tool (one per set of valid properties)


class _Explainer:
    """A validator's explaining validators, one per set of top-level properties left out.
    It holds no reference to the validator (the cache's entries must not keep it alive)."""

    __slots__ = ("checks", "pruned")

    def __init__(self) -> None:
        self.checks: dict[str, _Accepts | None] = {}
        self.pruned: dict[frozenset[str], Draft7Validator] = {}

    def property_check(self, name: str, schema: Any,
                       validator: Draft7Validator) -> _Accepts | None:
        if name not in self.checks:
            alone = None
            if isinstance(schema, dict) and not (mentions(schema, "$ref")
                                                 or mentions(schema, "$id")):
                alone = _compile(like(validator, schema))
            self.checks[name] = alone
        return self.checks[name]

    def for_instance(self, validator: Draft7Validator, instance: Any) -> Draft7Validator:
        schema = validator.schema
        properties = schema.get("properties")
        if not isinstance(instance, dict) or not isinstance(properties, dict):
            return validator
        valid = frozenset(
            name for name, sub in properties.items()
            if name in instance and _accepts(self.property_check(name, sub, validator),
                                             instance[name])
        )
        if not valid:
            return validator
        found = self.pruned.get(valid)
        if found is None:
            # Without additionalProperties too: its top-level errors are never reported
            # (schema.py names unknown parameters itself), and it would now flag the
            # properties left out.
            pruned = {key: value for key, value in schema.items()
                      if key != "additionalProperties"}
            pruned["properties"] = {
                name: sub for name, sub in properties.items() if name not in valid}
            found = like(validator, pruned)
            if len(self.pruned) < _PRUNED_KEPT:
                self.pruned[valid] = found
        return found


def _prunable(schema: Any) -> bool:
    return (isinstance(schema, dict) and isinstance(schema.get("properties"), dict)
            and not isinstance(schema.get("additionalProperties"), dict)
            and "patternProperties" not in schema)


def explaining_validator(validator: Draft7Validator, instance: Any) -> Draft7Validator:
    """A validator whose errors for `instance` are exactly `validator`'s, in the same order,
    with less to walk: the top-level properties the compiled path accepts are left out."""
    explainer = _compiled(validator).explainer
    return explainer.for_instance(validator, instance) if explainer is not None else validator


# --------------------------------------------------------------------------- one cache


class _Entry:
    """What is worked out once for a validator: its compiled check (None when its schema
    cannot be compiled) and its explainer (None when no property can be left out)."""

    __slots__ = ("check", "explainer", "ref")

    def __init__(self, validator: Draft7Validator, ref: weakref.ref[Draft7Validator]) -> None:
        self.ref = ref
        self.check = _compile(validator)
        self.explainer = _Explainer() if _prunable(validator.schema) else None


# id(validator) -> its entry. Draft7Validator is unhashable, so it cannot key a
# WeakKeyDictionary itself; the entry holds a weak reference and leaves with the validator.
_entries: dict[int, _Entry] = {}


def _compiled(validator: Draft7Validator) -> _Entry:
    key = id(validator)
    entry = _entries.get(key)
    if entry is None or entry.ref() is not validator:
        def forget(_: Any, entries: dict[int, _Entry] = _entries) -> None:
            entries.pop(key, None)

        entry = _entries[key] = _Entry(validator, weakref.ref(validator, forget))
    return entry
