"""Stage 5, the gate: compare a release with the last one of the same model and suite."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from callgate.checks import Verdict


class CaseOutcome(BaseModel):
    """One case's result over its repeats: it passes when most scored repeats are fully right."""

    model_config = ConfigDict(frozen=True)
    case_id: str
    passes: int
    trials: int
    excluded: int
    reason: str = ""

    @property
    def passed(self) -> bool:
        return self.trials > 0 and 2 * self.passes > self.trials


def case_outcomes(verdicts: Iterable[Verdict]) -> dict[str, CaseOutcome]:
    tallies: dict[str, list] = {}
    for v in verdicts:
        tally = tallies.setdefault(v.case_id, [0, 0, 0, ""])
        if v.status != "scored":
            tally[2] += 1
            continue
        tally[1] += 1
        if v.right_arguments:
            tally[0] += 1
        elif not tally[3]:
            tally[3] = v.reason
    return {
        case_id: CaseOutcome(case_id=case_id, passes=p, trials=n, excluded=x, reason=r)
        for case_id, (p, n, x, r) in sorted(tallies.items())
    }


def changed_cases(
    before: Mapping[str, CaseOutcome], after: Mapping[str, CaseOutcome]
) -> tuple[list[str], list[str]]:
    """(cases that passed before and fail now, cases that failed before and pass now),
    over the cases scored in both."""
    shared = [c for c in before if c in after and before[c].trials and after[c].trials]
    worse = [c for c in shared if before[c].passed and not after[c].passed]
    better = [c for c in shared if not before[c].passed and after[c].passed]
    return worse, better
