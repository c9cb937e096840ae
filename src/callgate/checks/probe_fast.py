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

from collections.abc import Mapping, Sequence
from typing import Any

from jsonschema import Draft7Validator

from callgate.checks.parsing import ParsedCall
from callgate.checks.schema import schema_errors
from callgate.checks.validation import surely_valid
from callgate.checks.values import check_values, select_tools
from callgate.suites.cases import Alternatives, Calls, Case, NoCall
from callgate.suites.suite import MatchRules


def quick_passes(case: Case, calls: Sequence[ParsedCall],
                 schemas: Mapping[str, Mapping[str, Any]],
                 validators: Mapping[str, Draft7Validator], rules: MatchRules) -> bool | None:
    """True/False as `check_response` would score one message making `calls` (its caller
    sees to it that the suite has no environment and the case does not loop); None when
    the case's kind is not one decided here."""
    expect = case.expect
    if isinstance(expect, NoCall):
        # no_call: right with no call; never_right turns a right answer wrong
        return not calls and case.never_right is None
    if not isinstance(expect, Calls | Alternatives):
        return None
    if case.never_right is not None:
        return False  # right arguments are turned wrong
    if any(call.json_error is not None for call in calls):
        return False  # invalid JSON: arguments are never right
    if any(_schema_problem(call, schemas, validators) for call in calls):
        return False  # a schema problem: arguments are never right
    names = [call.name for call in calls]
    mode = expect.mode
    for expected in case.expected_call_lists():
        if select_tools(names, expected, mode)[0] == "right" and check_values(
                expected, calls, mode, rules, schemas, explain=False) is None:
            return True
    return False


def _schema_problem(call: ParsedCall, schemas: Mapping[str, Mapping[str, Any]],
                    validators: Mapping[str, Draft7Validator]) -> bool:
    """True when schema_errors would report anything for this call (argument_problems)."""
    if call.name not in validators:
        return False
    schema, args = schemas[call.name], call.arguments or {}
    extras = isinstance(schema.get("additionalProperties"), dict) or (
        "patternProperties" in schema)
    properties = schema.get("properties", {})
    if not extras and any(key not in properties for key in args):
        return True  # an unknown parameter
    required = validators[call.name].schema.get("required")
    if isinstance(required, list) and any(
            isinstance(key, str) and key not in args for key in required):
        return True  # jsonschema's `required` error, always reported
    if surely_valid(validators[call.name], args):
        return False
    return bool(schema_errors(call.name, schema, validators[call.name], args))
