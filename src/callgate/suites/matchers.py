"""Argument matchers: what a key argument's expected value may be beside a literal or `one_of`
(docs/formats.md, "Argument matchers").

Each kind is one class here, registered in MATCHERS under the key that names it in a case
(`{"regex": "^ord_7"}`), with one handler signature: `mismatch(got)` is None when the value
matches, else why not. `search(schema)` gives the values suite check tries against the tool's
schema, so it can refuse an expected value that no schema-valid answer could match.
"""

from __future__ import annotations

import itertools
import json
import math
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from callgate.suites import regex_sets, schemas

JSON_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
# Search.complete for candidates that decide every schema (the only values that can match).
EVERY_KEYWORD = frozenset({"*"})


def json_equal(expected: Any, got: Any) -> bool:
    """JSON equality: a bool never equals a number, 1 == 1.0, lists in order, dicts by keys."""
    if type(expected) is str:  # the common case, decided as the last line below decides it
        return type(got) is str and expected == got
    if isinstance(expected, bool) or isinstance(got, bool):
        return isinstance(expected, bool) and isinstance(got, bool) and expected == got
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return expected == got
    if isinstance(expected, Mapping) and isinstance(got, Mapping):
        return expected.keys() == got.keys() and all(
            json_equal(value, got[key]) for key, value in expected.items()
        )
    if isinstance(expected, list | tuple) and isinstance(got, list | tuple):
        return len(expected) == len(got) and all(map(json_equal, expected, got))
    return type(expected) is type(got) and expected == got


def shown(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Search:
    """What suite check tries: `candidates` (values this matcher accepts) and `complete`, the
    schema keywords for which they are enough: when the schema constrains nothing else and no
    candidate passes it, no value can. None: no schema is ever decided by them alone."""

    candidates: tuple[Any, ...] = ()
    complete: frozenset[str] | None = frozenset()


class Matcher(BaseModel):
    """One matcher kind. A subclass sets KEY (its name in a case), TYPES (the JSON types a
    matching value can have) and writes mismatch, describe and search."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    KEY: ClassVar[str]
    TYPES: ClassVar[frozenset[str]] = JSON_TYPES

    def mismatch(self, got: Any) -> str | None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def search(self, schema: Mapping[str, Any]) -> Search:
        return Search(complete=None)

    def matches(self, got: Any) -> bool:
        return self.mismatch(got) is None

    def value_types(self) -> frozenset[str]:
        """The JSON types a matching value can have."""
        return self.TYPES


class Regex(Matcher):
    """A string the regular expression matches somewhere (anchor it with ^ and $), run by the
    same linear-time engine as the schemas' `pattern`."""

    KEY: ClassVar[str] = "regex"
    TYPES: ClassVar[frozenset[str]] = frozenset({"string"})
    regex: str = Field(strict=True)

    @model_validator(mode="after")
    def _runs(self) -> Regex:
        problem = schemas.pattern_problem(self.regex)
        if problem is not None:
            raise ValueError(f"{shown(self.regex)} {problem}")
        return self

    def mismatch(self, got: Any) -> str | None:
        if not isinstance(got, str):
            return "not a string"
        return None if schemas.search(self.regex, got) else "does not match"

    def describe(self) -> str:
        return f"regex {shown(self.regex)}"

    def search(self, schema: Mapping[str, Any]) -> Search:
        literal = _anchored_literal(self.regex)
        if literal is not None:  # the one string it matches
            return Search(candidates=(literal,), complete=EVERY_KEYWORD)
        pattern = schema.get("pattern")
        other = _anchored_literal(pattern) if isinstance(pattern, str) else None
        if other is not None:  # the one string the schema takes
            return Search(candidates=(other,), complete=EVERY_KEYWORD)
        together = [self.regex, *([pattern] if isinstance(pattern, str) else [])]
        found = regex_sets.common_string(together)
        if found is None:
            return Search(complete=frozenset({"type", "pattern"}))
        if found is regex_sets.UNDECIDED or not all(schemas.search(p, found) for p in together):
            return Search(complete=None)  # not modelled, or the engine reads it otherwise
        return Search(candidates=(found,), complete=frozenset({"type", "pattern"}))


_PLAIN = frozenset(string.ascii_letters + string.digits + " _-:,;@'\"=/%&#~<>")
_ESCAPED = frozenset(".^$*+?()[]{}|\\/-")


def _anchored_literal(pattern: str) -> str | None:
    """The text of `^text$` when text holds no regex syntax (escaped punctuation allowed)."""
    if not (pattern.startswith("^") and pattern.endswith("$")) or pattern.endswith("\\$"):
        return None
    body, out, index = pattern[1:-1], [], 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body) and body[index + 1] in _ESCAPED:
            out.append(body[index + 1])
            index += 2
        elif char in _PLAIN:
            out.append(char)
            index += 1
        else:
            return None
    return "".join(out)


