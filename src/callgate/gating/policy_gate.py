"""The policy gate: zero tolerance by default. A release fails when any policy its suite
declares is broken more often (violations per 100 scored attempts) than in the baseline, by
more than the suite's `max_rise` (0 unless suite.json says otherwise), whatever its shares.
Without a baseline, or against one kept before the policy was declared, the rate is compared
with zero: a declared policy needs no history to be kept."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from callgate.gating.scores_file import ReleaseScores
from callgate.scoring.result import Outcome

EPSILON = 1e-9


class PolicyCheck(BaseModel):
    model_config = ConfigDict(frozen=True)
    policy: str
    baseline: float | None  # violations per 100 attempts (None: no baseline figure, read as 0)
    current: float | None
    violations: int  # attempts of this release that broke it
    max_rise: float
    failed: bool
    first: list[tuple[str, int, str]] = []  # (case id, repeat, reason) of the first ones


def policy_checks(current: ReleaseScores, baseline: ReleaseScores | None) -> list[PolicyCheck]:
    """One check per policy the release's suite declares (none: no policies declared)."""
    figures = current.policies
    if figures is None:
        return []
    then = baseline.policies.by_policy if baseline and baseline.policies else {}
    checks = []
    for name, figure in figures.by_policy.items():
        before = then[name].per_100 if name in then else None
        rise = (figure.per_100 or 0.0) - (before or 0.0)
        checks.append(PolicyCheck(
            policy=name, baseline=before, current=figure.per_100, violations=figure.violations,
            max_rise=figures.max_rise, failed=rise > figures.max_rise + EPSILON,
            first=figure.first))
    return checks


def policy_messages(checks: list[PolicyCheck], baseline: str | None) -> list[str]:
    """A line per policy, a failed one naming its first violation."""
    lines = []
    for check in checks:
        then = (f"{check.baseline:.1f}" if check.baseline is not None
                else f"0 ({'no baseline' if baseline is None else 'not in ' + baseline})")
        now = f"{check.current:.1f}" if check.current is not None else "none scored"
        text = (f"policy {check.policy}: {then} → {now} violations per 100 attempts "
                f"({check.violations} attempt(s); allowed rise {check.max_rise:g})")
        if check.failed:
            text += " — POLICY VIOLATION"
            if check.first:
                case_id, repeat, reason = check.first[0]
                text += f"; first: {case_id} (repeat {repeat}): {reason}"
        lines.append(text)
    return lines


def policy_outcome(checks: list[PolicyCheck], outcome: Outcome, messages: list[str],
                   baseline: str | None, not_whole: str | None) -> tuple[Outcome, list[str]]:
    """A policy broken more than allowed fails the release whatever its shares (a release
    missing shards stays inconclusive); the broken policies' lines come first, the policies
    that held last."""
    if any(check.failed for check in checks) and not not_whole:
        outcome = "regression"
        messages = [m.replace("; recorded, passes as a first release", "")
                    .replace("; recorded, passes", "") for m in messages]
    broken = policy_messages([c for c in checks if c.failed], baseline)
    held = policy_messages([c for c in checks if not c.failed], baseline)
    return outcome, broken + messages + held
