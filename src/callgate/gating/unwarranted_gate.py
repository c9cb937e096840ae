"""The unwarranted-call gate: the share of a no-call case's attempts that called a tool,
against the baseline's, gated on its own when suite.json asks
(`policies.unwarranted_calls.max_rise`, 0 for zero tolerance; docs/policies.md). Without a
baseline figure the rate is compared with zero, as a declared policy is. The figure and its
change are in the decision whenever the release has one; its line is shown when gated."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from callgate.gating.policy_gate import policy_checks, policy_outcome
from callgate.gating.scores_file import ReleaseScores
from callgate.scoring.result import Outcome

EPSILON = 1e-9


class UnwarrantedCheck(BaseModel):
    model_config = ConfigDict(frozen=True)
    baseline: float | None  # percent (None: no baseline figure)
    current: float
    called: int  # attempts of no-call cases that called a tool
    scored: int
    max_rise: float | None  # None: shown, not gated
    failed: bool


def unwarranted_check(current: ReleaseScores, baseline: ReleaseScores | None
                      ) -> UnwarrantedCheck | None:
    share = current.unwarranted_calls
    if share is None or share.pct is None:
        return None
    then = baseline.unwarranted_calls if baseline is not None else None
    before = then.pct if then is not None else None
    limit = current.unwarranted_calls_max_rise
    rise = share.pct - (before or 0.0)
    return UnwarrantedCheck(baseline=before, current=share.pct, called=share.successes,
                            scored=share.n, max_rise=limit,
                            failed=limit is not None and rise > limit + EPSILON)


def unwarranted_message(check: UnwarrantedCheck) -> str:
    then = f"{check.baseline:.1f}%" if check.baseline is not None else "0% (no baseline figure)"
    change = check.current - (check.baseline or 0.0)
    text = (f"unwarranted calls: {then} → {check.current:.1f}% ({change:+.1f} points; "
            f"{check.called} of {check.scored} attempts of no-call cases called a tool")
    if check.max_rise is None:
        return text + "; not gated)"
    text += f"; allowed rise {check.max_rise:g})"
    return text + (" — UNWARRANTED CALLS ROSE" if check.failed else "")


def unwarranted_outcome(check: UnwarrantedCheck | None, outcome: Outcome,
                        messages: list[str], not_whole: str | None
                        ) -> tuple[Outcome, list[str]]:
    """A rise beyond the allowed one fails the release whatever its shares (a release missing
    shards stays inconclusive); its line comes first when it failed, last otherwise."""
    if check is None or check.max_rise is None:
        return outcome, messages
    line = unwarranted_message(check)
    if not check.failed:
        return outcome, [*messages, line]
    if not not_whole:
        outcome = "regression"
        messages = [m.replace("; recorded, passes as a first release", "")
                    .replace("; recorded, passes", "") for m in messages]
    return outcome, [line, *messages]


def behaviour_gated(current: ReleaseScores, baseline: ReleaseScores | None, outcome: Outcome,
                    messages: list[str], baseline_release: str | None, not_whole: str | None
                    ) -> dict[str, Any]:
    """The updates of a decision by the gates beyond the call: the unwarranted-call gate, then
    the policy gate (gating.policy_gate: its broken policies' lines come first of all). Empty
    when neither applies."""
    updates: dict[str, Any] = {}
    check = unwarranted_check(current, baseline)
    if check is not None:
        outcome, messages = unwarranted_outcome(check, outcome, messages, not_whole)
        updates["unwarranted_calls"] = check
    checks = policy_checks(current, baseline)
    if checks:
        outcome, messages = policy_outcome(checks, outcome, messages, baseline_release,
                                           not_whole)
        updates["policies"] = checks
    if updates:
        updates.update(outcome=outcome, messages=messages)
    return updates
