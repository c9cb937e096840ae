"""Which tool took whose calls: scored attempts counted by the tool their case expects first
(rows, "no call" included) and the tool the answer called first (columns, "no call" and "a
tool not in the suite" included), for the baseline and the release; the cells that moved, in
words; and per tool, the argument keys that went wrong most often and how."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from callgate.gating.slices import NO_CALL, slice_of

OUTSIDE = "a tool not in the suite"
MIN_MOVED = 2  # attempts a cell must gain (beyond the baseline's, scaled) to count as moved
TOP_MOVED = 8
TOP_KEYS = 3  # argument problems shown per tool


class Cell(BaseModel):
    model_config = ConfigDict(frozen=True)
    expected: str
    called: str
    baseline: int
    current: int


class Moved(Cell):
    """A cell off the diagonal that gained attempts, with what it says."""

    words: str


class ArgumentProblem(BaseModel):
    model_config = ConfigDict(frozen=True)
    tool: str
    key: str
    how: str  # missing, wrong value, schema: wrong type / bad enum / unknown parameter, ...
    current: int
    baseline: int


class Confusion(BaseModel):
    """The confusion tables of both releases (cells with a count on either side), the moved
    cells (most gained first), and the argument problems."""

    model_config = ConfigDict(frozen=True)
    rows: list[str]
    columns: list[str]
    cells: list[Cell]
    moved: list[Moved]
    arguments: list[ArgumentProblem]
    known: bool = True  # False: a release scored before first calls were kept


def counted_cells(rows: Iterable[tuple[str, str | None, int, int]], catalogue: Collection[str]
                  ) -> tuple[Counter[tuple[str, str]], bool]:
    """(expected, called) counts from (expect mark, first tool, attempts, calls) rows (Store.
    slice_attempts), and whether every attempt's first call is known."""
    counts: Counter[tuple[str, str]] = Counter()
    known = True
    for mark, first, number, _ in rows:
        named = slice_of(mark)
        if named is None or named[0] != "tool":
            continue
        if first is None:
            known = False
            continue
        called = NO_CALL if first == "" else first if first in catalogue else OUTSIDE
        counts[named[1], called] += number
    return counts, known


def confusion(before: Mapping[tuple[str, str], int], after: Mapping[tuple[str, str], int],
              arguments: list[ArgumentProblem], known: bool = True) -> Confusion:
    keys = before.keys() | after.keys()
    rows = sorted({e for e, _ in keys}, key=_order)
    columns = sorted({c for _, c in keys}, key=lambda c: (c == OUTSIDE, _order(c)))
    cells = [Cell(expected=e, called=c, baseline=before.get((e, c), 0),
                  current=after.get((e, c), 0)) for e in rows for c in columns if (e, c) in keys]
    return Confusion(rows=rows, columns=columns, cells=cells,
                     moved=moved_cells(before, after) if known else [], arguments=arguments,
                     known=known)


def _order(name: str) -> tuple[bool, bool, str]:
    return name == NO_CALL, name.startswith("("), name


def moved_cells(before: Mapping[tuple[str, str], int], after: Mapping[tuple[str, str], int]
                ) -> list[Moved]:
    """The off-diagonal cells that gained at least MIN_MOVED attempts beyond the baseline's
    count scaled to the release's attempts of the row (repeats may differ), most first."""
    rows_then: Counter[str] = Counter()
    rows_now: Counter[str] = Counter()
    for (expected, _), number in before.items():
        rows_then[expected] += number
    for (expected, _), number in after.items():
        rows_now[expected] += number
    found = []
    for (expected, called), now in after.items():
        if expected == called or expected.startswith("("):
            continue
        then = before.get((expected, called), 0)
        scale = rows_now[expected] / rows_then[expected] if rows_then[expected] else 1.0
        gain = now - then * scale
        if gain >= MIN_MOVED:
            found.append((gain, Moved(expected=expected, called=called, baseline=then,
                                      current=now, words=_words(expected, called, now, then))))
    found.sort(key=lambda item: (-item[0], item[1].expected, item[1].called))
    return [moved for _, moved in found[:TOP_MOVED]]


