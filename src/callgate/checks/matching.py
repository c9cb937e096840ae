"""Compare the tool calls of a run with reference calls in one of four trajectory modes.

Pairing is a maximum bipartite matching (augmenting paths), never greedy first-fit, so a
looser argument rule can never produce a false negative through an unlucky early choice.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate.suites.cases import ArgRule, Mode
from callgate.suites.matchers import json_equal as json_equal  # named here for its users

ValueMatch = Callable[[Any, Any], bool]  # (expected spec, got) -> bool


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


# What a ValueMatch receives as `got` for an argument the call left out: returning True
# accepts the omission (an optional key argument). json_equal never equals it.
MISSING: Any = _Missing()


@dataclass(frozen=True)
class Call:
    """One call actually made. `step` is the index of the assistant message it came in."""

    name: str
    arguments: Mapping[str, Any]
    step: int


@dataclass(frozen=True)
class ReferenceStepCall:
    """One reference call. Calls sharing a `step` may be made in any order among themselves.

    Under rule "key" only the keys given here are compared; under "exact" this is the full
    argument object.
    """

    name: str
    arguments: Mapping[str, Any]
    step: int


@dataclass(frozen=True)
class Mismatch:
    """One reason a trajectory failed.

    `step` and `call_index` locate the actual call (index into the actual sequence); for a
    missing call, `step` is the reference step and `call_index` is None.
    """

    step: int | None
    call_index: int | None
    tool: str
    argument: str | None
    expected: Any
    got: Any
    message: str


@dataclass(frozen=True)
class TrajectoryResult:
    ok: bool
    pairs: tuple[tuple[int, int], ...]  # (expected index, actual index), sorted
    mismatches: tuple[Mismatch, ...]
    reason: str


def match_trajectory(
    actual: Sequence[Call],
    expected: Sequence[ReferenceStepCall],
    mode: Mode = "strict",
    *,
    args: ArgRule = "key",
    per_tool: Mapping[str, ArgRule] | None = None,
    value_match: ValueMatch = json_equal,
) -> TrajectoryResult:
    """Pair actual calls with expected calls under `mode` and explain any failure."""
    rules = per_tool or {}

    def diffs(e: int, a: int) -> list[Mismatch]:
        rule = rules.get(expected[e].name, args)
        return _argument_diffs(expected[e], actual[a], a, rule, value_match)

    # Edges go to actual calls in step order, so the matching tends to respect order;
    # that keeps order diagnostics free of needless crossings.
    by_position = sorted(range(len(actual)), key=lambda a: (actual[a].step, a))
    edges = [
        {a for a in by_position if actual[a].name == call.name and not diffs(e, a)}
        for e, call in enumerate(expected)
    ]
    matching = max_matching(
        sorted(range(len(expected)), key=lambda e: (expected[e].step, e)),
        by_position,
        lambda e, a: a in edges[e],
    )
    need_expected = mode != "subset"
    need_actual = mode != "superset"
    unpaired_e = [e for e in range(len(expected)) if e not in matching]
    paired_a = set(matching.values())
    unpaired_a = [a for a in range(len(actual)) if a not in paired_a]

    if (need_expected and unpaired_e) or (need_actual and unpaired_a):
        mismatches = _leftover_mismatches(
            actual, expected, unpaired_e, unpaired_a, need_expected, need_actual, diffs
        )
        return _result(matching, mismatches)
    if mode == "strict" and expected:
        ordered = _ordered_pairing(actual, expected, edges)
        if ordered is None:
            matching = _uncross(matching, actual, expected, edges)
            return _result(matching, _order_mismatches(matching, actual, expected))
        matching = ordered
    return _result(matching, [])


def _argument_diffs(
    exp: ReferenceStepCall, call: Call, index: int, rule: ArgRule, value_match: ValueMatch
) -> list[Mismatch]:
    if rule == "ignore":
        return []
    where = f"step {call.step + 1}, call {index + 1} {call.name}"  # counted from 1, as shown
    found = []
    for key, want in exp.arguments.items():
        if key not in call.arguments:
            if value_match(want, MISSING):
                continue
            message = f"{where}: argument {key} missing, expected {_show(want)}"
            found.append(Mismatch(call.step, index, call.name, key, want, None, message))
        elif not value_match(want, call.arguments[key]):
            got = call.arguments[key]
            message = f"{where}: argument {key} expected {_show(want)}, got {_show(got)}"
            if hasattr(want, "why_not"):  # a matcher (checks.kinds.trajectory) says why
                message += want.why_not(got)
            found.append(Mismatch(call.step, index, call.name, key, want, got, message))
    if rule == "exact":
        for key, got in call.arguments.items():
            if key not in exp.arguments:
                message = f"{where}: unexpected argument {key}={_show(got)}"
                found.append(Mismatch(call.step, index, call.name, key, None, got, message))
    return found


def _show(value: Any, limit: int = 60) -> str:
    """A value as JSON, as every other reason shows it (true, "C"; not True, 'C')."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except TypeError:  # a key-argument rule (checks.kinds.trajectory) describes itself in JSON
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def max_matching(
    left: Sequence[int], right: Sequence[int], linked: Callable[[int, int], bool]
) -> dict[int, int]:
    """Maximum bipartite matching by augmenting paths (Kuhn), O(V * E); returns left -> right.

    The depth-first search is iterative so a step with thousands of calls cannot overflow
    Python's recursion limit.
    """
    adjacent = {u: [v for v in right if linked(u, v)] for u in left}
    owner: dict[int, int] = {}
    for root in left:
        seen: set[int] = set()
        # Each frame: a left vertex and the position of the next neighbour to try.
        path: list[tuple[int, int]] = [(root, 0)]
        tried: list[int] = []  # the right vertex each frame but the last went through
        while path:
            u, position = path[-1]
            neighbours = adjacent[u]
            while position < len(neighbours) and neighbours[position] in seen:
                position += 1
            if position == len(neighbours):
                path.pop()
                if tried:
                    tried.pop()
                continue
            v = neighbours[position]
            path[-1] = (u, position + 1)
            seen.add(v)
            if v in owner:
                tried.append(v)
                path.append((owner[v], 0))
                continue
            # Free right vertex: flip the path.
            tried.append(v)
            for (u_on_path, _), v_on_path in zip(path, tried, strict=True):
                owner[v_on_path] = u_on_path
            break
    return {u: v for v, u in owner.items()}