class Approx(Matcher):
    """A number within `abs` of the value, or within `rel` times its size (the wider wins)."""

    KEY: ClassVar[str] = "approx"
    TYPES: ClassVar[frozenset[str]] = frozenset({"integer", "number"})
    approx: float = Field(strict=True)
    abs_: float = Field(0.0, alias="abs", ge=0, allow_inf_nan=False, strict=True)
    rel: float = Field(0.0, ge=0, allow_inf_nan=False, strict=True)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _has_tolerance(self) -> Approx:
        if not math.isfinite(self.approx):
            raise ValueError("approx must be a finite number")
        if not self.abs_ and not self.rel:
            raise ValueError("approx needs a tolerance: abs, rel or both (else give the number)")
        return self

    @property
    def tolerance(self) -> float:
        return max(self.abs_, self.rel * abs(self.approx))

    def mismatch(self, got: Any) -> str | None:
        if not _is_number(got):
            return "not a number"
        off = abs(got - self.approx)
        return None if off <= self.tolerance else f"off by {off:g}, more than {self.tolerance:g}"

    def describe(self) -> str:
        return f"approx {self.approx:g} ± {self.tolerance:g}"

    def search(self, schema: Mapping[str, Any]) -> Search:
        low, high = self.approx - self.tolerance, self.approx + self.tolerance
        for key in ("minimum", "exclusiveMinimum"):
            if _is_number(schema.get(key)):
                low = max(low, schema[key])
        for key in ("maximum", "exclusiveMaximum"):
            if _is_number(schema.get(key)):
                high = min(high, schema[key])
        found = [self.approx, low, high, (low + high) / 2]
        if math.isfinite(low) and math.isfinite(high):
            found += [math.ceil(low), math.ceil(low) + 1, math.floor(high), math.floor(high) - 1]
        return Search(candidates=tuple(found), complete=frozenset(
            {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}))


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


class Text(Matcher):
    """A string equal to the text once case is folded and runs of white space are one space
    (leading and trailing space dropped)."""

    KEY: ClassVar[str] = "text"
    TYPES: ClassVar[frozenset[str]] = frozenset({"string"})
    text: str = Field(strict=True)

    def mismatch(self, got: Any) -> str | None:
        if not isinstance(got, str):
            return "not a string"
        return None if _folded(got) == _folded(self.text) else "differs beyond case and spacing"

    def describe(self) -> str:
        return f"text {shown(self.text)} in any case and spacing"

    def search(self, schema: Mapping[str, Any]) -> Search:
        collapsed = " ".join(self.text.split())
        found = [collapsed, self.text, collapsed.casefold(), collapsed.upper(), collapsed.lower()]
        if isinstance(schema.get("minLength"), int) and len(collapsed) < schema["minLength"]:
            found.append(collapsed + " " * (schema["minLength"] - len(collapsed)))
        return Search(candidates=tuple(found), complete=frozenset({"type", "minLength"}))


_ARRAY_KEYWORDS = frozenset(
    {"type", "items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains"})


class AnyOrder(Matcher):
    """An array holding the same items as the list, in any order (each item as JSON equals)."""

    KEY: ClassVar[str] = "any_order"
    TYPES: ClassVar[frozenset[str]] = frozenset({"array"})
    any_order: tuple[Any, ...]

    def mismatch(self, got: Any) -> str | None:
        if not isinstance(got, list):
            return "not an array"
        if len(got) != len(self.any_order):
            return f"{len(got)} items where {len(self.any_order)} are expected"
        missing = _missing_items(self.any_order, got)
        return None if missing is None else f"has no item equal to {shown(missing[0])}"

    def describe(self) -> str:
        return f"any_order {shown(list(self.any_order))}"

    def search(self, schema: Mapping[str, Any]) -> Search:
        items = list(self.any_order)
        if not isinstance(schema.get("items"), list):
            # Every array keyword but a list of `items` is blind to order: one order decides.
            return Search(candidates=(items,), complete=_ARRAY_KEYWORDS)
        if len(items) > 6:
            return Search(candidates=(items,), complete=None)
        return Search(candidates=tuple(list(p) for p in itertools.permutations(items)),
                      complete=_ARRAY_KEYWORDS)


