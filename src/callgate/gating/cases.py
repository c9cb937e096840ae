"""Per case, the unit the gate pairs between releases: a case's attempts tallied over its
repeats (`CaseRecord`), the cases that flipped, and the figures over a set of cases."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from callgate.checks.verdict import Verdict
from callgate.scoring.scores import Figures, Share


class CaseRecord(BaseModel):
    """One case over its repeats; the unit that is paired between releases."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    trials: int  # scored attempts
    right_tool: int
    right_arguments: int
    excluded: int = 0
    reason: str = ""  # the first failing attempt's reason

    @property
    def passed(self) -> bool:
        """Most scored repeats fully right (right tool and right arguments)."""
        return self.trials > 0 and 2 * self.right_arguments > self.trials

    @property
    def passed_tool(self) -> bool:
        return self.trials > 0 and 2 * self.right_tool > self.trials


def case_records(verdicts: Iterable[Verdict]) -> dict[str, CaseRecord]:
    tallies: dict[str, list[Any]] = {}
    for v in verdicts:
        tally = tallies.setdefault(v.case_id, [0, 0, 0, 0, ""])
        if v.status != "scored":
            tally[3] += 1
            continue
        tally[0] += 1
        tally[1] += v.right_tool
        tally[2] += v.right_arguments
        if not v.right_arguments and not tally[4]:
            tally[4] = v.reason
    return {
        case_id: CaseRecord(trials=n, right_tool=t, right_arguments=a, excluded=x, reason=r)
        for case_id, (n, t, a, x, r) in sorted(tallies.items())
    }


def changed_cases(
    before: Mapping[str, CaseRecord], after: Mapping[str, CaseRecord]
) -> tuple[list[str], list[str]]:
    """(passed before and fail now, failed before and pass now) over cases scored in both."""
    shared = [c for c in before if c in after and before[c].trials and after[c].trials]
    worse = [c for c in shared if before[c].passed and not after[c].passed]
    better = [c for c in shared if not before[c].passed and after[c].passed]
    return worse, better


def figures_of(records: Iterable[CaseRecord]) -> Figures:
    records = list(records)
    n = sum(r.trials for r in records)
    return Figures(
        scored=n,
        right_tool=Share.of(sum(r.right_tool for r in records), n),
        right_arguments=Share.of(sum(r.right_arguments for r in records), n),
        calls_per_task=None,
    )
