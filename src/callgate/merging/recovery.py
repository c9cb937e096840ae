"""Fault recovery (docs/faults.md) of a merged release, computed again from its attempts.

The recovery shares are clustered by case (scoring.recovery), so the shards' shares cannot be
added up: the merged release's are read again from its stored attempts, each scored attempt's
response line against its stored case's `after_fault`, as the Recorder reads them. A run's
`--faults` plan may give an `after_fault` of its own to the cases without one, and the store
does not keep the plan: so every part is first read again on its own attempts, and the merge
is refused (naming the part) unless that gives the recovery figures the part stored."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from callgate.checks.recovery import recovery_of
from callgate.reading import loads
from callgate.scoring.recovery import RecoveryTally
from callgate.store.merging import MergeRecords
from callgate.store.opening import MergeRefused
from callgate.suites.cases import Case
from callgate.suites.responses import parse_response

RecoveryPart = tuple[Path, MergeRecords, int, Any, Collection[tuple[str, int]]]
"""A part to check: its store's path, the store, the run in it, the recovery it stored, and
the attempts of that run not to read (those other parts brought)."""


class Unreadable(ValueError):
    """An attempt or case that cannot be read again for its recovery."""


def recovery_figures(store: MergeRecords, run_id: int,
                     skip: Collection[tuple[str, int]] = ()) -> dict[str, Any] | None:
    """The recovery shares of a stored run's scored attempts (but those in `skip`), as the
    scores document keeps them (None: no attempt met a fault with expectations)."""
    tally = RecoveryTally()
    cases: dict[str, Case] = {}
    for case_id, repeat, case_body, body in store.scored_attempt_lines(run_id):
        if (case_id, repeat) in skip:
            continue
        try:
            case = cases.get(case_id)
            if case is None:
                case = cases[case_id] = Case.model_validate(loads(case_body))
            response = parse_response(loads(body))
        except (ValueError, ValidationError, TypeError, KeyError) as exc:
            raise Unreadable(f"case {case_id!r} repeat {repeat}: {exc}".splitlines()[0]
                             ) from None
        tally.add(case_id, recovery_of(case.after_fault, response, case.called_as()))
    shares = tally.shares()
    return {kind: share.model_dump(mode="json") for kind, share in shares.items()} or None


def checked_recovery(target: MergeRecords, run_id: int, parts: Sequence[RecoveryPart],
                     where: str) -> dict[str, Any] | None:
    """The merged run's recovery figures, once each part's stored ones are read again from
    its attempts (MergeRefused naming the first part that does not give them)."""
    for path, store, part_run, stored, skip in parts:
        try:
            again: Any = recovery_figures(store, part_run, skip)
        except Unreadable as exc:
            again = f"unreadable ({exc})"
        if again != stored:
            raise MergeRefused(
                f"{path}: {where}: scores.recovery: the fault-recovery figures it stored are "
                "not what its attempts give against their cases' after_fault (a --faults "
                "plan's after_fault is not kept in the store), so the shards' figures cannot "
                "be combined; gate the release on recovery from an unsharded run")
    return recovery_figures(target, run_id)