def _missing_items(wanted: Sequence[Any], got: Sequence[Any]) -> tuple[Any] | None:
    """The first wanted item with no equal item left in `got` (each used once), in a 1-tuple
    (the item may be null), else None. JSON equality is an equivalence, so taking the first
    equal item never loses a pairing."""
    left = list(got)
    for item in wanted:
        index = next((i for i, value in enumerate(left) if json_equal(item, value)), None)
        if index is None:
            return (item,)
        del left[index]
    return None


class Contains(Matcher):
    """An object holding the given keys with equal values (others may be there too), or an
    array holding the given items (each once, in any order, others may be there too)."""

    KEY: ClassVar[str] = "contains"
    contains: dict[str, Any] | tuple[Any, ...]

    def value_types(self) -> frozenset[str]:
        return frozenset({"object" if isinstance(self.contains, dict) else "array"})

    def mismatch(self, got: Any) -> str | None:
        if isinstance(self.contains, dict):
            if not isinstance(got, dict):
                return "not an object"
            for key, value in self.contains.items():
                if key not in got:
                    return f"no key {shown(key)}"
                if not json_equal(value, got[key]):
                    return f"{key} is {shown(got[key])}, not {shown(value)}"
            return None
        if not isinstance(got, list):
            return "not an array"
        missing = _missing_items(self.contains, got)
        return None if missing is None else f"has no item equal to {shown(missing[0])}"

    def describe(self) -> str:
        given = self.contains if isinstance(self.contains, dict) else list(self.contains)
        return f"contains {shown(given)}"

    def search(self, schema: Mapping[str, Any]) -> Search:
        # The given keys or items alone: more of them can only help minItems, minProperties,
        # required, dependencies or a list of `items`, which are left undecided unless met.
        if isinstance(self.contains, dict):
            complete = {"type", "properties", "patternProperties", "additionalProperties",
                        "maxProperties", "propertyNames"}
            required = schema.get("required")
            if isinstance(required, list) and set(required) <= set(self.contains):
                complete.add("required")
            if len(self.contains) >= _int(schema.get("minProperties")):
                complete.add("minProperties")
            return Search(candidates=(dict(self.contains),), complete=frozenset(complete))
        items = list(self.contains)
        complete = {"type", "maxItems", "uniqueItems"}
        if not isinstance(schema.get("items"), list):
            complete.add("items")
        if len(items) >= _int(schema.get("minItems")):
            complete.add("minItems")
        return Search(candidates=(items,), complete=frozenset(complete))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


Moment = date | time | datetime


def parse_moment(text: str) -> Moment | None:
    """An ISO 8601 date, time of day, or date and time (`Z` or an offset for the zone)."""
    for kind in (date, time, datetime):
        try:
            return kind.fromisoformat(text)
        except ValueError:
            continue
    return None


def _kind(moment: Moment) -> str:
    if isinstance(moment, datetime):  # before date: a datetime is a date too
        return "a date and time"
    return "a date" if isinstance(moment, date) else "a time of day"