def _step_spans(calls: Sequence[Call] | Sequence[ReferenceStepCall]) -> list[tuple[int, int]]:
    """For each call, the positions [first, last] its step occupies in step order."""
    size: dict[int, int] = {}
    for call in calls:
        size[call.step] = size.get(call.step, 0) + 1
    first: dict[int, int] = {}
    position = 0
    for step in sorted(size):
        first[step] = position
        position += size[step]
    return [(first[call.step], first[call.step] + size[call.step] - 1) for call in calls]


def _ordered_pairing(
    actual: Sequence[Call], expected: Sequence[ReferenceStepCall], edges: list[set[int]]
) -> dict[int, int] | None:
    """A perfect pairing whose step order agrees on both sides, or None.

    Both sides have the same number n of calls here. Sort each side by step (any order inside
    a step): in an order-respecting perfect pairing the pairs, listed in order, pair the k-th
    expected position with the k-th actual position, since no pair may cross. So the number
    of pairs between expected step i and actual step j is fixed by the step sizes alone: the
    overlap of the two steps' position ranges. Conversely, any perfect matching that only
    links steps whose ranges overlap is order-respecting (those cells form a chain, and one
    group at each end of the chain can only be filled inside its own cell, which forces every
    cell's count in turn). So the search is one bipartite matching on the links whose steps
    overlap: O(n * E), with no enumeration of subsets or permutations.
    """
    exp_spans, act_spans = _step_spans(expected), _step_spans(actual)

    def linked(e: int, a: int) -> bool:
        (e_first, e_last), (a_first, a_last) = exp_spans[e], act_spans[a]
        return a in edges[e] and e_first <= a_last and a_first <= e_last

    left = sorted(range(len(expected)), key=lambda e: (expected[e].step, e))
    right = sorted(range(len(actual)), key=lambda a: (actual[a].step, a))
    found = max_matching(left, right, linked)
    return found if len(found) == len(expected) else None


