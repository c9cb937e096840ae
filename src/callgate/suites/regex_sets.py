"""Whether regular expressions can match one string together: suite check's test of a `regex`
matcher against a schema's `pattern` (docs/formats.md, "Argument matchers").

Each pattern is read by Python's regex parser and built into an automaton over ranges of code
points (Thompson's construction); a breadth-first walk of the product of the automata finds the
shortest string all of them take, or shows that none exists. Only plain syntax is modelled:
literals, classes, `.`, `\\d \\w \\s`, groups, alternation, repeats and anchors at the ends.
Anything else (lookaround, `\\b`, flags, a huge repeat) is UNDECIDED, as is a walk too long.
"""

from __future__ import annotations

import functools
import importlib
from collections import deque
from collections.abc import Sequence
from typing import Any

# Python's own regex parser (no public name; typeshed has no stubs for it).
_parser: Any = importlib.import_module("re._parser")

Ranges = tuple[tuple[int, int], ...]  # sorted, disjoint, closed intervals of code points
TOP = 0x10FFFF
EVERY_CHAR: Ranges = ((0, TOP),)
UNDECIDED = object()  # common_string could not tell
_MAX_STATES = 5_000
_MAX_WALK = 200_000


def _normal(ranges: list[tuple[int, int]]) -> Ranges:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)


def _complement(ranges: Ranges) -> Ranges:
    out, start = [], 0
    for low, high in ranges:
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start <= TOP:
        out.append((start, TOP))
    return tuple(out)


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if low <= high:
            out.append((low, high))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _chars(text: str) -> list[tuple[int, int]]:
    return [(ord(char), ord(char)) for char in text]


# ECMA-262 as jsonschema-rs runs it: \d and \w are ASCII, \s every Unicode space and U+FEFF.
_DIGIT = _normal([(48, 57)])
_WORD = _normal([(48, 57), (65, 90), (95, 95), (97, 122)])
_SPACE = _normal([*_chars("\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff"),
                  (0x2000, 0x200A)])
_CATEGORIES = {"CATEGORY_DIGIT": _DIGIT, "CATEGORY_NOT_DIGIT": _complement(_DIGIT),
               "CATEGORY_WORD": _WORD, "CATEGORY_NOT_WORD": _complement(_WORD),
               "CATEGORY_SPACE": _SPACE, "CATEGORY_NOT_SPACE": _complement(_SPACE)}
# `.` takes anything but ECMA's line terminators. These four classes were compared with the
# engine on every code point below U+3100 and from U+FE00 to U+FFFF (tests/suites/test_matchers.py).
_DOT = _complement(_normal(_chars("\n\r\u2028\u2029")))


class _Unmodelled(Exception):
    """Syntax the automaton does not model."""