def _words(expected: str, called: str, now: int, then: int) -> str:
    calls = f"{now} call{'s' if now != 1 else ''}"
    if expected == NO_CALL:
        return (f"{called} was called in {now} attempt{'s' if now != 1 else ''} meant to make "
                f"no call (baseline {then})")
    if called == NO_CALL:
        return (f"no call was made in {now} attempt{'s' if now != 1 else ''} meant for "
                f"{expected} (baseline {then})")
    return f"{called} took {calls} meant for {expected} (baseline {then})"


# How a failed attempt's arguments went wrong, from the reasons the checks write
# (checks/schema.py, checks/values.py): the tool, the key, and how.
_TOOL = r"(?P<tool>[\w-]+)"
_READINGS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(_TOOL + r"\.(?P<key>[^:\s]+): expected .*, got nothing \(left out\)"), "missing"),
    (re.compile(_TOOL + r"\.(?P<key>[^:\s]+): not an expected argument"), "not expected"),
    (re.compile(_TOOL + r"(?:\.[^:\s]+)?: missing required argument '(?P<key>[^']+)'"),
     "missing (schema)"),
    (re.compile(_TOOL + r": '(?P<key>[^']+)' is not a parameter of"),
     "schema: unknown parameter"),
    (re.compile(r"call \d+ \(" + _TOOL + r"\): arguments are not valid JSON(?P<key>)"),
     "invalid JSON"),
)
_SCHEMA_KINDS = {"wrong_type": "schema: wrong type", "bad_enum": "schema: bad enum",
                 "unknown_param": "schema: unknown parameter", "other": "schema: other",
                 "missing_required": "missing (schema)"}
_KEYED = re.compile(_TOOL + r"\.(?P<key>[^:\s]+): ")
# checks/kinds/final_state.py's reason: "final state H is not the reference's H: PATH: how"
# (or "after user turn N, state H ..."): the path is the state's, not a tool's argument.
_FINAL_STATE = re.compile(r"(?:final state|after user turn \d+, state) \w+ is not the "
                          r"reference's \w+: (?P<path>[^:\s]+): ")
FINAL_STATE = "(final state)"


def reading(verdict: str | None, schema_kind: str | None, reason: str
            ) -> tuple[str, str, str] | None:
    """(tool, key, how) of a failed attempt's arguments reason; None when it names no tool.
    A final state unlike the reference's is read as FINAL_STATE and the state's path."""
    state = _FINAL_STATE.match(reason)
    if state is not None:
        return FINAL_STATE, state["path"], "final state"
    for pattern, how in _READINGS:
        found = pattern.search(reason)
        if found:
            return found["tool"], found["key"] or "(arguments)", how
    found = _KEYED.search(reason)
    if found is None:
        return None
    if verdict == "schema_violation":
        how = _SCHEMA_KINDS.get(schema_kind or "", "schema: other")
    else:
        how = "wrong value"
    return found["tool"], found["key"], how


def argument_problems(before: Iterable[tuple[str | None, str | None, str, int]],
                      after: Iterable[tuple[str | None, str | None, str, int]]
                      ) -> list[ArgumentProblem]:
    """Per tool, its TOP_KEYS most frequent (key, how) among the release's attempts with the
    right tool and wrong arguments, with the baseline's count; rows are (arguments verdict,
    schema kind, reason, attempts) as Store.argument_failures reads them."""
    then, now = _tally(before), _tally(after)
    by_tool: dict[str, list[ArgumentProblem]] = {}
    for (tool, key, how), number in sorted(now.items(), key=lambda kv: (-kv[1], kv[0])):
        found = by_tool.setdefault(tool, [])
        if len(found) < TOP_KEYS:
            found.append(ArgumentProblem(tool=tool, key=key, how=how, current=number,
                                         baseline=then.get((tool, key, how), 0)))
    return [problem for tool in sorted(by_tool) for problem in by_tool[tool]]


def _tally(rows: Iterable[tuple[str | None, str | None, str, int]]
           ) -> Counter[tuple[str, str, str]]:
    counts: Counter[tuple[str, str, str]] = Counter()
    for verdict, kind, reason, number in rows:
        read = reading(verdict, kind, reason or "")
        if read is not None:
            counts[read] += number
    return counts
