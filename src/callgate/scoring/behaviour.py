"""The judges beyond the call as a run applies them (docs/guides/judge.md, "Judges beyond the
call"): `answer_kind` on the text answers of no-call cases that name a kind, `claim_support`
on the attempts of cases that opt in (`"policies": {"judge_claims": true}`). Neither changes a
verdict: their figures (`KindFigures`, `ClaimFigures`) are kept with the release's scores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.judging.dimensions import ANSWER_KINDS
from callgate.judging.judge import JudgeOutput, JudgeOutputError
from callgate.judging.payloads import judge_payloads
from callgate.judging.step import JudgeStep, Outcome, Payloads
from callgate.scoring.scores import POLICY_EXAMPLES, ClaimFigures, kind_figures
from callgate.store.db import Store
from callgate.suites.environment import EnvironmentError_
from callgate.suites.responses import Response
from callgate.suites.suite import Case, NoCall, Suite

Attempt = tuple[Case, Response, Verdict]


@dataclass
class BehaviourJudges:
    """The judges beyond the call a run applies (each None: not applied)."""

    answer_kind: JudgeStep | None = None
    claim_support: JudgeStep | None = None
    waiting: list[Attempt] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("answer_kind", "claim_support"):
            step = getattr(self, name)
            if step is not None and step.judge.spec.dimensions != (name,):
                raise CallgateError(f"judge {step.judge.spec.name} decides "
                                    f"{', '.join(step.judge.spec.dimensions)}, not {name}")

    def expected_kind(self, case: Case, verdict: Verdict) -> str | None:
        """The kind a scored text answer of this case needs, when the answer_kind judge is
        for it (a call is never any kind: the checks decided it)."""
        expect = case.expect
        if (self.answer_kind is None or not isinstance(expect, NoCall) or verdict.calls
                or verdict.status != "scored" or expect.answer not in ANSWER_KINDS):
            return None
        return expect.answer

    def wants_claims(self, suite: Suite, case: Case, verdict: Verdict) -> bool:
        return (self.claim_support is not None and verdict.status == "scored"
                and bool(suite.policies_of(case).judge_claims))

    def offer(self, suite: Suite, case: Case, response: Response, verdict: Verdict) -> None:
        """Keep an attempt one of the judges is for (judged at the end, in one batch)."""
        if self.expected_kind(case, verdict) or self.wants_claims(suite, case, verdict):
            self.waiting.append((case, response, verdict))

    async def judge(self, suite: Suite, store: Store) -> dict[str, Any]:
        """Both judges over the attempts kept: the scores' `answer_kinds` and
        `judged_claims` (absent for a judge not applied)."""
        out: dict[str, Any] = {}
        if self.answer_kind is not None:
            mine = [a for a in self.waiting if self.expected_kind(a[0], a[2])]
            done = await _judged(self.answer_kind, store, suite, mine)
            pairs = [(str(self.expected_kind(case, verdict)), str(outcome.answer_kind))
                     for (case, _, verdict), outcome in zip(mine, done, strict=True)
                     if isinstance(outcome, JudgeOutput)]
            out["answer_kinds"] = kind_figures(
                pairs, sum(not isinstance(o, JudgeOutput) for o in done),
                self.answer_kind.fingerprint, self.answer_kind.certificate is not None)
        if self.claim_support is not None:
            mine = [a for a in self.waiting if self.wants_claims(suite, a[0], a[2])]
            done = await _judged(self.claim_support, store, suite, mine)
            out["judged_claims"] = _claim_figures(self.claim_support, mine, done)
        self.waiting = []
        return out


async def _judged(step: JudgeStep, store: Store, suite: Suite, attempts: Sequence[Attempt]
                  ) -> list[Outcome]:
    """Each attempt's outcome, in order (a verdict, or what kept one from coming)."""
    payloads: dict[int, Payloads | str] = {}
    for index, (case, response, _) in enumerate(attempts):
        try:
            payloads[index] = judge_payloads(suite, case, response)
        except EnvironmentError_ as exc:
            payloads[index] = f"environment error: {exc}"
    done: dict[int, Outcome] = {}
    await step.judge_all(store, payloads, done)
    return [done.get(index, "not judged") for index in range(len(attempts))]


def _claim_figures(step: JudgeStep, attempts: Sequence[Attempt], done: Sequence[Outcome]
                   ) -> ClaimFigures:
    judged = unsupported = errors = 0
    first: list[tuple[str, int, str]] = []
    for (_, _, verdict), outcome in zip(attempts, done, strict=True):
        if not isinstance(outcome, JudgeOutput):
            errors += 1 if isinstance(outcome, JudgeOutputError) else 0
            continue
        judged += 1
        if outcome.claim_support == "fail":
            unsupported += 1
            if len(first) < POLICY_EXAMPLES:
                first.append((verdict.case_id, verdict.repeat, outcome.reason))
    return ClaimFigures(judged=judged, unsupported=unsupported,
                        per_100=100 * unsupported / judged if judged else None, first=first,
                        judge_errors=errors, fingerprint=step.fingerprint,
                        certified=step.certificate is not None)
