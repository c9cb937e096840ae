"""Per case, the unit the gate pairs between releases: a case's attempts tallied over its
repeats (`CaseRecord`), the cases that flipped, and the figures over a set of cases."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property, partial
from itertools import compress
from operator import attrgetter, gt, itemgetter, lt
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


def changed_cases(
    before: Mapping[str, CaseRecord], after: Mapping[str, CaseRecord]
) -> tuple[list[str], list[str]]:
    """(passed before and fail now, failed before and pass now) over cases scored in both,
    each sorted."""
    return Paired.of(before, after).flips("right_arguments")


def scored(cases: Mapping[str, CaseRecord]) -> set[str]:
    """The cases with at least one scored attempt."""
    return set(compress(cases.keys(), map(attrgetter("trials"), cases.values())))


@dataclass(frozen=True)
class Paired:
    """The cases two releases both scored, by case id, and each release's records of them in
    that order: the pairs are lists, compared element by element."""

    ids: list[str]
    before: list[CaseRecord]
    after: list[CaseRecord]

    @classmethod
    def of(cls, before: Mapping[str, CaseRecord], after: Mapping[str, CaseRecord]) -> Paired:
        ids = sorted(scored(before) & scored(after))
        return cls(ids=ids, before=list(map(before.__getitem__, ids)),
                   after=list(map(after.__getitem__, ids)))

    def flips(self, figure: Literal["right_tool", "right_arguments"]
              ) -> tuple[list[str], list[str]]:
        """The cases that passed `figure` before and fail it now, and those that failed it
        before and pass now, each by case id."""
        return self._tool_flips if figure == "right_tool" else self._arguments_flips

    @cached_property
    def _tool_flips(self) -> tuple[list[str], list[str]]:
        return self._flips(attrgetter("right_tool"))

    @cached_property
    def _arguments_flips(self) -> tuple[list[str], list[str]]:
        return self._flips(attrgetter("right_arguments"))

    def _flips(self, right: Callable[[CaseRecord], int]) -> tuple[list[str], list[str]]:
        trials = attrgetter("trials")
        then = list(map(most_right, map(trials, self.before), map(right, self.before)))
        now = list(map(most_right, map(trials, self.after), map(right, self.after)))
        return (list(compress(self.ids, map(gt, then, now))),
                list(compress(self.ids, map(lt, then, now))))


def figures_of(records: Iterable[CaseRecord]) -> Figures:
    """The figures over these cases, their intervals clustered by case as a score's are."""
    records = list(records)
    return Figures(
        scored=sum(map(attrgetter("trials"), records)),
        right_tool=Share.by_case(Counter((r.right_tool, r.trials) for r in records)),
        right_arguments=Share.by_case(Counter((r.right_arguments, r.trials) for r in records)),
        calls_per_task=None,
    )
