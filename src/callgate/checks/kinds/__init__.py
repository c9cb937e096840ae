"""The expectation kinds: one module per kind, each with one handler `check(attempt, expect)`,
registered here under the kind's `type` (as in cases.jsonl). `callgate.checks.check` runs the
checks every kind shares, then hands the attempt to its kind's handler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from callgate.checks.attempt import Attempt
from callgate.checks.kinds import (
    any_call,
    bfcl_multi_turn,
    calls,
    final_state,
    judge,
    no_call,
    trajectory,
)
from callgate.checks.verdict import Verdict

Handler = Callable[[Attempt, Any], Verdict]

CHECKS: dict[str, Handler] = {
    no_call.KIND: no_call.check,
    any_call.KIND: any_call.check,
    **dict.fromkeys(calls.KINDS, calls.check),
    trajectory.KIND: trajectory.check,
    final_state.KIND: final_state.check,
    judge.KIND: judge.check,
    bfcl_multi_turn.KIND: bfcl_multi_turn.check,
}

__all__ = ["CHECKS", "Handler"]
