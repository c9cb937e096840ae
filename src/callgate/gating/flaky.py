"""Flaky cases: a case whose verdict differs between identical inputs (the same case, model
and parameters), found from the repeats of a release and, where the baseline ran with the same
model and parameters, from the baseline's repeats too. A flaky case stays in the gate and is
listed on the decision; only a quarantine (gating.quarantine) takes a case out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

Tally = tuple[int, int, int]  # scored attempts, right tool, right arguments


class FlakyCase(NamedTuple):
    """A case, its attempts over the releases counted, and its observed flip rate: the share
    of pairs of its attempts that disagree (right arguments, else right tool)."""

    case_id: str
    attempts: int
    flip_rate: float


def flip_rate(trials: int, right: int) -> float:
    """The share of the pairs of `trials` attempts, `right` of them right, that disagree."""
    if trials < 2:
        return 0.0
    return 2 * right * (trials - right) / (trials * (trials - 1))


def flaky_cases(*releases: Mapping[str, Tally] | Iterable[tuple[str, Tally]]) -> list[FlakyCase]:
    """The cases that flipped among their attempts, the tallies of one case over the releases
    given (each with the same model and parameters) added up; by flip rate, then case id."""
    total: dict[str, list[int]] = {}
    for release in releases:
        items = release.items() if isinstance(release, Mapping) else release
        for case_id, (trials, tool, arguments) in items:
            sums = total.setdefault(case_id, [0, 0, 0])
            sums[0] += trials
            sums[1] += tool
            sums[2] += arguments
    out = []
    for case_id, (trials, tool, arguments) in total.items():
        rate = max(flip_rate(trials, arguments), flip_rate(trials, tool))
        if rate > 0:
            out.append(FlakyCase(case_id, trials, rate))
    return sorted(out, key=lambda f: (-f.flip_rate, f.case_id))


def flaky_note(flaky: list[FlakyCase], cases: int, shown: int = 10) -> str | None:
    """The decision's line on them (None without any)."""
    if not flaky:
        return None
    listed = ", ".join(f"{f.case_id} ({f.flip_rate:.0%} of {f.attempts})" for f in flaky[:shown])
    more = f", and {len(flaky) - shown} more" if len(flaky) > shown else ""
    return (f"{len(flaky)} of {cases} cases are flaky (their verdict differs between identical "
            f"inputs; flip rate of their attempts): {listed}{more}. They stay in the gate; "
            "quarantine one with a reason in callgate.toml [gate] quarantine, or re-ask them: "
            "callgate run --until-decided")


def flaky_of_stored(now_mixed: Iterable[tuple[str, int, int, int]],
                    then_mixed: Iterable[tuple[str, int, int, int]],
                    changed: Iterable[tuple[object, ...]], same_lineage: bool
                    ) -> list[FlakyCase]:
    """The flaky cases from a store's tallies: the cases mixed within this run
    (Store.mixed_tallies), and, when the baseline ran with the same model and parameters, those
    mixed within it and those whose tallies differ between the two (Paired.changed rows: case
    id, the five fields then, the five now), each with both runs' attempts added up."""
    now = {row[0]: (row[1], row[2], row[3]) for row in now_mixed}
    if not same_lineage:
        return flaky_cases(now)
    then = {row[0]: (row[1], row[2], row[3]) for row in then_mixed}
    for row in changed:
        case_id = str(row[0])
        then[case_id] = (int(row[1]), int(row[2]), int(row[3]))  # type: ignore[call-overload]
        now[case_id] = (int(row[6]), int(row[7]), int(row[8]))  # type: ignore[call-overload]
    for case_id in set(now) ^ set(then):  # mixed on one side, the same tally on the other
        if case_id in now:
            then.setdefault(case_id, now[case_id])
        else:
            now.setdefault(case_id, then[case_id])
    return flaky_cases(now, then)
