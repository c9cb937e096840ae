"""BFCL's value rules for one parameter, ported from its AST checker: the rule set the checks
apply when a suite's `match.values` is "bfcl" (`callgate.importers.bfcl` writes such suites).

Line references are to bfcl-eval 2026.3.23 (Apache-2.0): `ast_checker.py` is
bfcl_eval/eval_checker/ast_eval/ast_checker.py. docs/bfcl.md states every mapping decision.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from callgate.checks import bfcl_types
from callgate.suites.suite import ArgSpec

# A faithful port of ast_checker.py's per-parameter checks (for Java and JavaScript, after the
# string sent is converted by `bfcl_types`, as BFCL converts it). Python's own
# `==` and `in` are kept wherever BFCL uses them (so 1 == 1.0 == True inside lists and objects,
# exactly as there), and `type(x) == T` wherever BFCL compares types exactly. Where BFCL's code
# would raise on malformed input, the value is judged not to match.

# ast_checker.py:14-23 (PYTHON_TYPE_MAPPING), read back from the JSON Schema the importer wrote:
# BFCL's "float" became "number", "dict" "object", "tuple" "array", "any" "string".
_PY_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
# ast_checker.py:29 (NESTED_CONVERSION_TYPE_LIST): Java and JavaScript types whose items the
# converter converts by the items' declared type.
NESTED_CONVERSION_TYPES = ("Array", "ArrayList", "array")
# What BFCL's checker raises on malformed input (a value that is then not accepted).
_RAISES = (AttributeError, KeyError, TypeError, IndexError, ValueError, NotImplementedError)
_STANDARDIZE = re.compile(r"[ \,\.\/\-\_\*\^]")


def standardize(text: str) -> str:
    """ast_checker.py:174-182: drop spaces and ,./-_*^, lower-case, single quotes to double."""
    if len(text) <= _MEMO_CHARS:
        return _standardize_short(text)
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


# The same few answers are standardized for every attempt: short ones are remembered.
_MEMO_CHARS = 256


@lru_cache(maxsize=8192)
def _standardize_short(text: str) -> str:
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def possible_answer(spec: ArgSpec) -> list[Any]:
    """BFCL's possible-answer list for a callgate spec: the acceptable values, "" if optional."""
    return [*spec.one_of, ""] if spec.optional else list(spec.one_of)


def declared_type(schema: Mapping[str, Any] | None) -> type:
    # A missing or unknown type is a string, as BFCL's _cast_to_openai_type makes it.
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return _PY_TYPES.get(kind, str) if isinstance(kind, str) else str


def _answer_type(answers: Sequence[Any]) -> type | None:
    """ast_checker.py:76-80: the type of the first answer that is not "" (optional)."""
    for answer in answers:
        if answer != "":
            return type(answer)
    return None


def _type_check(
    value: Any, answers: Sequence[Any], expected: type, nested: type | None,
    answer_type: type | None,
) -> tuple[bool, bool]:
    """ast_checker.py:93-171 (type_checker): (valid, is_variable).

    A value of the type of the first possible answer is accepted in place of the declared type:
    BFCL calls that a variable. Items of a list are checked one level deep, against each list
    among the possible answers; any possible answer that is not a list passes that check.
    `answer_type` is `_answer_type(answers)`, which the caller works out (once, for a
    ParamRule).
    """
    is_variable = answer_type is not None and answer_type != expected
    if type(value) == expected:  # noqa: E721 - BFCL compares types exactly (bool is not int)
        if nested is None:
            return True, is_variable
        items: Any = value  # a list: its type is `expected`, and only lists have a nested type
        for answer in answers:
            if type(answer) == list and not all(  # noqa: E721
                _type_check(item, answer, nested, None, _answer_type(answer))[0]
                for item in items
            ):
                continue
            return True, is_variable
        return False, False
    if answer_type is not None and type(value) == answer_type:  # noqa: E721
        return True, True
    return False, False


def _std(value: Any) -> Any:
    return standardize(value) if type(value) == str else value  # noqa: E721


def _list_candidates(answers: Sequence[Any]) -> list[list[Any]] | None:
    """The answers of `_list_ok`, normalised once; None where BFCL's code raises on them."""
    try:
        return [[_std(answer[j]) for j in range(len(answer))] for answer in answers]
    except _RAISES:
        return None


def _list_ok(value: list[Any], candidates: list[list[Any]] | None) -> bool:
    """ast_checker.py:204-235: strings among the items normalised, then list equality.
    `candidates` are the answers normalised (`_list_candidates`).

    An answer "" iterates as no items, so it accepts the empty list.
    """
    if candidates is None:
        return False
    return [_std(item) for item in value] in candidates


class _Raise:
    """What a normalised answer holds where BFCL's code raised on normalising it."""


def _std_answer(answer: Any) -> Any:
    """An answer object of `_dict_ok` with each key's accepted values normalised once (a
    `_Raise` where that raises); the answer itself when it is not a dict."""
    if type(answer) is not dict:
        return answer
    out: dict[Any, Any] = {}
    for key, accepted in answer.items():
        try:
            out[key] = [_std(a) for a in accepted]
        except _RAISES:
            out[key] = _Raise()
    return out


