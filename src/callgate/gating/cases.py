"""Per case, the unit the gate pairs between releases: a case's attempts tallied over its
repeats (`CaseRecord`), the cases that flipped, and the figures over a set of cases."""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from operator import attrgetter, itemgetter
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BeforeValidator, PlainSerializer

from callgate.checks.verdict import Verdict
from callgate.scoring.scores import Figures, Share


def most_right(trials: int, right: int) -> bool:
    """The rule that makes a case pass on a figure: most of its scored repeats right."""
    return trials > 0 and 2 * right > trials


class CaseRecord(NamedTuple):
    """One case over its repeats; the unit that is paired between releases. A tuple, not a
    model: a release of 100,000 cases is read and paired without building an object a case
    (its field in a scores file is CaseField, an object there)."""

    trials: int  # scored attempts
    right_tool: int
    right_arguments: int
    excluded: int = 0
    reason: str = ""  # the first failing attempt's reason

    @property
    def passed(self) -> bool:
        """Most scored repeats fully right (right tool and right arguments)."""
        return most_right(self.trials, self.right_arguments)

    @property
    def passed_tool(self) -> bool:
        return most_right(self.trials, self.right_tool)


def _an_object(value: Any) -> Any:
    if isinstance(value, CaseRecord | Mapping):
        return value
    raise ValueError("a case record is an object (trials, right_tool, right_arguments, "
                     "excluded, reason)")


# A case record in a scores file: an object with the record's field names, extra ones refused
# (pydantic would otherwise take a list too, and write one).
CaseField = Annotated[CaseRecord, BeforeValidator(_an_object),
                      PlainSerializer(CaseRecord._asdict)]


def case_records(verdicts: Iterable[Verdict]) -> dict[str, CaseRecord]:
    return tally((v.case_id, v.repeat, int(v.status == "scored"), v.right_tool,
                  v.right_arguments, v.tool_reason, v.arguments_reason) for v in verdicts)


VerdictRow = tuple[str, int, int, int, int, str | None, str | None]
# A case the baseline scored, with its tallies then and now (Store.paired_tallies): case id,
# the record's five fields then, and now (None where the case has no tally now).
PairedRow = tuple[Any, ...]


def tally(rows: Iterable[VerdictRow]) -> dict[str, CaseRecord]:
    """Each case's record from its attempts' rows (Store.gate_rows: case id, repeat, scored
    (1) or excluded (0), right tool, right arguments, tool reason, arguments reason), in any
    order. A case's reason is its lowest-numbered scored repeat's without right arguments."""
    tallies: dict[str, list[Any]] = {}
    for case_id, repeat, is_scored, tool, arguments, tool_reason, arguments_reason in rows:
        counts = tallies.get(case_id)
        if counts is None:  # trials, right tool, right arguments, excluded, first failure
            counts = tallies[case_id] = [0, 0, 0, 0, None]
        if not is_scored:
            counts[3] += 1
            continue
        counts[0] += 1
        counts[1] += tool
        counts[2] += arguments
        if not arguments and (counts[4] is None or repeat < counts[4][0]):
            counts[4] = (repeat, tool_reason, arguments_reason)
    record = partial(tuple.__new__, CaseRecord)  # CaseRecord(...) without a Python call a case
    return {case_id: record((n, t, a, x, "" if first is None else
                             "; ".join(p for p in first[1:] if p)))
            for case_id, (n, t, a, x, first) in tallies.items()}


def kept_records(tallies: Iterable[tuple[str, int, int, int, int, str]]
                 ) -> dict[str, CaseRecord]:
    """Each case's record from its tallies as the store keeps them (Store.case_tallies: case
    id, then the record's fields in order)."""
    record = partial(tuple.__new__, CaseRecord)
    rest = itemgetter(slice(1, None))
    return {row[0]: record(rest(row)) for row in tallies}


def scored(cases: Mapping[str, CaseRecord]) -> set[str]:
    """The cases with at least one scored attempt."""
    return set(compress(cases.keys(), map(attrgetter("trials"), cases.values())))


Tally = tuple[int, int, int]  # a case's scored attempts, right tools, right arguments
_tally = itemgetter(0, 1, 2)
_then, _now = itemgetter(1, 2, 3), itemgetter(6, 7, 8)  # a PairedRow's tallies
Figure = Literal["right_tool", "right_arguments"]
_FIELD = {"right_tool": 1, "right_arguments": 2}


