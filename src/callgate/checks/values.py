"""Key argument values and tool selection: which calls were expected, with which values, under
the suite's match rules (exact, or BFCL's rule set in `bfcl_rules`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from callgate.checks import bfcl_rules, matching
from callgate.checks.matching import json_equal
from callgate.checks.parsing import ParsedCall
from callgate.checks.verdict import ToolVerdict
from callgate.suites.cases import (
    DEFAULT_MATCH,
    ArgSpec,
    ExpectedCall,
    MatchRules,
    Mode,
)


def arg_matches(
    spec: ArgSpec,
    present: bool,
    value: Any,
    rules: MatchRules = DEFAULT_MATCH,
    schema: Mapping[str, Any] | None = None,
) -> bool:
    """`schema` is the parameter's JSON Schema; only `values: bfcl` reads it (declared type).
    (The checks of `calls` use a CallMatcher, which prepares the same test once.)"""
    if not present:
        return spec.optional
    return _value_check(spec, rules, schema)(value)


def _unlisted(expected: ExpectedCall, call: ParsedCall, rules: MatchRules) -> str | None:
    if rules.unlisted_args == "reject":
        for key in call.arguments or {}:
            if key not in expected.args:
                return key
    return None


def call_matches(
    expected: ExpectedCall,
    call: ParsedCall,
    rules: MatchRules = DEFAULT_MATCH,
    schema: Mapping[str, Any] | None = None,
) -> bool:
    """`schema` is the tool's parameters schema (read under `values: bfcl`)."""
    return matcher(expected, rules, schema).matches(call)


def _value_check(
    spec: ArgSpec,
    rules: MatchRules,
    schema: Mapping[str, Any] | None,
    source: Mapping[str, str] | None = None,
) -> Callable[[Any], bool]:
    """arg_matches for a value that is present, prepared once. `source` is the parameter's
    entry in `rules.source_types`, if any (a Java or JavaScript type, under `values: bfcl`)."""
    if spec.matcher is not None:  # a suite under `values: bfcl` holds none (suite check)
        return spec.matcher.matches
    if rules.values == "bfcl":
        return bfcl_rules.ParamRule(schema, bfcl_rules.possible_answer(spec), source).matches
    if len(spec.one_of) == 1:
        return partial(json_equal, spec.one_of[0])
    return lambda value: any(json_equal(accepted, value) for accepted in spec.one_of)


class CallMatcher:
    """`call_matches` for one expected call, under one suite's rules and tool schema, with each
    argument's check prepared once (`matcher` keeps it with the expected call)."""

    __slots__ = ("_described", "args", "listed", "reject_unlisted", "rules", "schema", "specs",
                 "tool")

    def __init__(
        self, expected: ExpectedCall, rules: MatchRules, schema: Mapping[str, Any] | None
    ) -> None:
        self.rules, self.schema, self.tool = rules, schema, expected.tool
        self.specs = expected.args  # not the call itself: it keeps this matcher
        self._described: dict[str, str] = {}
        self.listed = expected.args.keys()
        self.reject_unlisted = rules.unlisted_args == "reject"
        properties = (schema or {}).get("properties", {})
        sources = rules.source_types.get(expected.tool, {})
        self.args = [
            (key, spec.optional, _value_check(spec, rules, properties.get(key), sources.get(key)))
            for key, spec in expected.args.items()
        ]

    def matches(self, call: ParsedCall) -> bool:
        args = call.arguments
        if call.name != self.tool or args is None:
            return False
        if self.reject_unlisted and any(key not in self.listed for key in args):
            return False
        return self.mismatched_key(args) is None

    def described(self, key: str) -> str:
        """`describe` of the expected argument `key`, written once."""
        text = self._described.get(key)
        if text is None:
            text = self._described[key] = describe(self.specs[key])
        return text

    def mismatched_key(self, args: Mapping[str, Any]) -> str | None:
        """The first expected argument whose value does not match (or is left out while not
        optional); None when every one matches. Unlisted arguments are not looked at."""
        for key, optional, check in self.args:
            if key in args:
                if not check(args[key]):
                    return key
            elif not optional:
                return key
        return None


def matcher(
    expected: ExpectedCall, rules: MatchRules, schema: Mapping[str, Any] | None
) -> CallMatcher:
    """The expected call's matcher under these rules and schema, built on first use. It holds
    both, so an id reused by a newer object is never mistaken for them, and the call's
    arguments, so a copy with other arguments (model_copy shares the memo) gets its own."""
    key = (id(rules), id(schema))
    found: CallMatcher | None = expected.memo.get(key)
    if (found is None or found.rules is not rules or found.schema is not schema
            or found.specs is not expected.args):
        found = expected.memo[key] = CallMatcher(expected, rules, schema)
    return found


def describe(spec: ArgSpec) -> str:
    if spec.matcher is not None:
        text = spec.matcher.describe()
    elif len(spec.one_of) == 1:
        text = json.dumps(spec.one_of[0], ensure_ascii=False)
    else:
        text = "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in spec.one_of)
    return text + (" (or left out)" if spec.optional else "")


