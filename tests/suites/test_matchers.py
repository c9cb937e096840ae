"""Argument matchers: each kind's match and mismatch reason through a loaded suite, suite
check's refusal of an expected value no answer could match, predicates defined beside the
suite, and a property test holding the refusal to what the matchers accept."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from factories import calls, case, line, message, tool_call, write_suite
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate.checks.check import check_response
from callgate.checks.kinds.trajectory import match_calls
from callgate.checks.parsing import ParsedCall
from callgate.checks.verdict import Verdict
from callgate.errors import InputError
from callgate.suites import regex_sets, schemas
from callgate.suites.case_checks import feasibility
from callgate.suites.case_table import CaseTable
from callgate.suites.cases import Trajectory
from callgate.suites.matchers import (
    MATCHERS,
    AnyOrder,
    Approx,
    Contains,
    DateTime,
    Matcher,
    Present,
    Regex,
    Text,
)
from callgate.suites.regex_sets import UNDECIDED, common_string
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite, lint, load_suite

PROPERTIES: dict[str, Any] = {
    "order_id": {"type": "string", "pattern": "^ord_[0-9]+$"},
    "city": {"type": "string"},
    "size": {"type": "string", "enum": ["S", "M", "L"]},
    "amount": {"type": "number", "minimum": 0, "maximum": 1000},
    "count": {"type": "integer", "minimum": 1, "maximum": 9},
    "items": {"type": "array", "items": {"type": "string"}},
    "filters": {"type": "object", "properties": {"colour": {"type": "string"}},
                "additionalProperties": False},
    "when": {"type": "string", "format": "date-time"},
    "day": {"type": "string", "format": "date"},
    "at": {"type": "string"},
    "note": {"type": ["string", "null"]},
    "free": {},
}
BOOK = {"type": "function", "function": {
    "name": "book", "parameters": {"type": "object", "properties": PROPERTIES}}}


def book_suite(root: Path, args: dict[str, Any], **extra: Any) -> Path:
    return write_suite(root, [case("c", calls(("book", args)), **extra)], [BOOK])


def checked(suite: Suite, args: dict[str, Any]) -> Verdict:
    response = parse_response(line("c", message(tool_call("book", args))))
    return check_response(suite.cases["c"], response, suite.parameter_schemas, suite.validators,
                          rules=suite.match)


# key, matcher, a value it matches, one it does not, the words of that mismatch's reason
KINDS = [
    ("order_id", {"regex": "^ord_7"}, "ord_7281", "ord_8281",
     'book.order_id: expected regex "^ord_7", got "ord_8281" (regex: does not match)'),
    ("amount", {"approx": 20, "abs": 0.5}, 20.4, 20.6,
     "book.amount: expected approx 20 ± 0.5, got 20.6 (approx: off by 0.6, more than 0.5)"),
    ("amount", {"approx": 200, "rel": 0.01}, 198, 197.5,
     "expected approx 200 ± 2, got 197.5 (approx: off by 2.5, more than 2)"),
    ("free", {"approx": 5, "abs": 1}, 5, "5",
     "(approx: not a number)"),
    ("city", {"text": "New York"}, "  new   YORK ", "Newark",
     "(text: differs beyond case and spacing)"),
    ("items", {"any_order": ["a", "b", "a"]}, ["a", "a", "b"], ["a", "b", "b"],
     '(any_order: has no item equal to "a")'),
    ("items", {"any_order": ["a", "b"]}, ["b", "a"], ["b", "a", "c"],
     "(any_order: 3 items where 2 are expected)"),
    ("items", {"contains": ["b"]}, ["a", "b", "c"], ["a", "c"],
     '(contains: has no item equal to "b")'),
    ("filters", {"contains": {"colour": "red"}}, {"colour": "red"}, {"colour": "blue"},
     '(contains: colour is "blue", not "red")'),
    ("filters", {"contains": {"colour": "red"}}, {"colour": "red"}, {},
     '(contains: no key "colour")'),
    ("when", {"datetime": "2026-12-01T10:00:00+01:00"}, "2026-12-01T09:00:00Z",
     "2026-12-01T10:00:00Z",
     "(datetime: is 2026-12-01T10:00:00Z, not 2026-12-01T09:00:00Z)"),
    ("at", {"datetime": "2026-12-01T10:00:00Z"}, "2026-12-01T12:00:00.000+02:00",
     "2026-12-01T10:00:00", "(datetime: has no time zone)"),
    ("day", {"datetime": "2026-12-01"}, "2026-12-01", "2026-12-02",
     "(datetime: is 2026-12-02, not 2026-12-01)"),
    ("at", {"datetime": "2026-12-01"}, "20261201", "2026-12-01T00:00:00",
     "(datetime: a date and time, not a date)"),
    ("at", {"datetime": "14:30"}, "14:30:00", "2:30 pm",
     "(datetime: not an ISO 8601 date or time)"),
    ("note", {"present": True}, None, "(left out)", "book.note: expected present (any value), "
     "got nothing (left out)"),
]


@pytest.mark.parametrize(("key", "spec", "good", "bad", "reason"), KINDS,
                         ids=[f"{k}-{next(iter(s))}" for k, s, *_ in KINDS])
def test_each_matcher_matches_and_says_why_not(tmp_path: Path, key: str, spec: dict,
                                               good: Any, bad: Any, reason: str) -> None:
    suite = load_suite(book_suite(tmp_path / "s", {key: spec}))
    right = checked(suite, {key: good})
    assert (right.arguments, right.arguments_reason) == ("right", "")
    wrong = checked(suite, {} if bad == "(left out)" else {key: bad})
    assert wrong.arguments == "wrong_value"
    assert reason in wrong.arguments_reason


@pytest.mark.parametrize(("matcher", "got", "why", "right"), [
    # a wanted null is an item like any other: it was once read as "nothing missing"
    (Contains(contains=(None,)), [], "has no item equal to null", [None]),
    (Contains(contains=(None,)), [1], "has no item equal to null", [1, None]),
    (AnyOrder(any_order=(None, 1)), [1, 2], "has no item equal to null", [1, None]),
])
def test_a_wanted_null_item_must_be_there(matcher: Any, got: Any, why: str, right: Any) -> None:
    assert matcher.mismatch(got) == why
    assert matcher.mismatch(right) is None


def test_every_kind_is_exercised() -> None:
    assert {next(iter(spec)) for _, spec, *_ in KINDS} | {"predicate"} == set(MATCHERS)


def test_an_optional_matcher_may_be_left_out(tmp_path: Path) -> None:
    suite = load_suite(book_suite(tmp_path / "s", {"city": {"text": "Oslo", "optional": True}}))
    assert checked(suite, {}).right_arguments
    assert checked(suite, {"city": "OSLO"}).right_arguments
    assert not checked(suite, {"city": "Bergen"}).right_arguments


def test_a_literal_object_that_is_no_matcher_is_compared_as_before(tmp_path: Path) -> None:
    # Keys beyond one kind's own make a literal; one_of wraps an object that looks like one.
    suite = load_suite(book_suite(tmp_path / "s", {
        "filters": {"one_of": [{"colour": "red"}]},
        "items": {"one_of": [["regex"]]},
    }))
    assert checked(suite, {"filters": {"colour": "red"}, "items": ["regex"]}).right_arguments


def test_a_trajectory_mismatch_names_the_matcher_and_why(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path / "s", [case("t", {
        "type": "trajectory", "calls": [{"tool": "book", "args": {"amount": {
            "approx": 10, "abs": 1}}}]})], [BOOK]))
    expect = suite.cases["t"].expect
    assert isinstance(expect, Trajectory)
    got = ParsedCall(index=0, name="book", arguments={"amount": 12}, json_error=None)
    result = match_calls(expect, [got], [0], suite.match, suite.parameter_schemas)
    assert not result.ok
    assert "expected approx 10 ± 1, got 12 (approx: off by 2, more than 1)" in result.reason


REFUSED = [
    ("size", {"regex": "^X"}, "it matches none of the values the schema's enum allows"),
    ("order_id", {"regex": "^inv_1$"}, "no value it matches passes the schema ('inv_1' does "
     "not match"),
    ("amount", {"regex": "1"}, "it matches only string, and the schema takes only number"),
    ("amount", {"approx": 2000, "abs": 5}, "2000.0 is greater than the maximum of 1000"),
    ("amount", {"approx": -3, "rel": 0.5}, "is less than the minimum of 0"),
    ("count", {"approx": 5.5, "abs": 0.25}, "no value it matches passes the schema"),
    ("count", {"approx": 20, "abs": 3}, "is greater than the maximum of 9"),
    ("size", {"text": "xl"}, "it matches none of the values the schema's enum allows"),
    ("city", {"any_order": ["a"]}, "it matches only array, and the schema takes only string"),
    ("items", {"any_order": ["a", 1]}, "1 is not of type 'string'"),
    ("items", {"contains": [2]}, "2 is not of type 'string'"),
    ("filters", {"contains": {"size": "S"}}, "Additional properties are not allowed"),
    ("filters", {"contains": ["x"]}, "it matches only array, and the schema takes only object"),
    ("when", {"datetime": "2026-12-01T10:00:00"}, "is not a 'date-time'"),
    ("when", {"datetime": "2026-12-01"}, "is not a 'date-time'"),
    ("day", {"datetime": "2026-12-01T10:00:00Z"}, "is not a 'date'"),
    ("amount", {"datetime": "2026-12-01"}, "it matches only string"),
]


@pytest.mark.parametrize(("key", "spec", "words"), REFUSED,
                         ids=[f"{k}-{json.dumps(s)}" for k, s, _ in REFUSED])
def test_suite_check_refuses_an_expected_value_no_answer_can_match(
        tmp_path: Path, key: str, spec: dict, words: str) -> None:
    with pytest.raises(InputError) as info:
        load_suite(book_suite(tmp_path / "s", {key: spec}))
    error = info.value
    assert error.line == 1 and error.field == f"expect.calls[0].args.{key}"
    assert "can never match" in str(error) and words in str(error), str(error)


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"nope": {"regex": "a"}}, "expect.calls[0].args.nope", "'nope' is not a parameter of book"),
    ({"city": {"regex": "(?=a)b"}}, "expect.calls[0].args.city",
     "regex matcher: \"(?=a)b\" uses lookaround"),
    ({"amount": {"approx": 3}}, "expect.calls[0].args.amount",
     "approx matcher: approx needs a tolerance"),
    ({"amount": {"approx": 3, "abs": -1}}, "expect.calls[0].args.amount", "abs: Input should be "
     "greater than or equal to 0"),
    ({"amount": {"approx": True, "abs": 1}}, "expect.calls[0].args.amount",
     "approx: Input should be a valid number"),
    ({"at": {"datetime": "next tuesday"}}, "expect.calls[0].args.at", "is not an ISO 8601 date"),
    ({"note": {"present": False}}, "expect.calls[0].args.note", "present: Input should be True"),
    ({"city": {"text": "x", "optional": "yes"}}, "expect.calls[0].args.city",
     "optional must be true or false"),
    ({"city": {"predicate": "not a name"}}, "expect.calls[0].args.city", "predicate matcher"),
])
def test_a_malformed_matcher_names_the_line_and_field(tmp_path: Path, spec: dict, field: str,
                                                       words: str) -> None:
    with pytest.raises(InputError) as info:
        load_suite(book_suite(tmp_path / "s", spec))
    assert info.value.line == 1 and info.value.field == field, str(info.value)
    assert words in str(info.value), str(info.value)


@pytest.mark.parametrize(("key", "spec"), [
    ("order_id", {"regex": "^ord_7\\d+$"}),  # a string the pattern takes is found
    ("amount", {"approx": 1000, "abs": 5}),  # the window overlaps the maximum
    ("count", {"approx": 5.5, "abs": 0.5}),  # 5 and 6 are integers in it
    ("when", {"datetime": "2026-12-01T10:00:00+01:00"}),
    ("filters", {"contains": {}}),
    ("note", {"present": True}),
])
def test_suite_check_takes_an_expected_value_some_answer_can_match(tmp_path: Path, key: str,
                                                                    spec: dict) -> None:
    load_suite(book_suite(tmp_path / "s", {key: spec}))


def test_suite_check_warns_about_a_matcher_it_cannot_decide(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "book", "parameters": {
        "type": "object", "properties": {
            "code": {"type": "string", "pattern": "\\p{Lu}"},
            "n": {"type": "number", "multipleOf": 7}}}}}]
    root = write_suite(tmp_path / "s", [case("c", calls(("book", {
        "code": {"regex": "^[a-z]+$"}, "n": {"approx": 3, "abs": 4}})))], tools)
    warnings = lint(load_suite(root))
    assert ("case c: book.code: found no value the schema allows that regex \"^[a-z]+$\" "
            "matches, nor could show there is none") in warnings
    assert not any("book.n" in warning for warning in warnings)  # 0 and 7 are in the window


def test_matchers_are_refused_under_bfcl_values(tmp_path: Path) -> None:
    root = book_suite(tmp_path / "s", {"city": {"text": "Oslo"}})
    (root / "suite.json").write_text(json.dumps({"match": {"values": "bfcl"}}))
    with pytest.raises(InputError) as info:
        load_suite(root)
    assert info.value.field == "expect.calls[0].args.city"
    assert "text matcher is not read under the suite's match values \"bfcl\"" in str(info.value)


PREDICATES = '''
def is_even(value):
    if not isinstance(value, int):
        return "not an integer"
    return value % 2 == 0


def explodes(value):
    raise RuntimeError("boom")
'''


def test_a_predicate_beside_the_suite_decides_and_says_why(tmp_path: Path) -> None:
    root = book_suite(tmp_path / "s", {"free": {"predicate": "rules:is_even"}})
    (root / "rules.py").write_text(PREDICATES)
    suite = load_suite(root)
    assert checked(suite, {"free": 4}).right_arguments
    odd = checked(suite, {"free": 3})
    assert odd.arguments_reason == ("book.free: expected predicate rules:is_even, got 3 "
                                    "(predicate: rules:is_even returned False)")
    words = checked(suite, {"free": 2.5})
    assert words.arguments_reason.endswith("(predicate: not an integer)")


def test_a_predicate_that_raises_is_a_named_mismatch(tmp_path: Path) -> None:
    root = book_suite(tmp_path / "s", {"count": {"predicate": "rules:explodes"}})
    (root / "rules.py").write_text(PREDICATES)
    verdict = checked(load_suite(root), {"count": 4})
    assert verdict.arguments == "wrong_value"
    assert "rules:explodes raised RuntimeError('boom')" in verdict.arguments_reason


def test_a_predicate_is_found_again_when_its_case_is_built_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CaseTable, "CACHE", 1)
    root = write_suite(tmp_path / "s", [
        case(name, calls(("book", {"count": {"predicate": "rules:is_even"}})))
        for name in ("c", "d")], [BOOK])
    (root / "rules.py").write_text(PREDICATES)
    suite = load_suite(root)
    assert suite.cases["d"].id == "d"  # evicts c, which is built from its JSON text again
    assert checked(suite, {"count": 4}).right_arguments
    assert not checked(suite, {"count": 5}).right_arguments


def test_the_predicates_code_is_in_the_fingerprint(tmp_path: Path) -> None:
    root = book_suite(tmp_path / "s", {"count": {"predicate": "rules:is_even"}})
    (root / "rules.py").write_text(PREDICATES)
    before = load_suite(root).fingerprint
    (root / "rules.py").write_text(PREDICATES.replace("== 0", "== 1"))
    after = load_suite(root)
    assert after.fingerprint != before
    assert checked(after, {"count": 3}).right_arguments


@pytest.mark.parametrize(("source", "words"), [
    (None, "cannot import rules"),
    ("def other(v):\n    return True\n", "rules has no function is_even"),
    ("raise ImportError('broken')\n", "cannot import rules: broken"),
])
def test_a_predicate_that_cannot_be_loaded_names_the_line(tmp_path: Path, source: str | None,
                                                          words: str) -> None:
    root = book_suite(tmp_path / "s", {"count": {"predicate": "rules:is_even"}})
    if source is not None:
        (root / "rules.py").write_text(source)
    with pytest.raises(InputError) as info:
        load_suite(root)
    assert info.value.line == 1 and words in str(info.value)


@pytest.mark.slow
def test_suite_check_refuses_through_the_cli(tmp_path: Path, callgate_exe: str) -> None:
    root = book_suite(tmp_path / "s", {"amount": {"approx": 2000, "abs": 5}})
    result = subprocess.run([callgate_exe, "suite", "check", str(root)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith("error: ") and "cases.jsonl:1: expect.calls[0].args.amount: " \
        "approx 2000 ± 5 can never match" in lines[0]


@pytest.mark.parametrize(("patterns", "expected"), [
    (["^ord_7\\d+$", "^ord_[0-9]+$"], "ord_70"),
    (["^ord_[0-9]+$", "^inv_"], None),
    (["^a+$", "^b"], None),
    (["^a{2,4}$", "^a{5}"], None),
    (["[^a-z]", "^[a-z]*$"], None),
    (["^\\w+@\\w+\\.\\w{2,}$", "^[^@]+@example\\.com$"], "a@example.com"),
    (["(?=a)", "a"], UNDECIDED),  # lookaround: not modelled
    (["\\p{L}", "a"], UNDECIDED),  # ECMA syntax Python's parser does not read
])
def test_two_patterns_share_a_string_or_provably_none(patterns: list[str], expected: Any
                                                      ) -> None:
    found = common_string(patterns)
    assert found == expected if isinstance(expected, str | None) else found is expected
    if isinstance(found, str):
        assert all(schemas.search(pattern, found) for pattern in patterns)


@pytest.mark.parametrize(("pattern", "ranges"), [
    ("^\\s$", regex_sets._SPACE), ("^\\d$", regex_sets._DIGIT), ("^\\w$", regex_sets._WORD),
    ("^.$", regex_sets._DOT)])
def test_the_modelled_classes_are_the_engines(pattern: str, ranges: Any) -> None:
    points = [*range(0x3100), *range(0xFE00, 0x10000), 0x1F600, 0x10FFFF]
    differ = [hex(point) for point in points if not 0xD800 <= point <= 0xDFFF
              and schemas.search(pattern, chr(point))
              != any(low <= point <= high for low, high in ranges)]
    assert differ == []


# ------------------------------------------------------------------ the property test

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-12, 12), st.sampled_from([0.5, 2.25, -3.5, 1e3]),
    st.sampled_from(["a", "A", "ab", "ord_1", "ord_12", "x", "New York", " new  york ",
                     "2026-12-01", "2026-12-01T10:00:00Z", "2026-12-01T11:00:00+01:00",
                     "2026-12-01T10:00:00", "10:00:00+00:00", "10:00:00", ""]),
)
REGEXES = ["^a$", "^ord_1$", "^ord_[0-9]+$", "a", "^x", "ord", "^[a-c]+$", "^(a|ab)$",
           "\\d", "^New York$", "^$"]
MOMENTS = ["2026-12-01", "2026-12-01T10:00:00Z", "2026-12-01T11:00:00+01:00",
           "2026-12-01T10:00:00", "10:00:00+00:00", "10:00:00", "11:00+01:00"]


@functools.cache
def matchers() -> st.SearchStrategy[Matcher]:
    items = st.lists(SCALARS, max_size=3)
    return st.one_of(
        st.builds(Regex, regex=st.sampled_from(REGEXES)),
        st.builds(lambda x, a, r: Approx(approx=x, abs=a, rel=r),
                  st.sampled_from([0, 0.5, 3, 7.5, -2, 100]),
                  st.sampled_from([0.25, 1, 4]), st.sampled_from([0, 0.1])),
        st.builds(lambda x: Approx(approx=x, rel=0.1), st.sampled_from([0.5, 3, 7.5, -2, 100])),
        st.builds(Text, text=st.sampled_from(["a", "New York", "ab", " x "])),
        st.builds(AnyOrder, any_order=items),
        st.builds(Contains, contains=items | st.dictionaries(
            st.sampled_from(["a", "b"]), SCALARS, max_size=2)),
        st.builds(lambda text: DateTime(datetime=text), st.sampled_from(MOMENTS)),
        st.just(Present(present=True)),
    )


TYPES = st.sampled_from(["string", "number", "integer", "array", "object", "boolean", "null"])


@functools.cache
def property_schemas(kind: type[Matcher]) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas of the keywords suite check decides for this kind (type, enum and const for
    every kind; bounds for numbers, lengths, formats and literal patterns for strings, array
    and object keywords for the collections)."""
    optional: dict[str, st.SearchStrategy[Any]] = {
        "type": TYPES | st.lists(TYPES, min_size=1, max_size=3, unique=True)}
    if kind is Approx:
        bound = st.sampled_from([-5, 0, 1, 2.5, 3, 7, 8, 100])
        optional |= {"minimum": bound, "maximum": bound, "exclusiveMinimum": bound,
                     "exclusiveMaximum": bound}
    elif kind is Text:
        optional["minLength"] = st.integers(0, 12)
    elif kind is Regex:
        optional["pattern"] = st.sampled_from(REGEXES)
    elif kind is DateTime:
        optional["format"] = st.sampled_from(["date", "date-time", "time"])
    elif kind in (AnyOrder, Contains):
        item = st.fixed_dictionaries({}, optional={"type": TYPES, "enum": st.lists(
            SCALARS, min_size=1, max_size=3)})
        optional |= {"items": item, "maxItems": st.integers(0, 4), "uniqueItems": st.booleans(),
                     "additionalProperties": st.booleans(),
                     "properties": st.dictionaries(st.sampled_from(["a", "b"]), item,
                                                   max_size=2)}
        if kind is AnyOrder:
            optional |= {"minItems": st.integers(0, 4), "contains": item}
    plain = st.fixed_dictionaries({}, optional=optional)
    enums = st.fixed_dictionaries({"enum": st.lists(SCALARS, min_size=1, max_size=4)},
                                  optional={"type": TYPES})
    return st.one_of(plain, enums, st.builds(lambda value: {"const": value}, SCALARS))


