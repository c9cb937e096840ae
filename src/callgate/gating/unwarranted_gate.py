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


def kind_message(current: ReleaseScores, baseline: ReleaseScores | None) -> str | None:
    """The answer_kind judge's macro-F1 and confusion against the baseline's (shown, not
    gated): None when the judge was not applied."""
    figures = current.answer_kinds
    if figures is None:
        return None
    then = baseline.answer_kinds if baseline is not None else None
    now = f"{figures.macro_f1:.2f}" if figures.macro_f1 is not None else "–"
    before = (f"{then.macro_f1:.2f}" if then is not None and then.macro_f1 is not None
              else "– (no baseline figure)")
    change = ""
    if then is not None and then.macro_f1 is not None and figures.macro_f1 is not None:
        change = f" ({figures.macro_f1 - then.macro_f1:+.2f})"
    wrong = [f"{expected} → {given} {count}" for expected, row in figures.confusion.items()
             for given, count in row.items() if given != expected and count]
    return (f"answer kinds: macro-F1 {before} → {now}{change} over {figures.judged} judged "
            f"text answers" + (f"; expected → given: {', '.join(wrong)}" if wrong else "")
            + ("" if figures.certified else " (judge not certified)"))


def claims_check(current: ReleaseScores, baseline: ReleaseScores | None
                 ) -> tuple[str, bool] | None:
    """The claim_support judge's unsupported claims per 100 judged attempts against the
    baseline's, and whether they rose beyond the policies' max_rise (0 by default; gated only
    with a certified judge). None when the judge was not applied."""
    figures = current.judged_claims
    if figures is None or figures.per_100 is None:
        return None
    then = baseline.judged_claims if baseline is not None else None
    before = then.per_100 if then is not None and then.per_100 is not None else None
    limit = current.policies.max_rise if current.policies is not None else 0.0
    failed = figures.certified and figures.per_100 - (before or 0.0) > limit + EPSILON
    text = (f"unsupported claims (judge {'' if figures.certified else 'not certified, '}"
            f"claim_support): {f'{before:.1f}' if before is not None else '0 (no baseline)'}"
            f" → {figures.per_100:.1f} per 100 judged attempts ({figures.unsupported} of "
            f"{figures.judged}; allowed rise {limit:g})")
    if failed:
        text += " — UNSUPPORTED CLAIMS ROSE"
        if figures.first:
            case_id, repeat, reason = figures.first[0]
            text += f"; first: {case_id} (repeat {repeat}): {reason}"
    return text, failed


def behaviour_gated(current: ReleaseScores, baseline: ReleaseScores | None, outcome: Outcome,
                    messages: list[str], baseline_release: str | None, not_whole: str | None
                    ) -> dict[str, Any]:
    """The updates of a decision by the gates beyond the call: the unwarranted-call gate, then
    the policy gate (gating.policy_gate: its broken policies' lines come first of all). Empty
    when neither applies."""
    updates: dict[str, Any] = {}
    kinds = kind_message(current, baseline)
    if kinds is not None:
        messages, updates["messages"] = [*messages, kinds], None
    claims = claims_check(current, baseline)
    if claims is not None:
        line, failed = claims
        updates["messages"] = None
        if failed and not not_whole:
            outcome = "regression"
        messages = [line, *messages] if failed else [*messages, line]
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
