"""Stage 4, the figures: right tool %, right arguments %, calls per task, and their context.

Pure functions over verdicts. `ScoreBuilder` takes verdicts one at a time so that a run of any
size is scored while it streams; it keeps only counters, per-case tallies and latencies.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, field_serializer

from callgate.checks.verdict import ServerErrors, Verdict
from callgate.judging.judged_shares import JudgedShares
from callgate.scoring.exclusion import COUNTED_APART, SEEN_APART
from callgate.stats import design_effect as case_design_effect
from callgate.stats import wilson

MAX_K = 8  # pass^k is reported for k = 1..8; beyond that it says little a user acts on


def pass_hat_k(successes: int, trials: int, k: int) -> float:
    """pass^k as in tau-bench: the chance that k draws without replacement all succeed."""
    if k > trials:
        raise ValueError(f"k={k} exceeds the {trials} trials")
    # C(s, k) / C(n, k) as a running product: no huge integers when n is large.
    ratio = 1.0
    for i in range(k):
        ratio *= (successes - i) / (trials - i)
    return max(ratio, 0.0)


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in [0, 100]) of already sorted values."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)



def agent_label(agent: str, model: str) -> str:
    """An agent with the model it ran with, or the model alone when it is the agent's name:
    how a release is named beside its figures (the model id is on every figure)."""
    return model if agent == model else f"{agent} ({model})"

class Share(BaseModel):
    """A percentage with its Wilson 95% interval (all in points, 0–100).

    Repeats of one case are not independent attempts: the interval is Wilson's at the
    effective sample size n / design_effect, with design_effect = 1 + (m − 1)·ICC (m the
    size-weighted attempts per case, ICC the outcome's intraclass correlation by case, floored
    at 0). One attempt per case, or repeats that vary as independent ones would, has a design
    effect of 1: the attempt-level interval. `icc` is None when it could not be estimated
    (no repeats, or an outcome that never varies), read as 0."""

    model_config = ConfigDict(frozen=True)
    successes: int
    n: int
    pct: float | None
    low: float | None
    high: float | None
    design_effect: float = 1.0
    icc: float | None = None

    @classmethod
    def of(cls, successes: int, n: int, design_effect: float = 1.0,
           icc: float | None = None) -> Share:
        if design_effect == 1.0:
            interval = wilson(successes, n)
        else:
            interval = wilson(successes / design_effect, n / design_effect)
        if interval is None:
            return cls(successes=successes, n=n, pct=None, low=None, high=None)
        return cls(
            successes=successes,
            n=n,
            pct=100 * successes / n,
            low=100 * interval[0],
            high=100 * interval[1],
            design_effect=design_effect,
            icc=icc,
        )

    @classmethod
    def by_case(cls, cases: Mapping[tuple[int, int], int]) -> Share:
        """The share over cases counted by their (successes, attempts), its interval
        clustered by case."""
        effect, _, icc = case_design_effect(cases)
        return cls.of(sum(s * w for (s, _), w in cases.items()),
                      sum(n * w for (_, n), w in cases.items()), effect, icc)


class Figures(BaseModel):
    """The three figures over one set of scored attempts."""

    model_config = ConfigDict(frozen=True)
    scored: int
    right_tool: Share
    right_arguments: Share
    calls_per_task: float | None


POLICY_EXAMPLES = 10  # violating attempts named per policy in the scores


class PolicyFigure(BaseModel):
    """One policy over a release's scored attempts: how many broke it, per 100 attempts, and
    the first ones (case id, repeat, reason)."""

    model_config = ConfigDict(frozen=True)
    violations: int  # attempts that broke it (an attempt breaking it twice counts once)
    per_100: float | None  # per 100 scored attempts
    first: list[tuple[str, int, str]] = []


class PolicyFigures(BaseModel):
    """The policies a suite declares, each with its figure, and the gate's tolerance."""

    model_config = ConfigDict(frozen=True)
    scored: int
    violating: int  # scored attempts that broke at least one policy
    per_100: float | None
    by_policy: dict[str, PolicyFigure]
    max_rise: float = 0.0  # violations per 100 attempts a policy may rise (suite.json)