class DateTime(Matcher):
    """A date, time of day, or date and time equal to the given one whatever its ISO 8601
    spelling and, where both carry one, its time zone (compared as the same instant)."""

    KEY: ClassVar[str] = "datetime"
    TYPES: ClassVar[frozenset[str]] = frozenset({"string"})
    datetime_: str = Field(alias="datetime", strict=True)
    _moment: Any = PrivateAttr(None)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _parses(self) -> DateTime:
        moment = parse_moment(self.datetime_)
        if moment is None:
            raise ValueError(f"datetime {shown(self.datetime_)} is not an ISO 8601 date, time "
                             "or date and time")
        self._moment = moment
        return self

    def mismatch(self, got: Any) -> str | None:
        if not isinstance(got, str):
            return "not a string"
        moment = parse_moment(got)
        want: Moment = self._moment
        if moment is None:
            return "not an ISO 8601 date or time"
        if _kind(moment) != _kind(want):
            return f"{_kind(moment)}, not {_kind(want)}"
        if _has_zone(moment) != _has_zone(want):
            return "has a time zone where none is expected" if _has_zone(moment) else (
                "has no time zone")
        return None if moment == want else f"is {_normal(moment)}, not {_normal(want)}"

    def describe(self) -> str:
        return f"datetime {shown(self.datetime_)} in any format and time zone"

    def search(self, schema: Mapping[str, Any]) -> Search:
        want: Moment = self._moment
        found: list[str] = [self.datetime_, want.isoformat()]
        if isinstance(want, time) and _has_zone(want):
            found.append(want.isoformat().replace("+00:00", "Z"))
        elif isinstance(want, datetime) and _has_zone(want):
            utc = want.astimezone(UTC).isoformat()
            found += [utc, utc.replace("+00:00", "Z")]
        decided = schema.get("format") in (None, "date", "time", "date-time")
        return Search(candidates=tuple(found),
                      complete=frozenset({"type", "format"}) if decided else None)


def _has_zone(moment: Moment) -> bool:
    if isinstance(moment, datetime | time):
        return moment.utcoffset() is not None
    return False


def _normal(moment: Moment) -> str:
    if isinstance(moment, datetime) and _has_zone(moment):
        return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return moment.isoformat()


class Present(Matcher):
    """Any value at all, null included: only leaving the argument out fails."""

    KEY: ClassVar[str] = "present"
    present: Literal[True]

    def mismatch(self, got: Any) -> str | None:
        return None

    def describe(self) -> str:
        return "present (any value)"

    def search(self, schema: Mapping[str, Any]) -> Search:
        # One value of every JSON type: a schema with only `type` takes one of them.
        return Search(candidates=(None, True, 0, 0.5, "", [], {}), complete=frozenset({"type"}))


Predicate_ = Callable[[Any], Any]


class Predicate(Matcher):
    """A Python function defined beside the suite (`module:function`), called with the value:
    True matches; False or a string (the reason) does not."""

    KEY: ClassVar[str] = "predicate"
    predicate: str = Field(strict=True, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    _function: Any = PrivateAttr(None)

    @model_validator(mode="after")
    def _loaded(self, info: ValidationInfo) -> Predicate:
        loader = (info.context or {}).get("predicates")
        if loader is None:
            raise ValueError("a predicate is only read as part of a suite (load_suite)")
        self._function = loader(self.predicate)
        return self

    def mismatch(self, got: Any) -> str | None:
        try:
            verdict = self._function(got)
        except Exception as exc:  # the suite's code: its failure is named, never a traceback
            return f"{self.predicate} raised {exc!r}"
        if verdict is True:
            return None
        if isinstance(verdict, str) and verdict:
            return verdict
        return f"{self.predicate} returned {verdict!r}"

    def describe(self) -> str:
        return f"predicate {self.predicate}"


MATCHERS: dict[str, type[Matcher]] = {
    kind.KEY: kind for kind in (Regex, Approx, Text, AnyOrder, Contains, DateTime, Present,
                                Predicate)
}


def _fields(kind: type[Matcher]) -> set[str]:
    return {info.alias or name for name, info in kind.model_fields.items()}


def matcher_kind(raw: Mapping[str, Any]) -> type[Matcher] | None:
    """The kind an object of a case's `args` spells, apart from `optional`; None for a literal
    object (one holding other keys than one kind's)."""
    keys = set(raw) - {"optional"}
    for key in keys & MATCHERS.keys():
        kind = MATCHERS[key]
        if keys <= _fields(kind):
            return kind
    return None


def read_matcher(kind: type[Matcher], fields: Mapping[str, Any], key: str, context: Any
                 ) -> Matcher:
    """The matcher `fields` spell for argument `key`; a ValueError in one line naming the key,
    the kind and the first field that is wrong."""
    try:
        return kind.model_validate(fields, context=context)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        why = first["msg"].removeprefix("Value error, ")
        raise ValueError(f"{key}: {kind.KEY} matcher: " + (f"{where}: " if where else "") + why
                         ) from None
