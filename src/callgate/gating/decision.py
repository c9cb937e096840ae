"""The decision: a release's figures against its baseline's on the cases both scored, by the
rule (fail when right tool % or right arguments % is more than `max_drop` points below the
baseline; exactly `max_drop` below passes), with the figures a user needs to trust it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter
from typing import Annotated, Any, Literal, NamedTuple

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from callgate.gating.attack_gate import attack_gated
from callgate.gating.cases import Paired
from callgate.gating.flaky import FlakyCase
from callgate.gating.noise import Noise, apply_noise
from callgate.gating.policy_gate import PolicyCheck
from callgate.gating.quarantine import Quarantined, quarantine_note, quarantined_cases
from callgate.gating.scores_file import ReleaseScores
from callgate.gating.sequential import Rule, Tier
from callgate.gating.simulator_change import simulator_warnings
from callgate.gating.statistics import (
    detectable_drop_paired,
    detectable_drop_unpaired,
    mcnemar_exact,
)
from callgate.gating.surface_diff import SurfaceDiff, summary
from callgate.gating.surface_gate import compared_pairs, release_diff, shown_diff
from callgate.gating.unwarranted_gate import UnwarrantedCheck, behaviour_gated
from callgate.gating.what_to_fix import WhatToFix
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED, EXCLUDED_IN_WORDS
from callgate.scoring.result import Outcome
from callgate.scoring.scores import Share, agent_label

DEFAULT_MAX_DROP = 2.0
EPSILON = 1e-9  # so that a drop of exactly max_drop, computed in floating point, passes

EXIT_CODES: dict[Outcome, int] = {"pass": 0, "first_release": 0, "regression": 1,
                                  "inconclusive": 3}


class FigureCheck(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: Literal["right_tool", "right_arguments"]
    baseline: Share
    current: Share
    change: float | None  # points, current − baseline
    failed: bool
    mcnemar_p: float | None
    flipped_worse: int
    flipped_better: int
    detectable_drop_paired: float | None  # points
    detectable_drop_unpaired: float | None  # points
    # the statistical rule's reading (gating.noise): the paired drop of the case rates, its
    # standard error, the one-sided p of "the drop is at most max_drop", the tier
    gated: bool = True
    paired_drop: float | None = None
    paired_se: float | None = None
    p_margin: float | None = None
    tier: Tier | None = None


class CaseChange(NamedTuple):
    """A case that flipped, with its failing attempt's reason. A tuple, not a model: a decision
    at 100,000 cases lists tens of thousands, built without a Python call each (an object
    with these fields in the decision's JSON)."""

    case_id: str
    reason: str


def _a_change(value: Any) -> Any:
    if isinstance(value, CaseChange | Mapping):
        return value
    raise ValueError("a case change is an object (case_id, reason)")


CaseChanges = list[Annotated[CaseChange, BeforeValidator(_a_change),
                             PlainSerializer(CaseChange._asdict)]]


def _a_flaky(value: Any) -> Any:
    if isinstance(value, Mapping):
        return FlakyCase(**value)
    return value


class OtherAgent(BaseModel):
    """The newest released release of another agent on the suite: what a first release of an
    agent is not silently waved past."""

    model_config = ConfigDict(frozen=True)
    agent: str
    release: str
    model: str


class GateDecision(BaseModel):
    model_config = ConfigDict(frozen=True)
    outcome: Outcome
    exit_code: int
    agent: str
    model: str
    release: str
    suite_name: str
    baseline_release: str | None
    baseline_source: str | None
    baseline_agent: str | None = None
    baseline_model: str | None = None
    new_agent: bool = False  # a new agent's line, started on purpose (--new-agent)
    max_drop: float
    shared_cases: int
    added_cases: list[str]
    removed_cases: list[str]
    suite_changed: bool
    checks: list[FigureCheck]
    worse: CaseChanges
    better: CaseChanges
    excluded_share: float
    messages: list[str]
    warnings: list[str]
    rule: Rule = "points"
    flaky: list[Annotated[FlakyCase, BeforeValidator(_a_flaky),
                          PlainSerializer(FlakyCase._asdict)]] = Field(default_factory=list)
    quarantined: list[Quarantined] = Field(default_factory=list)
    # What changed in the tool surface since the baseline (gating/surface_diff.py), and the
    # cases left out because their expectation changed; None: nothing to say.
    tool_surface: SurfaceDiff | None = None
    what_to_fix: WhatToFix | None = None  # slices, confusion table, slice rule (issue 33)
    policies: list[PolicyCheck] = Field(default_factory=list)  # gating.policy_gate's checks
    unwarranted_calls: UnwarrantedCheck | None = None  # gating.unwarranted_gate's check


def decision_json(decision: GateDecision) -> dict[str, Any]:
    """The decision as JSON (model_dump's mode="json"), its flipped cases written out
    directly: through the serializer each case is a call, some 80 ms at 35,000 cases."""
    doc = decision.model_dump(mode="json", exclude={"worse", "better"})
    for side in ("worse", "better"):
        doc[side] = [{"case_id": case_id, "reason": reason}
                     for case_id, reason in getattr(decision, side)]
    return {name: doc[name] for name in GateDecision.model_fields}  # in the fields' order


def kept_decision(text: str) -> GateDecision:
    """A decision from the JSON the store keeps (its own model_dump_json, under a key that
    covers callgate's version): the flipped cases are made tuples as they are, not validated
    one by one (at 35,000 cases that took a third of a release page's time). orjson, not
    callgate.reading: the text is callgate's own, not input to check."""
    doc = orjson.loads(text)
    pick, make = itemgetter("case_id", "reason"), partial(tuple.__new__, CaseChange)
    flips = {side: list(map(make, map(pick, doc.pop(side)))) for side in ("worse", "better")}
    return GateDecision.model_validate({**doc, "worse": [], "better": []}).model_copy(
        update=flips)


def decide(
    current: ReleaseScores,
    baseline: ReleaseScores | None,
    *,
    max_drop: float = DEFAULT_MAX_DROP,
    max_excluded: float = DEFAULT_MAX_EXCLUDED,
    baseline_source: str | None = None,
    baseline_notes: Iterable[str] = (),
    judged_checks: Iterable[tuple[str, str]] = (),
    audited_figures: Iterable[str] = (),
    not_whole: str | None = None,
    other_agent: OtherAgent | None = None,
    new_agent: bool = False,
    pairs: Paired | None = None,
    noise: Noise = Noise(),
    what_to_fix: WhatToFix | None = None,
) -> GateDecision:
    """Apply the rule. Regression wins over inconclusive; inconclusive is never green.
    `baseline_notes` (releases passed over as baselines) are shown among the warnings.
    `judged_checks` are (outcome, message) readings of the figures estimated with an audit of
    the judged attempts (audit.judged_check): `regression` fails the gate, `undecided` makes
    it inconclusive, anything else is shown. `audited_figures`: the figures those readings
    decide (both releases audited: audited estimate against audited estimate); their
    judge-as-given check is shown, not applied (see judge_as_given). `not_whole` says why the
    release is not a whole one (shards missing): no result, inconclusive whatever the figures
    say, and the first message. Without a baseline, `other_agent` (another agent's newest
    released release on the suite) makes the release inconclusive, unless `new_agent` says it
    starts a line on purpose. `pairs`: the releases' cases paired already (counted in the
    store); without, they are paired from the releases' `cases`. `what_to_fix`: the slices
    and confusion table (gating/what_to_fix.py); a slice its rule failed fails the gate too
    (it only adds failures)."""
    who = agent_label(current.agent, current.model)
    passed_over = list(baseline_notes)
    notes = _Notes(inconclusive=_standing(current, max_excluded), warnings=list(passed_over))
    notes.warnings += _pending_judge(current)
    first = [not_whole] if not_whole else []
    common: dict[str, Any] = {
        "agent": current.agent, "model": current.model, "release": current.release,
        "suite_name": current.suite_name, "max_drop": max_drop,
        "excluded_share": current.excluded_share, "new_agent": new_agent, "rule": noise.rule,
        "flaky": list(noise.flaky), "quarantined": list(noise.quarantined)}
    if baseline is None:
        notes.warnings += [n for n in [quarantine_note(noise.quarantined)] if n]
        return _policy_gated(_first_release(current, who, notes, first, bool(passed_over),
                                            other_agent, new_agent, common), current, None,
                             not_whole)

    lineage = _lineage(current, baseline, notes)
    now_suite, then_suite = _suite(current), _suite(baseline)
    surface = release_diff(baseline, current)
    left_out = quarantined_cases(noise.quarantined)
    pairs = compared_pairs(baseline, current, (then_suite & now_suite) - left_out, surface, pairs,
                           left_out)
    pairing = _pairing(current, baseline, pairs, (now_suite, then_suite), max_excluded, notes,
                       summary(surface))
    checks, said = apply_noise(
        judge_as_given(_figure_checks(pairs, max_drop, notes), audited_figures), pairs,
        max_drop, noise, pairing.shared)
    notes.inconclusive += said.inconclusive
    notes.warnings += said.warnings
    worse, better = pairs.changes()
    messages = _check_messages(checks, max_drop, audited_figures) + said.messages
    judged_regression = _judged_readings(judged_checks, messages, notes)
    slice_failed = _slice_messages(what_to_fix, messages)
    outcome = _outcome(not_whole, any(c.failed for c in checks) or judged_regression
                       or slice_failed, notes.inconclusive)
    # the flipped cases put in as built (tens of thousands), the rest validated
    decision = GateDecision.model_validate(dict(
        outcome=outcome, exit_code=EXIT_CODES[outcome], baseline_release=baseline.release,
        baseline_source=baseline_source, baseline_agent=baseline.agent,
        baseline_model=baseline.model, shared_cases=pairing.shared,
        added_cases=pairing.added, removed_cases=pairing.removed,
        suite_changed=pairing.suite_changed, checks=checks,
        worse=[], better=[], messages=first + lineage + messages + notes.inconclusive,
        warnings=notes.warnings, what_to_fix=what_to_fix, **common,
        tool_surface=shown_diff(surface, baseline, current, pairing.suite_changed,
                                [c for c, _ in worse], [c for c, _ in better]),
    ))
    change = partial(tuple.__new__, CaseChange)
    return _policy_gated(decision.model_copy(update={"worse": list(map(change, worse)),
                                                     "better": list(map(change, better))}),
                         current, baseline, not_whole)


def _policy_gated(decision: GateDecision, current: ReleaseScores,
                  baseline: ReleaseScores | None, not_whole: str | None) -> GateDecision:
    """The decision with the gates beyond the call (attack_gate, unwarranted_gate)."""
    decision = attack_gated(decision, current, baseline, EXIT_CODES)
    updates = behaviour_gated(current, baseline, decision.outcome, decision.messages,
                              decision.baseline_release, not_whole)
    if not updates:
        return decision
    return decision.model_copy(update={**updates, "exit_code": EXIT_CODES[updates["outcome"]]})


@dataclass
class _Notes:
    """What the steps of a decision found: reasons it is inconclusive, and warnings."""

    inconclusive: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Pairing:
    shared: int  # cases scored in both releases
    added: list[str]  # in the suite now, not then
    removed: list[str]
    suite_changed: bool


def _outcome(not_whole: str | None, regression: bool, inconclusive: list[str]) -> Outcome:
    """Missing shards first (no result), then a regression, then anything inconclusive."""
    if not_whole:
        return "inconclusive"
    if regression:
        return "regression"
    return "inconclusive" if inconclusive else "pass"


def _standing(current: ReleaseScores, max_excluded: float) -> list[str]:
    """Why the release's own figures make any gate on it inconclusive."""
    out = []
    if current.excluded_share > max_excluded:
        out.append(
            f"{current.excluded_share:.1%} of attempts were excluded ({EXCLUDED_IN_WORDS}), "
            f"above the {max_excluded:.0%} allowed")
    if current.uncalibrated:
        out.append("the judge that scored this release is not calibrated")
    return out


def _pending_judge(current: ReleaseScores) -> list[str]:
    pending = current.excluded.get("pending_judge", 0)
    if not pending:
        return []
    # never silently: the shares leave out the cases only a judge can decide
    return [f"{pending} of {current.attempts} attempts expect a judge and were not judged "
            "(scored without --judge): the shares leave them out"]


def _first_release(current: ReleaseScores, who: str, notes: _Notes, first: list[str],
                   passed_over: bool, other_agent: OtherAgent | None, new_agent: bool,
                   common: dict[str, Any]) -> GateDecision:
    """The decision without a baseline: a first release passes, unless another agent has
    released on the suite and this one does not say it starts a line on purpose."""
    inconclusive = notes.inconclusive
    if other_agent is not None and not new_agent:
        inconclusive.append(
            f"agent {current.agent} has no released release on {current.suite_name}, but "
            f"agent {other_agent.agent} has: its last is {other_agent.release} (model "
            f"{other_agent.model}); a model or agent change is gated, not waved through. "
            f"Compare with it: --baseline-agent {other_agent.agent}; or start a new line "
            "on purpose: --new-agent")
    outcome: Outcome = "inconclusive" if inconclusive or first else "first_release"
    passes = outcome == "first_release"
    messages = [f"first release of {who} on {current.suite_name}: no baseline"
                + ("; recorded, passes" if passes else "")]
    if passed_over:  # earlier releases exist, none of them released
        messages = [f"no earlier release of {who} on {current.suite_name} was "
                    "released: no baseline"
                    + ("; recorded, passes as a first release" if passes else "")]
    if new_agent:
        messages.append(f"agent {current.agent} starts a new line on purpose (--new-agent)"
                        + (f", beside agent {other_agent.agent} (last release "
                           f"{other_agent.release})" if other_agent else ""))
    return GateDecision(outcome=outcome, exit_code=EXIT_CODES[outcome],
                        baseline_release=None, baseline_source=None, shared_cases=0,
                        added_cases=[], removed_cases=[], suite_changed=False, checks=[],
                        worse=[], better=[], messages=first + messages + inconclusive,
                        warnings=notes.warnings, **common)


def _lineage(current: ReleaseScores, baseline: ReleaseScores, notes: _Notes) -> list[str]:
    """What changed between the two releases besides their answers: the way server errors
    were scored (not comparable), the agent and the model (named), the model's parameters."""
    if baseline.server_errors != current.server_errors:
        def way(release: ReleaseScores) -> str:
            return ("counted as wrong answers" if release.server_errors == "count"
                    else "excluded")
        notes.inconclusive.append(
            f"server errors are {way(current)} in {current.release} and {way(baseline)} in "
            f"the baseline {baseline.release}: the shares are not comparable; score both with "
            "the same --server-errors")
    lineage = []
    if baseline.agent != current.agent:
        lineage.append(f"baseline: agent {baseline.agent}'s release {baseline.release}, "
                       f"compared across agents (now agent {current.agent})")
    if baseline.model != current.model:
        lineage.append(f"model changed: {baseline.model} → {current.model}")
    elif (baseline.model_params is not None and current.model_params is not None
          and baseline.model_params != current.model_params):
        changed = sorted(k for k in baseline.model_params.keys() | current.model_params.keys()
                         if baseline.model_params.get(k) != current.model_params.get(k))
        notes.warnings.append(f"model parameters changed since {baseline.release}: "
                              + ", ".join(changed))
    notes.warnings += simulator_warnings(baseline, current)
    return lineage


def _suite(release: ReleaseScores) -> set[str]:
    """The case ids of the release's suite (its cases, in a scores file without them)."""
    return set(release.suite_cases or release.cases)


def _pairing(current: ReleaseScores, baseline: ReleaseScores, pairs: Paired,
             suites: tuple[set[str], set[str]], max_excluded: float, notes: _Notes,
             surface: str = "") -> _Pairing:
    """The cases both releases scored, what the suite gained and lost (`suites`: its case ids
    now and then), and what that says about the comparison (`surface`: what changed in the
    tool surface, in a clause)."""
    now_suite, then_suite = suites
    added = sorted(now_suite - then_suite)
    removed = sorted(then_suite - now_suite)
    shared = pairs.shared
    # Cases still in the suite that the baseline scored and this release did not: a partial
    # responses file or a run stopped early must not pass on the cases it happened to answer.
    unscored = pairs.unscored
    if pairs.scored_before and len(unscored) / pairs.scored_before > max_excluded:
        notes.inconclusive.append(
            f"{len(unscored)} of {pairs.scored_before} cases the baseline scored have no "
            f"scored attempt now (first: {', '.join(unscored[:5])}), above the "
            f"{max_excluded:.0%} allowed")
    elif unscored:
        notes.warnings.append(f"{len(unscored)} case(s) scored in the baseline have no scored "
                              f"attempt now: {', '.join(unscored[:10])}")
    suite_changed = current.suite_fingerprint != baseline.suite_fingerprint
    if suite_changed:
        notes.warnings.append(
            f"the suite changed since {baseline.release}: comparing on the {shared} cases "
            f"both scored ({len(added)} added, {len(removed)} removed)"
            + (f"; {surface}" if surface else ""))
    if current.judge_fingerprint != baseline.judge_fingerprint:
        notes.warnings.append(
            f"the judge differs: baseline {baseline.judge_fingerprint or 'none'}, "
            f"now {current.judge_fingerprint or 'none'}")
    if not shared:
        notes.inconclusive.append("no case was scored in both releases")
    return _Pairing(shared=shared, added=added, removed=removed, suite_changed=suite_changed)


def _figure_checks(pairs: Paired, max_drop: float, notes: _Notes) -> list[FigureCheck]:
    """Each figure over the shared cases, then against now: the rule, the flips, McNemar's
    test and the smallest drop the pairs can detect (a warning when above max_drop)."""
    shared = pairs.shared
    then_fig, now_fig = pairs.figures()
    checks = []
    names: tuple[Literal["right_tool"], Literal["right_arguments"]] = ("right_tool",
                                                                       "right_arguments")
    for name in names:
        then_share, now_share = getattr(then_fig, name), getattr(now_fig, name)
        change = (None if then_share.pct is None or now_share.pct is None
                  else now_share.pct - then_share.pct)
        worse, better = pairs.flipped(name)
        # With no flips observed, assume one: the detectable drop is then an optimistic bound.
        discordant = max(worse + better, 1) / shared if shared else 0.0
        paired = detectable_drop_paired(shared, discordant)
        # each side's effective size: repeats of a case that agree are one draw
        unpaired = (detectable_drop_unpaired(then_share.n / then_share.design_effect,
                                             then_share.pct / 100,
                                             n_after=now_share.n / now_share.design_effect)
                    if then_share.pct is not None else None)
        checks.append(FigureCheck(
            name=name, baseline=then_share, current=now_share, change=change,
            failed=change is not None and -change > max_drop + EPSILON,
            mcnemar_p=mcnemar_exact(worse, better) if shared else None,
            flipped_worse=worse, flipped_better=better,
            detectable_drop_paired=None if paired is None else 100 * paired,
            detectable_drop_unpaired=None if unpaired is None else 100 * unpaired,
        ))
        if shared:
            notes.warnings += _power_warning(name, shared, discordant, paired, max_drop)
    return checks


def _power_warning(name: str, pairs: int, discordant: float, paired: float | None,
                   max_drop: float) -> list[str]:
    """A warning when the paired cases cannot see a drop of max_drop."""
    label = name.replace("_", " ")
    if paired is None:
        return [f"{label}: {pairs} paired cases cannot detect any drop with 80% power at a "
                f"flip rate of {discordant:.0%} (at least one flip assumed), so a drop of more "
                f"than the {max_drop:g} points allowed can pass unseen; add cases or repeats"]
    if 100 * paired > max_drop:
        return [f"{label}: with {pairs} paired cases the smallest drop detectable with 80% "
                f"power is {100 * paired:.1f} points, more than the {max_drop:g} allowed: "
                "smaller real drops can pass unseen; add cases or repeats"]
    return []


def _check_messages(checks: list[FigureCheck], max_drop: float,
                    audited_figures: Iterable[str]) -> list[str]:
    audited = set(audited_figures)
    messages = []
    for check in checks:
        if check.change is None:
            continue
        if round(check.change, 1) == 0:
            verb = "unchanged"
        else:
            verb = f"{'fell' if check.change < 0 else 'rose'} {abs(check.change):.1f} points"
        messages.append(
            f"{check.name.replace('_', ' ')} {verb} "
            f"({check.baseline.pct:.1f} → {check.current.pct:.1f}; allowed drop {max_drop:g})"
            + (" — REGRESSION" if check.failed else "")
            + (" (judged attempts as the judge gave them; the audited estimates below decide)"
               if check.name in audited else ""))
    return messages


def _slice_messages(what_to_fix: WhatToFix | None, messages: list[str]) -> bool:
    """The slice rule's statement and failures among the messages; True when a slice failed."""
    gate = what_to_fix.slice_gate if what_to_fix is not None else None
    if gate is None:
        return False
    messages.append(gate.statement)
    messages += [f"slice {label} — REGRESSION (slice rule)" for label in gate.failed]
    return bool(gate.failed)


def _judged_readings(judged_checks: Iterable[tuple[str, str]], messages: list[str],
                     notes: _Notes) -> bool:
    """Take in the audited readings: `undecided` ones make the gate inconclusive, the others
    are shown; True when one of them is a regression."""
    regression = False
    for judged_outcome, text in judged_checks:
        if judged_outcome == "undecided":
            notes.inconclusive.append(text)
        else:
            regression |= judged_outcome == "regression"
            messages.append(text)
    return regression


def judge_as_given(checks: list[FigureCheck], audited_figures: Iterable[str]
                   ) -> list[FigureCheck]:
    """When both releases are audited, a figure is decided on its audited estimates, not on
    the judge's verdicts as given (a judge lenient on one release and strict on the other moves
    those): its figure check is kept for the record, never failed."""
    audited = set(audited_figures)
    return [c.model_copy(update={"failed": False}) if c.name in audited else c for c in checks]

