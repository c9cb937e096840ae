"""Whether a made-up answer of the probe (checks/probe.py) passes, without the verdict.

The probe needs only pass or fail for most of its answers (do-nothing, perturbed, an oracle
that passes); only a failing oracle's reason is shown. For the commonest cases (`calls`,
`alternatives` and `no_call`, one message, no environment) this decides pass or fail with the
same functions `check_response` uses (select_tools, check_values, the compiled schema check),
without building a Verdict or explaining a failure; anything else returns None and the caller
asks `check_response`. Passing means what the probe's `_passes` means: scored, right tool and
right arguments. tests/checks/test_probe_same.py compares the probe's findings with the
implementation that asked `check_response` every time."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jsonschema import Draft7Validator

from callgate.checks.parsing import ParsedCall
from callgate.checks.schema import schema_errors
from callgate.checks.validation import surely_valid
from callgate.checks.values import check_values, matcher, select_tools
from callgate.suites.cases import Alternatives, Calls, Case, Mode, NoCall
from callgate.suites.suite import MatchRules

_DEEP = 32  # well within reading.MAX_DEPTH
_LONG = 10_000  # characters of strings: far within reading.MAX_ARGUMENTS_CHARS


def read_back(args: Mapping[str, Any] | str) -> dict[str, Any] | None:
    """What `parse_calls` reads from `json.dumps(args)` (for a dict) or from `args` (text),
    without writing and reading it: `args` itself, for arguments of plain JSON types only
    (str keys; str, bool, None, finite float, int under 19 digits, lists and dicts of them,
    not deep, not long), for which the round trip gives an equal value of the same types;
    None for anything else (the caller writes and reads it). Not a copy: the quick path only
    reads it."""
    if args == "{}":
        return {}  # the junk call's
    if type(args) is not dict:
        return None
    budget = [_LONG]
    return args if _plain(args, 0, budget) else None


def _plain(value: Any, depth: int, budget: list[int]) -> bool:
    kind = type(value)
    if kind is str:
        budget[0] -= len(value)
        return budget[0] >= 0
    if kind is bool or value is None:
        return True
    if kind is int:
        return bool(abs(value) < 10 ** 18)
    if kind is float:
        return bool(value - value == 0)  # not NaN or infinite
    if depth >= _DEEP:
        return False
    if kind is list:
        return all(_plain(item, depth + 1, budget) for item in value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            budget[0] -= len(key)
            if budget[0] < 0 or not _plain(item, depth + 1, budget):
                return False
        return True
    return False


class QuickCase:
    """One case's quick pass/fail: what `check_response` would score as right, for one
    message making some calls, in a suite without an environment where the case does not
    loop (the caller sees to both). `kind` None: not decided here."""

    __slots__ = ("kind", "lists", "mode", "never_right", "rules", "schemas", "single",
                 "validators")

    def __init__(self, case: Case, schemas: Mapping[str, Mapping[str, Any]],
                 validators: Mapping[str, Draft7Validator], rules: MatchRules) -> None:
        expect = case.expect
        self.kind = ("no_call" if isinstance(expect, NoCall) else "calls"
                     if isinstance(expect, Calls | Alternatives) else None)
        self.never_right = case.never_right is not None
        self.lists = case.expected_call_lists()
        self.mode: Mode = expect.mode if isinstance(expect, Calls | Alternatives) else "strict"
        self.schemas, self.validators, self.rules = schemas, validators, rules
        self.single = (self.lists[0][0] if len(self.lists) == 1 and len(self.lists[0]) == 1
                       else None)

    def passes(self, calls: Sequence[ParsedCall], problem: Callable[[int], bool]) -> bool:
        """Scored, right tool and right arguments; `problem(i)`: has_schema_problem of call
        i (argument_problems: a JSON or schema problem makes the arguments wrong)."""
        if self.kind == "no_call":
            # no_call: right with no call; never_right turns a right answer wrong
            return not calls and not self.never_right
        if self.never_right:
            return False  # right arguments are turned wrong
        for call in calls:
            if call.json_error is not None:
                return False  # invalid JSON: arguments are never right
        for index in range(len(calls)):
            if problem(index):
                return False  # a schema problem: arguments are never right
        single = self.single
        if single is not None and len(calls) == 1 and calls[0].name == single.tool:
            # one call of the one tool expected: right in every mode when it matches, and
            # check_values pairs them exactly then (as check_response's right_single_call)
            return matcher(single, self.rules, self.schemas.get(single.tool)).matches(calls[0])
        names = [call.name for call in calls]
        for expected in self.lists:
            if select_tools(names, expected, self.mode)[0] == "right" and check_values(
                    expected, calls, self.mode, self.rules, self.schemas,
                    explain=False) is None:
                return True
        return False


def has_schema_problem(call: ParsedCall, schemas: Mapping[str, Mapping[str, Any]],
                    validators: Mapping[str, Draft7Validator]) -> bool:
    """True when schema_errors would report anything for this call (argument_problems)."""
    validator = validators.get(call.name)
    if validator is None:
        return False
    schema, args = schemas[call.name], call.arguments or {}
    if not (isinstance(schema.get("additionalProperties"), dict)
            or "patternProperties" in schema):
        properties = schema.get("properties", {})
        for key in args:
            if key not in properties:
                return True  # an unknown parameter
    required = validator.schema.get("required")
    # (Draft 7 ignores the keywords beside a top-level $ref: jsonschema reports no `required`)
    if isinstance(required, list) and "$ref" not in validator.schema:
        for key in required:
            if isinstance(key, str) and key not in args:
                return True  # jsonschema's `required` error, always reported
    if surely_valid(validator, args):
        return False
    return bool(schema_errors(call.name, schema, validator, args))