@dataclass(frozen=True)
class Paired:
    """The cases two releases both scored, counted by their tallies before and after (what
    the figures and the flips are counted from, without a list of every case), the shared
    cases whose tallies differ (the only ones that can flip), and the cases the baseline
    scored, in both suites, with no scored attempt now."""

    counts: Mapping[tuple[Tally, Tally], int]  # (before, after): shared cases
    changed: list[PairedRow]  # by case id, each with both records
    unscored: list[str]  # sorted
    scored_before: int  # cases the baseline scored that are in both suites
    # counted in the store: the baseline's scored cases with no scored attempt now, with both
    # records (what gating/what_to_fix.py's slices take out of the baseline's counts)
    dropped: list[PairedRow] = field(default_factory=list, compare=False)

    @property
    def shared(self) -> int:
        return sum(self.counts.values())

    @classmethod
    def of(cls, before: Mapping[str, CaseRecord], after: Mapping[str, CaseRecord],
           in_suites: Container[str] | None = None) -> Paired:
        """The pairs of two releases' records; `in_suites`: the case ids of both suites
        (None: every case is)."""
        scored_before, scored_after = scored(before), scored(after)
        ids = sorted(scored_before & scored_after)
        then, now = list(map(before.__getitem__, ids)), list(map(after.__getitem__, ids))
        changed = [(case_id, *b, *a) for case_id, b, a in zip(ids, then, now, strict=True)
                   if _tally(b) != _tally(a)]
        if in_suites is not None:
            scored_before = {c for c in scored_before if c in in_suites}
        counts = Counter(zip(map(_tally, then), map(_tally, now), strict=True))
        return cls(counts=counts, changed=changed, unscored=sorted(scored_before - scored_after),
                   scored_before=len(scored_before))

    @classmethod
    def counted(cls, before: Iterable[tuple[int, int, int, int]], differing: list[PairedRow],
                in_suites: Container[str] | None = None) -> Paired:
        """The pairs as the store counts them (Store.paired_tallies): the baseline's scored
        cases counted by tally, and those of its scored cases whose tally differs now (or
        that have no scored attempt now) with both records."""
        changed = [row for row in differing if row[6]]  # a scored attempt now
        counts = Counter({((n, t, a), (n, t, a)): cases for n, t, a, cases in before})
        counts.subtract(Counter(zip(map(_then, differing), map(_then, differing),
                                    strict=True)))
        counts.update(zip(map(_then, changed), map(_now, changed), strict=True))
        unscored = [row[0] for row in differing
                    if not row[6] and (in_suites is None or row[0] in in_suites)]
        shared = +counts  # the pairs no case is left in dropped
        return cls(counts=shared, changed=changed, unscored=unscored,
                   scored_before=sum(shared.values()) + len(unscored),
                   dropped=[row for row in differing if not row[6]])

    def flipped(self, figure: Figure) -> tuple[int, int]:
        """How many cases passed `figure` before and fail it now, and how many failed it
        before and pass now."""
        field = _FIELD[figure]
        worse = better = 0
        for (then, now), number in self.counts.items():
            was, isnow = most_right(then[0], then[field]), most_right(now[0], now[field])
            worse += number if was and not isnow else 0
            better += number if isnow and not was else 0
        return worse, better

    def changes(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """The cases that passed before and fail now, each with its reason now, and those that
        failed before and pass now, with their reason then; by case id."""
        worse, better = [], []
        for row in self.changed:  # CaseRecord.passed, on the row's fields
            then, now = most_right(row[1], row[3]), most_right(row[6], row[8])
            if then and not now:
                worse.append((row[0], row[10]))
            elif now and not then:
                better.append((row[0], row[5]))
        return worse, better

    def figures(self) -> tuple[Figures, Figures]:
        """The figures over the shared cases, before and after."""
        then: Counter[Tally] = Counter()
        now: Counter[Tally] = Counter()
        for (before, after), number in self.counts.items():
            then[before] += number
            now[after] += number
        return counted_figures(then), counted_figures(now)


def figures_of(records: Iterable[CaseRecord]) -> Figures:
    """The figures over these cases, their intervals clustered by case as a score's are."""
    return counted_figures(Counter(map(_tally, records)))


def counted_figures(tallies: Mapping[Tally, int]) -> Figures:
    """The figures over cases counted by their tallies."""
    tool: Counter[tuple[int, int]] = Counter()
    arguments: Counter[tuple[int, int]] = Counter()
    for (trials, right_tool, right_arguments), number in tallies.items():
        tool[right_tool, trials] += number
        arguments[right_arguments, trials] += number
    return Figures(
        scored=sum(trials * number for (trials, _, _), number in tallies.items()),
        right_tool=Share.by_case(tool),
        right_arguments=Share.by_case(arguments),
        calls_per_task=None,
    )