class _Automaton:
    """States with labelled edges (ranges) and empty edges; built by `_build`."""

    def __init__(self) -> None:
        self.edges: list[list[tuple[Ranges, int]]] = []
        self.empty: list[list[int]] = []

    def state(self) -> int:
        if len(self.edges) >= _MAX_STATES:
            raise _Unmodelled
        self.edges.append([])
        self.empty.append([])
        return len(self.edges) - 1

    def closure(self, states: frozenset[int]) -> frozenset[int]:
        seen, stack = set(states), list(states)
        while stack:
            for nxt in self.empty[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return frozenset(seen)


def _class(items: Any) -> Ranges:
    ranges: list[tuple[int, int]] = []
    negate = False
    for op, value in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            ranges.append((value, value))
        elif name == "RANGE":
            ranges.append(value)
        elif name == "CATEGORY" and str(value) in _CATEGORIES:
            ranges += _CATEGORIES[str(value)]
        else:
            raise _Unmodelled
    found = _normal(ranges)
    return _complement(found) if negate else found


def _build(auto: _Automaton, parsed: Any, start: int) -> int:
    """Add the parsed sequence from `start`; returns the state it ends in."""
    at = start
    for op, value in parsed:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
            label = (((value, value),) if name == "LITERAL" else
                     _complement(((value, value),)) if name == "NOT_LITERAL" else
                     _DOT if name == "ANY" else _class(value))
            nxt = auto.state()
            auto.edges[at].append((label, nxt))
            at = nxt
        elif name == "SUBPATTERN":
            if value[1] or value[2]:  # inline flags
                raise _Unmodelled
            at = _build(auto, value[3], at)
        elif name == "BRANCH":
            end = auto.state()
            for branch in value[1]:
                auto.empty[_build(auto, branch, at)].append(end)
            at = end
        elif name in ("MAX_REPEAT", "MIN_REPEAT"):
            at = _repeat(auto, value, at)
        else:
            raise _Unmodelled
    return at


def _repeat(auto: _Automaton, value: Any, at: int) -> int:
    low, high, inner = value
    unbounded = high == _parser.MAXREPEAT
    if low > 100 or (not unbounded and high - low > 100):
        raise _Unmodelled
    for _ in range(low):
        at = _build(auto, inner, at)
    if unbounded:
        loop = auto.state()
        auto.empty[at].append(loop)
        auto.empty[_build(auto, inner, loop)].append(loop)
        return loop
    end = auto.state()
    for _ in range(high - low):
        auto.empty[at].append(end)
        at = _build(auto, inner, at)
    auto.empty[at].append(end)
    return end


def _automaton(pattern: str) -> tuple[_Automaton, int, int]:
    """The automaton of strings `pattern` matches somewhere in: (automaton, start, accept)."""
    try:
        parsed = list(_parser.parse(pattern))
    except Exception:  # syntax Python's parser does not read (ECMA's \p{L}, ...)
        raise _Unmodelled from None
    anchored_start = bool(parsed) and str(parsed[0][1]) == "AT_BEGINNING"
    anchored_end = bool(parsed) and str(parsed[-1][1]) == "AT_END"
    body = parsed[1 if anchored_start else 0: len(parsed) - 1 if anchored_end else len(parsed)]
    auto = _Automaton()
    start = auto.state()
    at = start
    if not anchored_start:  # search: anything may come before
        auto.edges[at].append((EVERY_CHAR, at))
    at = _build(auto, body, at)
    if not anchored_end:
        end = auto.state()
        auto.empty[at].append(end)
        auto.edges[end].append((EVERY_CHAR, end))
        at = end
    return auto, start, at


def _pick(ranges: Ranges) -> str:
    """A printable character of the ranges where there is one."""
    if any(low <= 0x61 <= high for low, high in ranges):
        return "a"
    for low, high in ranges:
        if high >= 0x21:
            return chr(max(low, 0x21))
    return chr(ranges[0][0])


def common_string(patterns: Sequence[str]) -> Any:
    """The shortest string every pattern matches (somewhere in it), None when there is none,
    or UNDECIDED."""
    return _common_string(tuple(patterns))


@functools.lru_cache(maxsize=1024)  # a suite repeats its matchers and patterns
def _common_string(patterns: tuple[str, ...]) -> Any:
    try:
        built = [_automaton(pattern) for pattern in patterns]
    except _Unmodelled:
        return UNDECIDED
    first = tuple(auto.closure(frozenset({start})) for auto, start, _ in built)
    seen = {first}
    queue: deque[tuple[tuple[frozenset[int], ...], str]] = deque([(first, "")])
    while queue:
        sets, text = queue.popleft()
        if all(accept in states for (_, _, accept), states in zip(built, sets, strict=True)):
            return text
        for label, after in _steps(built, sets):
            if after not in seen:
                if len(seen) >= _MAX_WALK:
                    return UNDECIDED
                seen.add(after)
                queue.append((after, text + _pick(label)))
    return None


def _steps(built: Sequence[tuple[_Automaton, int, int]], sets: tuple[frozenset[int], ...]
           ) -> list[tuple[Ranges, tuple[frozenset[int], ...]]]:
    """The moves from a product state: for each set of characters that leads somewhere in
    every automaton, the states reached."""
    moves: list[tuple[Ranges, tuple[frozenset[int], ...]]] = [(EVERY_CHAR, ())]
    for auto, states in zip((b[0] for b in built), sets, strict=True):
        edges = [(label, nxt) for state in states for label, nxt in auto.edges[state]]
        refined = []
        for label, reached in moves:
            for edge_label, nxt in edges:
                both = _intersect(label, edge_label)
                if both:
                    refined.append((both, (*reached, frozenset({nxt}))))
        moves = refined
    out = []
    for label, reached in moves:
        closed = tuple(auto.closure(states) for (auto, _, _), states in
                       zip(built, reached, strict=True))
        out.append((label, closed))
    return out
