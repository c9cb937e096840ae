"""Whether a recorded attempt can be read under a fault plan (docs/faults.md, "Recorded
answers"): its tool results are recomputed from the case, so a fault can replace one only
where the recorded turns after it were answered to that fault. The line says which results its
run replaced (`faults`, written by the live loop and by a target run); the plan, applied to
the line's calls, must replace the same ones. A call of the last turn got no result (the
conversation ended there), so a fault on it changes nothing that was recorded."""

from __future__ import annotations

from typing import Any

from callgate.checks.parsing import parse_calls
from callgate.suites.attacks.plan import KIND_PREFIX
from callgate.suites.faults import planned_faults
from callgate.suites.interception import unchanged
from callgate.suites.responses import Response
from callgate.suites.suite import Case, Suite


class FaultReplayError(ValueError):
    """A recorded attempt the fault plan cannot be applied to; the message names the case."""


def _answered(response: Response, case: Case
              ) -> list[tuple[str, dict[str, Any] | None, int]]:
    """The calls that got a result (those of every turn but the last): name, arguments, turn."""
    turns = response.assistant_turns
    return [(call.name, call.arguments, number) for number, turn in enumerate(turns[:-1])
            for call in parse_calls(turn.tool_calls, case.called_as())]


def replayed(suite: Suite, case: Case, response: Response) -> Response:
    """`response` as it is when the plan replaces exactly the results its line says were
    replaced (where the calls got results); else FaultReplayError saying which and why."""
    if response.error is not None or not suite.loops(case):
        return response
    transform = suite.tool_results(case, response.repeat).transform
    if transform is unchanged and not response.faults:  # no plan, nothing recorded: as it is
        return response
    calls = _answered(response, case)
    planned = planned_faults(transform, case.id, response.repeat,
                             [(name, arguments) for name, arguments, _ in calls])
    want = {(applied.tool, applied.index, applied.kind): calls[position][2]
            for position, applied in planned if not applied.kind.startswith(KIND_PREFIX)}
    counted: dict[str, int] = {}
    for name, _, _ in calls:
        counted[name] = counted.get(name, 0) + 1
    # An attack's injection (suites/attacks) is made again from the attack file, whatever the
    # plan: only the faults are the plan's to match. On a call of the last turn: no result given.
    got = {(f.tool, f.call, f.kind) for f in response.faults or ()
           if f.call < counted.get(f.tool, 0) and not f.kind.startswith(KIND_PREFIX)}
    turns = len(response.assistant_turns)
    where = f"case {case.id!r} repeat {response.repeat}"
    for key in sorted(set(want) - got):
        tool, index, kind = key
        later = turns - 1 - want[key]
        raise FaultReplayError(
            f"{where}: the fault plan replaces the result of call {index + 1} of {tool} "
            f"({kind}), but the recorded answer goes on for {later} turn(s) after it, "
            "answered to the tool's real result; record it again under the plan "
            "(callgate run --faults), or score it without the plan")
    for tool, index, kind in sorted(got - set(want)):
        raise FaultReplayError(
            f"{where}: the recorded answer saw a {kind} on call {index + 1} of {tool}, which "
            "the fault plan does not make; score it under the plan it was recorded with")
    if response.faults and any(f.call >= counted.get(f.tool, 0) for f in response.faults):
        kept = tuple(f for f in response.faults if f.call < counted.get(f.tool, 0))
        return response.model_copy(update={"faults": kept or None})
    return response