KINDS = ("ask", "cannot", "answer")


class KindFigures(BaseModel):
    """The answer_kind judge over a release's text answers to no-call cases that name a kind:
    expected × given kind, each kind's F1 and their mean (macro-F1)."""

    model_config = ConfigDict(frozen=True)
    judged: int  # attempts with a verdict
    confusion: dict[str, dict[str, int]]  # expected kind -> given kind -> attempts
    f1: dict[str, float | None]  # per expected kind (None: neither expected nor given)
    macro_f1: float | None  # mean of the kinds' F1 that are defined
    judge_errors: int = 0
    fingerprint: str = ""
    certified: bool = False


def kind_figures(pairs: Iterable[tuple[str, str]], judge_errors: int = 0,
                 fingerprint: str = "", certified: bool = False) -> KindFigures:
    """(expected, given) kinds of the judged attempts, as KindFigures."""
    confusion = {k: dict.fromkeys(KINDS, 0) for k in KINDS}
    judged = 0
    for expected, given in pairs:
        confusion[expected][given] += 1
        judged += 1
    f1: dict[str, float | None] = {}
    for kind in KINDS:
        hit = confusion[kind][kind]
        total = sum(confusion[kind].values()) + sum(confusion[other][kind] for other in KINDS)
        f1[kind] = 2 * hit / total if total else None
    defined = [value for value in f1.values() if value is not None]
    return KindFigures(judged=judged, confusion=confusion, f1=f1,
                       macro_f1=sum(defined) / len(defined) if defined else None,
                       judge_errors=judge_errors, fingerprint=fingerprint, certified=certified)


class ClaimFigures(BaseModel):
    """The claim_support judge over the attempts of the cases that opt in: how many final
    answers make a claim the trace does not back, per 100 judged attempts."""

    model_config = ConfigDict(frozen=True)
    judged: int
    unsupported: int
    per_100: float | None
    first: list[tuple[str, int, str]] = []  # (case id, repeat, the judge's reason)
    judge_errors: int = 0
    fingerprint: str = ""
    certified: bool = False


class Scores(BaseModel):
    """Everything reported for one model, suite and release."""

    model_config = ConfigDict(frozen=True)
    attempts: int
    figures: Figures
    excluded: dict[str, int]
    by_tag: dict[str, Figures]
    pass_hat_k: dict[int, float]
    cases: int
    cost_usd: float | None
    cost_unknown: int
    prompt_tokens: int | None  # None when no attempt reported usage
    completion_tokens: int | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    providers: dict[str, int]
    # Set when a judge decided some attempts: raw and Rogan–Gladen corrected shares of those
    # (judging.step.judged_shares). Dumped with the fields it was given only: the document a
    # run stores and `--json` prints is the one it was built or read from.
    judged: JudgedShares | None = None
    uncalibrated: bool = False
    # count: server errors after retries were scored as wrong answers (--server-errors count)
    server_errors: ServerErrors = "exclude"
    # Set when --max-cost / --max-attempts ended a live run before every attempt was called.
    stopped: str | None = None
    # What one right answer (an attempt with the right arguments) cost and took: the run's
    # spend and the attempts' summed latency over the right answers. None when some cost (or
    # latency) is unknown, or no answer was right.
    cost_per_right_usd: float | None = None
    latency_per_right_ms: float | None = None
    # Set when the suite or a case declares policies (docs/policies.md).
    policies: PolicyFigures | None = None
    # Attempts of the no-call cases that called a tool (a call where none is expected), when
    # the builder knows the no-call cases and some were scored.
    unwarranted_calls: Share | None = None
    # Per fault kind: the faulted attempts whose `after_fault` held (scoring.recovery).
    recovery: dict[str, Share] | None = None
    # Points the unwarranted-call rate may rise before the gate fails (suite.json's
    # policies.unwarranted_calls.max_rise); None: not gated on its own.
    unwarranted_calls_max_rise: float | None = None
    # Set when the answer_kind / claim_support judges were applied (judging.behaviour).
    answer_kinds: KindFigures | None = None
    judged_claims: ClaimFigures | None = None

    @field_serializer("judged")
    def _judged_as_given(self, judged: JudgedShares | None) -> dict[str, Any] | None:
        return judged.model_dump(mode="json", exclude_unset=True) if judged is not None else None


