"""The recovery gate (docs/faults.md): each fault kind's recovery rate against the baseline
release's, shown on every decision that has them, gated only when asked (`[gate]
recovery_max_drop` in callgate.toml, or `callgate gate --recovery-max-drop`): a kind whose
rate fell more than that many points fails the release. Off by default. It only adds a
failure: it never turns a regression or an inconclusive decision into a pass.

The rates are unpaired (Wilson intervals clustered by case, scoring.recovery): the cases a
fault reached can differ between the releases when faults are drawn with a probability."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from callgate.gating.decision import EXIT_CODES, GateDecision
from callgate.gating.scores_file import ReleaseScores
from callgate.scoring.scores import Share

EPSILON = 1e-9


class RecoveryCheck(BaseModel):
    """One fault kind: its recovery now and in the baseline, the change in points."""

    model_config = ConfigDict(frozen=True)
    kind: str
    current: Share
    baseline: Share | None = None
    change: float | None = None
    failed: bool = False


def recovery_checks(current: Mapping[str, Share] | None, baseline: Mapping[str, Share] | None,
                    max_drop: float | None) -> list[RecoveryCheck]:
    """Each kind of the current release against the baseline's; `failed` only when gated."""
    checks = []
    for kind, now in sorted((current or {}).items()):
        then = (baseline or {}).get(kind)
        change = (now.pct - then.pct if then is not None and then.pct is not None
                  and now.pct is not None else None)
        failed = max_drop is not None and change is not None and -change > max_drop + EPSILON
        checks.append(RecoveryCheck(kind=kind, current=now, baseline=then, change=change,
                                    failed=failed))
    return checks


def _interval(share: Share) -> str:
    if share.pct is None or share.low is None or share.high is None:
        return "no attempts"
    return f"{share.pct:.1f}% [{share.low:.1f}, {share.high:.1f}] of {share.n}"


def check_message(check: RecoveryCheck, max_drop: float | None) -> str:
    text = f"recovery after {check.kind}: {_interval(check.current)}"
    if check.baseline is None:
        return text + " (none in the baseline)"
    text += f", baseline {_interval(check.baseline)}"
    if check.change is not None:
        text += f", {check.change:+.1f} points"
    if max_drop is None:
        return text + " (not gated: [gate] recovery_max_drop)"
    return text + (f" (allowed drop {max_drop:g}) — REGRESSION" if check.failed
                   else f" (allowed drop {max_drop:g})")


def with_recovery(decision: GateDecision, current: ReleaseScores,
                  baseline: ReleaseScores | None, max_drop: float | None) -> GateDecision:
    """The decision with the recovery lines, and failed when a gated kind fell too far."""
    if not current.recovery:
        return decision
    checks = recovery_checks(current.recovery, baseline.recovery if baseline else None,
                             max_drop if baseline is not None else None)
    messages = [check_message(check, max_drop) for check in checks]
    update: dict[str, object] = {"messages": [*decision.messages, *messages]}
    if any(check.failed for check in checks):
        update.update(outcome="regression", exit_code=EXIT_CODES["regression"])
    return decision.model_copy(update=update)