def value_mismatch(
    expected: ExpectedCall,
    call: ParsedCall,
    rules: MatchRules = DEFAULT_MATCH,
    schema: Mapping[str, Any] | None = None,
) -> str | None:
    """The first key argument of `call` that does not match, as a sentence; None if all do."""
    args = call.arguments or {}
    unlisted = _unlisted(expected, call, rules)
    if unlisted is not None:
        return f"{call.name}.{unlisted}: not an expected argument (the suite rejects unlisted ones)"
    found = matcher(expected, rules, schema)
    key = found.mismatched_key(args)
    if key is None:
        return None
    if key not in args:
        return f"{call.name}.{key}: expected {found.described(key)}, got nothing (left out)"
    got = json.dumps(args[key], ensure_ascii=False)
    text = f"{call.name}.{key}: expected {found.described(key)}, got {got}"
    return text + why_not(expected.args[key], args[key])


def why_not(spec: ArgSpec, got: Any) -> str:
    """` (regex: does not match)`: the matcher and why it failed, for a reason's end; empty
    for listed values, where expected and got say it all."""
    if spec.matcher is None:
        return ""
    return f" ({spec.matcher.KEY}: {spec.matcher.mismatch(got)})"


def _count(names: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return counts


def _wanted(want: Mapping[str, int]) -> str:
    return " + ".join(f"{n}×{c}" if c > 1 else n for n, c in want.items())


def select_tools(
    names: Sequence[str], expected: Sequence[ExpectedCall], mode: Mode
) -> tuple[ToolVerdict, str]:
    """Tool verdict over the whole array of called names against one expected call list."""
    if len(names) == len(expected) == 1 and names[0] == expected[0].tool:
        return "right", ""  # one call of the one tool expected: right in every mode
    want = _count(call.tool for call in expected)
    if not names:
        return "missing_call", f"no tool call; expected {_wanted(want)}"
    if mode != "superset":
        for index, name in enumerate(names):
            if name not in want:
                if index == 0:
                    return "wrong_tool", f"called {name}; expected {_wanted(want)}"
                return "extra_call", (
                    f"call {index + 1} is {name}, which is outside the expectation "
                    f"({_wanted(want)})"
                )
    got = _count(names)
    for name, count in want.items():
        made = got.get(name, 0)
        if made < count and mode != "subset":
            return "missing_call", f"{made} call(s) to {name} where {count} are expected"
        if made > count and mode in ("strict", "unordered", "subset"):
            return "extra_call", f"{made} calls to {name} where {count} are expected"
    return "right", ""


def first_fit_pairing(edges: Sequence[Sequence[int]]) -> list[int | None]:
    """Each left i, in order, takes the first right index still free (BFCL pairs this way)."""
    taken: set[int] = set()
    pairing: list[int | None] = []
    for options in edges:
        right = next((j for j in options if j not in taken), None)
        if right is not None:
            taken.add(right)
        pairing.append(right)
    return pairing


VALUES_DIFFER = "the key arguments do not match"


def _one_each(edges: Sequence[Sequence[int]]) -> bool:
    taken: set[int] = set()
    for options in edges:
        if len(options) > 1 or (options and options[0] in taken):
            return False
        taken.update(options)
    return True


def check_values(
    expected: Sequence[ExpectedCall],
    calls: Sequence[ParsedCall],
    mode: Mode,
    rules: MatchRules = DEFAULT_MATCH,
    schemas: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    explain: bool = True,
) -> str | None:
    """None when the key arguments pair up as the mode requires; else the first mismatch
    (with `explain` False, only VALUES_DIFFER: for a caller that needs only whether they do)."""
    schemas = schemas or {}
    edges = []
    for exp in expected:
        matches = matcher(exp, rules, schemas.get(exp.tool)).matches
        edges.append([j for j, call in enumerate(calls) if matches(call)])
    if rules.pairing == "first_fit":
        pairing = [edges[0][0] if edges[0] else None] if len(edges) == 1 else (
            first_fit_pairing(edges))
    elif _one_each(edges):
        # Each expected call matches at most one call, no call twice: the only maximum matching.
        pairing = [options[0] if options else None for options in edges]
    else:
        # Optimal, not greedy: a call is never paired away from the one it alone can match.
        matched = matching.max_matching(
            range(len(edges)), range(len(calls)), lambda e, j: j in edges[e]
        )
        pairing = [matched.get(e) for e in range(len(edges))]
    if mode != "subset" and None not in pairing:
        return None  # every expected call has its own matching call
    used = {j for j in pairing if j is not None}
    if not explain:
        if mode != "subset" or len(used) < len(calls):
            return VALUES_DIFFER
        return None
    if mode == "subset":
        # Every call made must match a distinct expected call; left-out ones are fine.
        unmatched_calls = [call for j, call in enumerate(calls) if j not in used]
        if not unmatched_calls:
            return None
        call = unmatched_calls[0]
        candidates = [exp for exp in expected if exp.tool == call.name]
        found = (
            value_mismatch(candidates[0], call, rules, schemas.get(call.name))
            if candidates
            else None
        )
        return found or f"call {call.index + 1} ({call.name}) matches no expected call"
    for exp, j in zip(expected, pairing, strict=True):
        if j is not None:
            continue
        same_name = [c for k, c in enumerate(calls) if c.name == exp.tool and k not in used] or [
            c for c in calls if c.name == exp.tool
        ]
        if same_name:
            return (
                value_mismatch(exp, same_name[0], rules, schemas.get(exp.tool))
                or f"{exp.tool}: arguments do not match"
            )
        return f"{exp.tool}: no matching call"
    return None