@dataclass
class _PolicyTally:
    """Violations per policy over the scored attempts, for PolicyFigures."""

    declared: Sequence[str] = ()
    max_rise: float = 0.0
    violating: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    first: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)

    def add(self, verdict: Verdict) -> None:
        if not verdict.violations:
            return
        self.violating += 1
        reasons: dict[str, str] = {}  # one attempt counts once per policy, with its first
        for violation in verdict.violations:
            reasons.setdefault(violation.policy, violation.reason)
        for policy, reason in reasons.items():
            self.counts[policy] += 1
            named = self.first.setdefault(policy, [])
            if len(named) < POLICY_EXAMPLES:
                named.append((verdict.case_id, verdict.repeat, reason))

    def figures(self, scored: int) -> PolicyFigures | None:
        names = [*self.declared, *sorted(set(self.counts) - set(self.declared))]
        if not names:
            return None
        def rate(count: int) -> float | None:
            return 100 * count / scored if scored else None
        return PolicyFigures(
            scored=scored, violating=self.violating, per_100=rate(self.violating),
            max_rise=self.max_rise,
            by_policy={name: PolicyFigure(violations=self.counts[name],
                                          per_100=rate(self.counts[name]),
                                          first=self.first.get(name, []))
                       for name in names})


@dataclass
class _Tally:
    scored: int = 0
    calls: int = 0
    # how many cases have each (successes, scored), for the intervals clustered by case
    right_tool: Counter[tuple[int, int]] = field(default_factory=Counter)
    right_arguments: Counter[tuple[int, int]] = field(default_factory=Counter)

    def add_case(self, case: Sequence[int]) -> None:
        """Add one case's tally: [right arguments, scored, right tool, calls]."""
        self.right_arguments[case[0], case[1]] += 1
        self.scored += case[1]
        self.right_tool[case[2], case[1]] += 1
        self.calls += case[3]

    def figures(self) -> Figures:
        return Figures(
            scored=self.scored,
            right_tool=Share.by_case(self.right_tool),
            right_arguments=Share.by_case(self.right_arguments),
            calls_per_task=self.calls / self.scored if self.scored else None,
        )