def _inverted(
    e1: int,
    e2: int,
    pairs: Mapping[int, int],
    actual: Sequence[Call],
    expected: Sequence[ReferenceStepCall],
) -> bool:
    """Expected e1 comes before e2, but e1's actual call comes after e2's."""
    return expected[e1].step < expected[e2].step and actual[pairs[e1]].step > actual[pairs[e2]].step


def _uncross(
    pairs: dict[int, int],
    actual: Sequence[Call],
    expected: Sequence[ReferenceStepCall],
    edges: list[set[int]],
) -> dict[int, int]:
    # Swapping the partners of an inverted pair lowers the inversion count, so this ends.
    # It only removes crossings that an interchangeable call could avoid, so the ones
    # reported afterwards are real.
    pairs = dict(pairs)
    swapped = True
    while swapped:
        swapped = False
        for e1, e2 in itertools.permutations(pairs, 2):
            a1, a2 = pairs[e1], pairs[e2]
            if _inverted(e1, e2, pairs, actual, expected) and a2 in edges[e1] and a1 in edges[e2]:
                pairs[e1], pairs[e2] = a2, a1
                swapped = True
    return pairs


def _order_mismatches(
    pairs: dict[int, int], actual: Sequence[Call], expected: Sequence[ReferenceStepCall]
) -> list[Mismatch]:
    found = []
    for e1, e2 in itertools.permutations(sorted(pairs), 2):
        if _inverted(e1, e2, pairs, actual, expected):
            early, late = pairs[e2], pairs[e1]
            a, b = actual[early], actual[late]
            message = (
                f"order: {a.name} (step {a.step + 1}, call {early + 1}) came before "
                f"{b.name} (step {b.step + 1}, call {late + 1})"
            )
            wanted = (expected[e1].name, expected[e2].name)
            found.append(Mismatch(a.step, early, a.name, None, wanted, (a.name, b.name), message))
    return found


def _leftover_mismatches(
    actual: Sequence[Call],
    expected: Sequence[ReferenceStepCall],
    unpaired_e: list[int],
    unpaired_a: list[int],
    need_expected: bool,
    need_actual: bool,
    diffs: Callable[[int, int], list[Mismatch]],
) -> list[Mismatch]:
    # Explain each leftover against its closest unpaired same-name counterpart (fewest
    # differing arguments). The matching is already maximum, so this choice only affects
    # the wording, and greedy is fine here.
    candidates = sorted(
        (len(diffs(e, a)), e, a)
        for e in unpaired_e
        for a in unpaired_a
        if expected[e].name == actual[a].name
    )
    found: list[Mismatch] = []
    explained_e: set[int] = set()
    explained_a: set[int] = set()
    for _, e, a in candidates:
        if e not in explained_e and a not in explained_a:
            explained_e.add(e)
            explained_a.add(a)
            found.extend(diffs(e, a))
    if need_expected:
        for e in unpaired_e:
            if e not in explained_e:
                call = expected[e]
                message = f"missing call to {call.name} at step {call.step + 1}"
                found.append(
                    Mismatch(call.step, None, call.name, None, dict(call.arguments), None, message)
                )
    if need_actual:
        for a in unpaired_a:
            if a not in explained_a:
                got = actual[a]
                message = f"unexpected call to {got.name} at step {got.step + 1}, call {a + 1}"
                found.append(
                    Mismatch(got.step, a, got.name, None, None, dict(got.arguments), message)
                )
    return sorted(found, key=lambda m: (m.step, -1 if m.call_index is None else m.call_index))


def _result(pairs: Mapping[int, int], mismatches: list[Mismatch]) -> TrajectoryResult:
    if not mismatches:
        reason = f"all {len(pairs)} paired calls match"
    else:
        more = len(mismatches) - 1
        reason = mismatches[0].message + (f" (and {more} more)" if more else "")
    return TrajectoryResult(
        ok=not mismatches,
        pairs=tuple(sorted(pairs.items())),
        mismatches=tuple(mismatches),
        reason=reason,
    )
