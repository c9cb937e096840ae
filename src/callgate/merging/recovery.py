"""Fault recovery (docs/faults.md) of a merged release, computed again from its attempts.

The recovery shares are clustered by case (scoring.recovery), so the shards' shares cannot be
added up: the merged release's are read again from its stored attempts, each scored attempt's
response line against its stored case's `after_fault`, as the Recorder reads them. A run's
`--faults` plan may give an `after_fault` of its own to the cases without one: the store keeps
the plan (runs.fault_plan, which every shard of a release must agree on) and it is read with
the cases' own. Every part is first read again on its own attempts, and the merge is refused
(naming the part) unless that gives the recovery figures the part stored: as for a store made
before runs.fault_plan whose plan gave the after_fault."""

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
from callgate.suites.faults import FaultPlanFile, RunFaults
from callgate.suites.responses import parse_response

RecoveryPart = tuple[Path, MergeRecords, int, Any, Collection[tuple[str, int]], str | None]
"""A part to check: its store's path, the store, the run in it, the recovery it stored, the
attempts of that run not to read (those other parts brought), and its runs.fault_plan."""


class Unreadable(ValueError):
    """An attempt or case that cannot be read again for its recovery."""


def run_faults(fault_plan: str | None) -> RunFaults:
    """The run's fault plan, from runs.fault_plan (no plan: the cases' own after_fault only);
    Unreadable when it is not a plan."""
    if fault_plan is None:
        return RunFaults()
    try:
        return RunFaults(FaultPlanFile.model_validate(loads(fault_plan)["plan"]))
    except (ValueError, ValidationError, TypeError, KeyError) as exc:
        raise Unreadable(f"runs.fault_plan: {exc}".splitlines()[0]) from None


def recovery_figures(store: MergeRecords, run_id: int,
                     skip: Collection[tuple[str, int]] = (),
                     fault_plan: str | None = None) -> dict[str, Any] | None:
    """The recovery shares of a stored run's scored attempts (but those in `skip`), as the
    scores document keeps them (None: no attempt met a fault with expectations), each case's
    `after_fault` that of the run's plan (runs.fault_plan) where the case states none."""
    faults = run_faults(fault_plan)
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
        tally.add(case_id, recovery_of(faults.after_fault(case), response, case.called_as()))
    shares = tally.shares()
    return {kind: share.model_dump(mode="json") for kind, share in shares.items()} or None


def checked_recovery(target: MergeRecords, run_id: int, parts: Sequence[RecoveryPart],
                     where: str, fault_plan: str | None) -> dict[str, Any] | None:
    """The merged run's recovery figures (its plan: `fault_plan`), once each part's stored
    ones are read again from its attempts (MergeRefused naming the first part that does not
    give them)."""
    for path, store, part_run, stored, skip, plan in parts:
        try:
            again: Any = recovery_figures(store, part_run, skip, plan)
        except Unreadable as exc:
            again = f"unreadable ({exc})"
        if again != stored:
            raise MergeRefused(
                f"{path}: {where}: scores.recovery: the fault-recovery figures it stored are "
                "not what its attempts give against their cases' after_fault and its "
                "runs.fault_plan (a store made before runs.fault_plan does not keep a --faults "
                "plan), so the shards' figures cannot be combined; gate the release on "
                "recovery from an unsharded run, or run the shards again")
    return recovery_figures(target, run_id, (), fault_plan)