@dataclass
class ScoreBuilder:
    """Accumulates verdicts (and response metadata) into `Scores`."""

    tags_of: Mapping[str, Sequence[str]]
    attempts: int = 0
    excluded: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # Scored attempts, per case: [right arguments, scored, right tool, calls]. The whole and
    # the per-tag figures are summed from these in build(), not tallied for every attempt.
    per_case: dict[str, list[int]] = field(default_factory=dict)
    cost: float = 0.0
    cost_known: int = 0
    cost_unknown: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_known: int = 0
    # 8 bytes an attempt (a list of floats takes 32); sorted only once, in build().
    latencies: array[float] = field(default_factory=lambda: array("d"))
    providers: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # The policies the suite declares (Suite.policy_names) and the gate's tolerance on them.
    policies: Sequence[str] = ()
    policy_max_rise: float = 0.0
    _policy: _PolicyTally = field(default_factory=_PolicyTally)
    # The ids of the cases that expect no call, for the unwarranted-call rate.
    no_call_cases: Collection[str] = frozenset()
    _no_call: list[int] = field(default_factory=lambda: [0, 0])  # [called, scored]
    unwarranted_calls_max_rise: float | None = None

    def add(
        self,
        verdict: Verdict,
        *,
        cost: float | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        latency_ms: float | None = None,
        provider: str | None = None,
        failed_request: bool = False,
    ) -> None:
        """`failed_request`: the provider answered with an error (a server error counted as a
        wrong answer is scored, yet, like every provider error, has no cost to know)."""
        self.attempts += 1
        if (verdict.status not in ("provider_error", "target_error", "user_error")
                and not failed_request):
            if cost is None:
                self.cost_unknown += 1
            else:
                self.cost += cost
                self.cost_known += 1
        if prompt_tokens is not None or completion_tokens is not None:
            self.usage_known += 1
        self.prompt_tokens += prompt_tokens or 0
        self.completion_tokens += completion_tokens or 0
        if latency_ms is not None:
            self.latencies.append(latency_ms)
        if provider:
            self.providers[provider] += 1
        if verdict.status != "scored":
            self.excluded[verdict.status] += 1
            return
        self._policy.add(verdict)
        if verdict.case_id in self.no_call_cases:
            self._no_call[0] += verdict.calls > 0
            self._no_call[1] += 1
        tally = self.per_case.get(verdict.case_id)
        if tally is None:
            tally = self.per_case[verdict.case_id] = [0, 0, 0, 0]
        tally[0] += verdict.right_arguments
        tally[1] += 1
        tally[2] += verdict.right_tool
        tally[3] += verdict.calls

    def _policy_figures(self, scored: int) -> PolicyFigures | None:
        self._policy.declared, self._policy.max_rise = self.policies, self.policy_max_rise
        return self._policy.figures(scored)

    def build(self) -> Scores:
        latencies = sorted(self.latencies)
        right = sum(tally[0] for tally in self.per_case.values())
        total, tags = _Tally(), defaultdict[str, _Tally](_Tally)
        for case_id, tally in self.per_case.items():
            total.add_case(tally)
            for tag in self.tags_of.get(case_id, ()):
                tags[tag].add_case(tally)
        return Scores(
            attempts=self.attempts,
            figures=total.figures(),
            excluded={
                k: self.excluded.get(k, 0) for k in COUNTED_APART
            } | {k: self.excluded[k] for k in SEEN_APART if self.excluded.get(k)},
            by_tag={tag: tally.figures() for tag, tally in sorted(tags.items())},
            pass_hat_k=mean_pass_hat_k(tally[:2] for tally in self.per_case.values()),
            cases=len(self.per_case),
            cost_usd=self.cost if self.cost_known else None,
            cost_unknown=self.cost_unknown,
            prompt_tokens=self.prompt_tokens if self.usage_known else None,
            completion_tokens=self.completion_tokens if self.usage_known else None,
            latency_p50_ms=percentile(latencies, 50),
            latency_p95_ms=percentile(latencies, 95),
            providers=dict(sorted(self.providers.items())),
            cost_per_right_usd=(self.cost / right if right and self.cost_known
                                and not self.cost_unknown else None),
            latency_per_right_ms=(sum(latencies) / right
                                  if right and len(latencies) == self.attempts else None),
            policies=self._policy_figures(total.scored),
            unwarranted_calls=Share.of(*self._no_call) if self._no_call[1] else None,
            unwarranted_calls_max_rise=self.unwarranted_calls_max_rise,
        )


def mean_pass_hat_k(tallies: Iterable[Sequence[int]]) -> dict[int, float]:
    """Mean pass^k for k up to MAX_K and the most trials a case has, each k averaged over the
    cases with at least k scored trials (an excluded attempt leaves its case with fewer)."""
    tallies = [tuple(t) for t in tallies if t[1] > 0]
    k_max = min(max((trials for _, trials in tallies), default=0), MAX_K)
    out = {}
    for k in range(1, k_max + 1):
        eligible = [(s, n) for s, n in tallies if n >= k]
        out[k] = sum(pass_hat_k(s, n, k) for s, n in eligible) / len(eligible)
    return out


def score(verdicts: Iterable[Verdict], tags_of: dict[str, list[str]] | None = None) -> Scores:
    """Score a finished list of verdicts (no response metadata)."""
    builder = ScoreBuilder(tags_of=tags_of or {})
    for verdict in verdicts:
        builder.add(verdict)
    return builder.build()