def universe(matcher: Matcher, schema: dict[str, Any], extra: list[Any]) -> list[Any]:
    """Answers to try: near the matcher's own value and the schema's, and random ones."""
    values: list[Any] = [*extra, *schema.get("enum", ()), schema.get("const")]
    if isinstance(matcher, Approx):
        low, high = matcher.approx - matcher.tolerance, matcher.approx + matcher.tolerance
        steps = 40
        values += [low + (high - low) * i / steps for i in range(steps + 1)]
        values += list(range(int(low) - 1, int(high) + 2))
    if isinstance(matcher, Text | Regex):
        text = matcher.text if isinstance(matcher, Text) else matcher.regex.strip("^$")
        values += [text, text.upper(), text.lower(), f"  {text} ", text + "     " * 3]
    if isinstance(matcher, DateTime):
        values += [*MOMENTS, "2026-12-01T09:00:00-01:00", "2026-12-01T10:00:00+00:00",
                   "10:00:00Z", "2026-12-01 10:00:00Z"]
    if isinstance(matcher, AnyOrder):
        values += [list(reversed(matcher.any_order)), list(matcher.any_order)]
    if isinstance(matcher, Contains):
        given = matcher.contains
        if isinstance(given, dict):
            values += [dict(given), {**given, "a": 1}, {**given, "b": "x"}, {"a": 1, "b": 1}]
        else:
            values += [list(given), [*given, 1], [*given, "a"], ["a", *given]]
    return values


def agrees(data: st.DataObject) -> None:
    """A value suite check accepts can be matched by a schema-valid answer (its witness is
    one); a refused one by no answer tried."""
    matcher = data.draw(matchers())
    schema = data.draw(property_schemas(type(matcher)))
    validator = schemas.tool_validator(schema)
    found = feasibility(matcher, validator)
    if found.refusal is None:
        assert found.found, f"undecided on a schema suite check decides: {schema}"
        assert validator.is_valid(found.witness) and matcher.matches(found.witness)
        return
    extra = data.draw(st.lists(SCALARS | st.lists(SCALARS, max_size=3), max_size=6))
    for answer in universe(matcher, schema, extra):
        assert not (validator.is_valid(answer) and matcher.matches(answer)), (
            f"refused ({found.refusal}) but {answer!r} matches and passes {schema}")


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_refusal_agrees_with_what_each_matcher_accepts(data: st.DataObject) -> None:
    agrees(data)


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("CALLGATE_MATCHER_EXAMPLES", "600")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_refusal_agrees_with_what_each_matcher_accepts_at_length(
        data: st.DataObject) -> None:
    agrees(data)
