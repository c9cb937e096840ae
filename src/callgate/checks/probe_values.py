"""Values for the probe's made-up answers (checks/probe.py): a schema-valid value for an
argument no key argument names, the value a key argument accepts, and another value it does
not accept (for the perturbed answer)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callgate.suites import regex_sets
from callgate.suites.case_checks import feasibility
from callgate.suites.cases import ArgSpec
from callgate.suites.matchers import Predicate

_FORMATS = {"date": "2026-01-02", "date-time": "2026-01-02T03:04:05Z", "time": "03:04:05Z",
            "email": "probe@example.com", "uri": "https://example.com/probe",
            "ipv4": "192.0.2.1", "uuid": "00000000-0000-4000-8000-000000000000"}
NOT_FOUND = object()


def _first_type(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"] or kind
        return str(kinds[0]) if kinds else None
    return kind if isinstance(kind, str) else None


def _number(schema: Mapping[str, Any], integer: bool) -> Any:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    value: float = 1
    if isinstance(low, int | float):
        value = low + (1 if "exclusiveMinimum" in schema and "minimum" not in schema else 0)
    elif isinstance(high, int | float) and high < 1:
        value = high - 1
    return int(value) if integer else float(value)


def _string(schema: Mapping[str, Any]) -> Any:
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        found = regex_sets.common_string([pattern])
        return found if isinstance(found, str) else NOT_FOUND
    if schema.get("format") in _FORMATS:
        return _FORMATS[schema["format"]]
    return "probe" + "e" * max(0, int(schema.get("minLength", 0)) - 5)


def sample(schema: Any) -> Any:
    """A value `schema` probably takes (the caller validates it), NOT_FOUND when none is
    guessed."""
    if not isinstance(schema, Mapping):
        return "probe"
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return sample(schema[key][0])
    kind = _first_type(schema)
    if kind in (None, "string"):
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "array":
        item = sample(schema.get("items", {}))
        return [] if item is NOT_FOUND else [item] * int(schema.get("minItems", 0))
    if kind == "object":
        return object_sample(schema)
    return NOT_FOUND


def object_sample(schema: Mapping[str, Any], given: Mapping[str, Any] | None = None) -> Any:
    """An object with `given` and a sample of every other required property."""
    out = dict(given or {})
    properties = schema.get("properties") or {}
    for key in schema.get("required") or ():
        if key in out:
            continue
        value = sample(properties.get(key, {}))
        if value is NOT_FOUND:
            return NOT_FOUND
        out[key] = value
    return out


def accepted(spec: ArgSpec, validator: Any, attempt: int = 0) -> Any:
    """A value the key argument accepts (its `attempt`-th listed one), NOT_FOUND when none is
    known (a predicate off an enum, a matcher nothing was found for)."""
    if spec.one_of:
        return spec.one_of[min(attempt, len(spec.one_of) - 1)]
    assert spec.matcher is not None
    if isinstance(spec.matcher, Predicate):
        for value in validator.schema.get("enum") or ():
            if spec.matcher.matches(value):
                return value
        return NOT_FOUND
    found = feasibility(spec.matcher, validator)
    return found.witness if found.found else NOT_FOUND


def takes(spec: ArgSpec, value: Any) -> bool:
    """Whether the key argument accepts `value` by its own listing (the check may be looser:
    that is what the probe finds out)."""
    if spec.matcher is not None:
        try:
            return bool(spec.matcher.matches(value))
        except Exception:  # a predicate that fails on a value takes none of it
            return False
    return any(type(value) is type(listed) and value == listed for listed in spec.one_of)


def _mutations(value: Any, schema: Mapping[str, Any]) -> list[Any]:
    out: list[Any] = [v for v in schema.get("enum") or () if v != value]
    if isinstance(value, bool):
        out.append(not value)
    elif isinstance(value, int | float):
        out += [value + 1, value + 7, -value - 3]
    elif isinstance(value, str):
        out += [*_digit_changed(value), "x" + value, value + "x", "probe-other",
                value[:-1] if value else "a"]
    elif isinstance(value, list):
        out += [value[:-1], [*value, *value[:1]]] if value else [["probe-other"]]
    elif isinstance(value, dict):
        out += [{}, {**value, "probe": 1}]
    elif value is None:
        out += ["probe-other", 0]
    return out


def _digit_changed(text: str) -> list[str]:
    """The text with its first digit changed (a number written in a Java or JavaScript
    literal is then another number), if it has one."""
    for index, char in enumerate(text):
        if char.isdigit():
            return [text[:index] + str((int(char) + 1) % 10) + text[index + 1:]]
    return []


def other_value(spec: ArgSpec, value: Any, schema: Mapping[str, Any]) -> Any:
    """A value near `value` the key argument does not accept, NOT_FOUND when it accepts every
    one tried."""
    for candidate in _mutations(value, schema):
        if not takes(spec, candidate):
            return candidate
    return NOT_FOUND


class Samples:
    """A suite's sampled values and per-argument validators, worked out once for all its
    cases (`sample` is deterministic, and the probe never changes a value in place)."""

    def __init__(self, schemas: Mapping[str, Mapping[str, Any]],
                 validators: Mapping[str, Any]) -> None:
        self.schemas, self.validators = schemas, validators
        self.memo: dict[tuple[Any, ...], Any] = {}

    def object_sample(self, tool: str, given: Mapping[str, Any] | None) -> Any:
        """object_sample of the tool's schema."""
        schema = self.schemas[tool]
        out = dict(given or {})
        for key in schema.get("required") or ():
            if key in out:
                continue
            made = ("sample", tool, key)
            if made not in self.memo:
                self.memo[made] = sample((schema.get("properties") or {}).get(key, {}))
            if self.memo[made] is NOT_FOUND:
                return NOT_FOUND
            out[key] = self.memo[made]
        return out

    def takes(self, tool: str, key: str, value: Any) -> bool:
        """Whether `tool`'s schema for `key` takes a sampled `value`."""
        seen = ("takes", tool, key, type(value), repr(value))
        if seen not in self.memo:
            self.memo[seen] = self.key_validator(tool, key).is_valid(value)
        return bool(self.memo[seen])

    def key_validator(self, tool: str, key: str) -> Any:
        """The tool's validator for one of its arguments."""
        made = ("validator", tool, key)
        if made not in self.memo:
            validator = self.validators[tool]
            properties = validator.schema.get("properties", {})
            self.memo[made] = validator.evolve(schema=properties.get(key, {}))
        return self.memo[made]