def _dict_ok(value: dict[str, Any], answers: Sequence[Any],
             normalised: Sequence[Any] | None = None) -> bool:
    """ast_checker.py:238-298: every key given is an answer key with a matching value, and
    every answer key left out has "" among its values. Values that are strings are normalised;
    anything else is compared with Python's ==. `normalised`: `_std_answer` of each answer."""
    if normalised is None:
        normalised = [_std_answer(answer) for answer in answers]
    for answer, std in zip(answers, normalised, strict=True):
        if answer == "":
            continue
        valid = True
        for key, item in value.items():
            if key not in answer:
                valid = False
                break
            accepted = std[key] if type(std) is dict else [_std(a) for a in answer[key]]
            if type(accepted) is _Raise:
                raise TypeError(key)
            if _std(item) not in accepted:
                valid = False
                break
        # BFCL checks the missing keys even after a failed value (no effect on the verdict).
        for key, accepted in answer.items():
            if key not in value and "" not in accepted:
                valid = False
                break
        if valid:
            return True
    return False


def _list_dict_ok(value: list[Any], answers: Sequence[Any],
                  normalised: Sequence[Any]) -> bool:
    """ast_checker.py:301-330: same length as an answer, each object as its counterpart.
    `normalised`: for each answer, `_std_answer` of each of its items (None: not a list)."""
    for answer, std in zip(answers, normalised, strict=True):
        if len(value) != len(answer):
            continue
        if all(_dict_ok(value[i], [answer[i]], None if std is None else [std[i]])
               for i in range(len(value))):
            return True
    return False


def param_matches(
    schema: Mapping[str, Any] | None,
    value: Any,
    answers: Sequence[Any],
    source: Mapping[str, str] | None = None,
) -> bool:
    """Whether BFCL accepts `value` for a parameter declared by `schema` (ast_checker.py:382-503).

    `answers` is BFCL's possible-answer list for the parameter ("" meaning it may be left out);
    `schema` is the parameter's JSON Schema as the importer wrote it; `source`, for a Java or
    JavaScript parameter, its BFCL type (`match.source_types`: language, type, items' type).
    """
    return ParamRule(schema, answers, source).matches(value)


class ParamRule:
    """`param_matches` for one parameter, with what depends only on its schema and answers
    worked out once: the checks keep one per expected argument and ask it for every attempt."""

    __slots__ = ("answer_type", "answers", "convert", "expected", "list_answers", "nested",
                 "object_answers", "source", "strings")

    def __init__(
        self,
        schema: Mapping[str, Any] | None,
        answers: Sequence[Any],
        source: Mapping[str, str] | None = None,
    ) -> None:
        self.answers = answers
        self.expected: type | None = declared_type(schema)
        self.nested: type | None = None
        self.source = source
        self.convert: Callable[..., Any] | None = None
        if source is not None:
            self._source_types(source)
        elif (self.expected is list and isinstance(schema, Mapping)
                and isinstance(schema.get("items"), dict)):
            self.nested = declared_type(schema["items"])
        self.answer_type = _answer_type(answers)
        # ast_checker.py:185-201: a string matches when normalised among the normalised answers.
        self.strings = [standardize(a) for a in answers if type(a) == str]  # noqa: E721
        # The answers of the list and object rules, normalised once (ast_checker.py normalises
        # them again for every value).
        self.list_answers: list[list[Any]] | None = None
        self.object_answers: list[Any] = []
        if self.expected is list and self.nested is dict:
            self.object_answers = [[_std_answer(item) for item in answer]
                                   if type(answer) is list else None for answer in answers]
        elif self.expected is list:
            self.list_answers = _list_candidates(answers)
        elif self.expected is dict:
            self.object_answers = [_std_answer(answer) for answer in answers]

    def _source_types(self, source: Mapping[str, str]) -> None:
        """ast_checker.py:404-436: a Java or JavaScript parameter is sent as a string and
        converted by its declared type; a type BFCL has no conversion for never matches."""
        types = bfcl_types.TYPES.get(source.get("language", ""), {})
        self.expected = types.get(source.get("type", ""))
        self.convert = bfcl_types.CONVERTERS.get(source.get("language", ""))
        if source.get("type") in NESTED_CONVERSION_TYPES:
            self.nested = types.get(source.get("items", ""))
            if self.nested is None:
                self.expected = None

    def matches(self, value: Any) -> bool:
        try:
            return self._matches(value)
        except _RAISES:
            return False  # BFCL's checker would raise here: the value is not accepted

    def _matches(self, value: Any) -> bool:
        expected, answers = self.expected, self.answers
        if expected is None:
            return False
        if self.convert is not None and self.source is not None:
            if type(value) != str:  # noqa: E721 - ast_checker.py:410-416, 427-433
                return False
            value = self.convert(value, self.source["type"], self.source.get("items"))
        # ast_checker.py:442-448: an int is accepted for a float (converted, then compared).
        elif expected is float and type(value) == int:  # noqa: E721
            value = float(value)
        valid, is_variable = _type_check(value, answers, expected, self.nested,
                                         self.answer_type)
        if not valid:
            return False
        if not is_variable:
            if expected is dict:
                return _dict_ok(value, answers, self.object_answers)
            if expected is list and self.nested is dict:
                return _list_dict_ok(value, answers, self.object_answers)
            if expected is str:
                return standardize(value) in self.strings
            if expected is list:
                return _list_ok(value, self.list_answers)
        return value in answers
