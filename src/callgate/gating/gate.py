"""Stage 5, the gate: compare a release with the last released one of the same agent and suite.

A release belongs to an agent (a stable name; without one, the model id) and records the model
id it ran with: a model change under one agent is compared and named, and a first release of an
agent on a suite another agent has released on is inconclusive until the user says which line
it continues (`--baseline-agent`) or that it starts one (`--new-agent`).

The rule (Agent Wranglers' tool-choice gate): fail when right tool % or right arguments % is
more than `max_drop` points below the baseline; exactly `max_drop` below passes. Around the rule,
the figures a user needs to trust it: paired cases, an exact McNemar test, Wilson intervals and
the smallest drop the suite can detect (computed in `gating.statistics`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from callgate.checks.verdict import ServerErrors, Verdict
from callgate.errors import CallgateError, InputError
from callgate.gating.statistics import (
    detectable_drop_paired,
    detectable_drop_unpaired,
    mcnemar_exact,
)
from callgate.gating.thresholds import DEFAULT_MAX_EXCLUDED, excluded_share, too_many_excluded
from callgate.reading import names_lines, read_json, validate
from callgate.scoring.result import GateRecord, Outcome
from callgate.scoring.scores import Figures, Share, agent_label
from callgate.store.db import Store
from callgate.suites.shard import incomplete
from callgate.version import __version__

FORMAT: Final = "callgate.release/1"
DEFAULT_MAX_DROP = 2.0
EPSILON = 1e-9  # so that a drop of exactly max_drop, computed in floating point, passes

EXIT_CODES: dict[Outcome, int] = {"pass": 0, "first_release": 0, "regression": 1,
                                  "inconclusive": 3}
RELEASED: frozenset[Outcome] = frozenset({"pass", "first_release"})


# --------------------------------------------------------------------------- per case


class CaseRecord(BaseModel):
    """One case over its repeats; the unit that is paired between releases."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    trials: int  # scored attempts
    right_tool: int
    right_arguments: int
    excluded: int = 0
    reason: str = ""  # the first failing attempt's reason

    @property
    def passed(self) -> bool:
        """Most scored repeats fully right (right tool and right arguments)."""
        return self.trials > 0 and 2 * self.right_arguments > self.trials

    @property
    def passed_tool(self) -> bool:
        return self.trials > 0 and 2 * self.right_tool > self.trials


def case_records(verdicts: Iterable[Verdict]) -> dict[str, CaseRecord]:
    tallies: dict[str, list[Any]] = {}
    for v in verdicts:
        tally = tallies.setdefault(v.case_id, [0, 0, 0, 0, ""])
        if v.status != "scored":
            tally[3] += 1
            continue
        tally[0] += 1
        tally[1] += v.right_tool
        tally[2] += v.right_arguments
        if not v.right_arguments and not tally[4]:
            tally[4] = v.reason
    return {
        case_id: CaseRecord(trials=n, right_tool=t, right_arguments=a, excluded=x, reason=r)
        for case_id, (n, t, a, x, r) in sorted(tallies.items())
    }


def changed_cases(
    before: Mapping[str, CaseRecord], after: Mapping[str, CaseRecord]
) -> tuple[list[str], list[str]]:
    """(passed before and fail now, failed before and pass now) over cases scored in both."""
    shared = [c for c in before if c in after and before[c].trials and after[c].trials]
    worse = [c for c in shared if before[c].passed and not after[c].passed]
    better = [c for c in shared if not before[c].passed and after[c].passed]
    return worse, better


def figures_of(records: Iterable[CaseRecord]) -> Figures:
    records = list(records)
    n = sum(r.trials for r in records)
    return Figures(
        scored=n,
        right_tool=Share.of(sum(r.right_tool for r in records), n),
        right_arguments=Share.of(sum(r.right_arguments for r in records), n),
        calls_per_task=None,
    )


# --------------------------------------------------------------------------- release file


def record_of(decision: GateDecision, max_excluded: float) -> GateRecord:
    return GateRecord(outcome=decision.outcome, released=decision.outcome in RELEASED,
                      baseline_release=decision.baseline_release,
                      baseline_agent=decision.baseline_agent, new_agent=decision.new_agent,
                      max_drop=decision.max_drop, max_excluded=max_excluded,
                      messages=decision.messages)


def why_not_a_baseline(gate: GateRecord | None, attempts: int, excluded: Mapping[str, int],
                       uncalibrated: bool, max_excluded: float) -> str | None:
    """None when a release can be a baseline, else why not. The newest recorded decision
    counts; a release never gated (scored, or kept by an older callgate) counts as released
    unless its own figures would make any gate inconclusive."""
    if gate is not None:
        if gate.released:
            return None
        notes = f" ({'; '.join(gate.messages)})" if gate.messages else ""
        return f"its {gate.decided_by} decided {gate.outcome}{notes}: not released"
    why = too_many_excluded(attempts, excluded, max_excluded)
    if why is not None:
        return f"{why}: not a result, not released"
    if uncalibrated:
        return "it was scored by an uncalibrated judge: not released"
    return None


class ReleaseScores(BaseModel):
    """The scores kept with a release: what a later release is gated against."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["callgate.release/1"] = FORMAT
    callgate_version: str
    # The agent the release belongs to (its lineage), and the model id and parameters it ran
    # with (None: not known, e.g. recorded answers). A file without `agent` was written before
    # agents: its model was the name it was filed under, and is its agent.
    agent: str
    model: str
    model_params: dict[str, Any] | None = None
    release: str
    suite_name: str
    suite_fingerprint: str
    created_at: str
    judge_fingerprint: str | None = None
    uncalibrated: bool = False
    # count: server errors were scored as wrong answers (--server-errors count), not excluded
    server_errors: ServerErrors = "exclude"
    attempts: int
    excluded: dict[str, int]
    figures: Figures
    by_tag: dict[str, Figures] = Field(default_factory=dict)
    cases: dict[str, CaseRecord]
    # Every case id of the suite, answered or not: tells "removed from the suite" apart from
    # "not scored this time" (a partial responses file, a run stopped early).
    suite_cases: list[str] = Field(default_factory=list)
    # The decision taken on this release (absent: never gated, or kept by an older callgate).
    gate: GateRecord | None = None
    # With an audit of the judged attempts: the figures estimated with it, each naming its
    # estimator (audit.estimates_document). Absent: `figures` count the judge's verdicts as
    # given.
    estimates: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _agent_of_an_older_file(cls, raw: Any) -> Any:
        if isinstance(raw, Mapping) and "agent" not in raw and isinstance(raw.get("model"), str):
            raw = {**raw, "agent": raw["model"]}
        return raw

    def to_json(self) -> str:
        """Stable key order and formatting, so the file diffs well in git."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True,
                          ensure_ascii=False) + "\n"

    @property
    def excluded_share(self) -> float:
        return excluded_share(self.attempts, self.excluded)

    def why_not_a_baseline(self, max_excluded: float = DEFAULT_MAX_EXCLUDED) -> str | None:
        return why_not_a_baseline(self.gate, self.attempts, self.excluded, self.uncalibrated,
                                  max_excluded)


@names_lines
def read_release_file(path: Path | str) -> ReleaseScores:
    source = Path(path)
    return validate(ReleaseScores, read_json(source, missing="scores file not found"), source)


def release_from_run(run: Mapping[str, Any], verdicts: Iterable[Verdict],
                     suite_cases: Iterable[str] = ()) -> ReleaseScores:
    """Build the release scores from a stored run row and its verdicts."""
    scores = json.loads(run["scores"])
    params = run.get("model_params")
    return ReleaseScores(
        callgate_version=run["callgate_version"] or __version__,
        agent=run.get("agent") or run["model"],
        model=run["model"],
        model_params=json.loads(params) if params else None,
        release=run["release"],
        suite_name=run["suite_name"],
        suite_fingerprint=run["suite"],
        created_at=run["created_at"],
        judge_fingerprint=run.get("judge_fingerprint"),
        uncalibrated=bool(scores.get("uncalibrated", False)),
        server_errors=scores.get("server_errors", "exclude"),
        attempts=scores["attempts"],
        excluded=scores["excluded"],
        figures=Figures.model_validate(scores["figures"]),
        by_tag={k: Figures.model_validate(v) for k, v in scores["by_tag"].items()},
        cases=case_records(verdicts),
        suite_cases=sorted(suite_cases),
        gate=gate_of(run),
    )


def gate_of(run: Mapping[str, Any]) -> GateRecord | None:
    raw = run.get("gate")
    return GateRecord.model_validate_json(raw) if raw else None


# --------------------------------------------------------------------------- the decision


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


class CaseChange(BaseModel):
    model_config = ConfigDict(frozen=True)
    case_id: str
    reason: str


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
    worse: list[CaseChange]
    better: list[CaseChange]
    excluded_share: float
    messages: list[str]
    warnings: list[str]


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
    starts a line on purpose."""
    common: dict[str, Any] = {"agent": current.agent, "model": current.model,
              "release": current.release, "suite_name": current.suite_name,
              "max_drop": max_drop, "excluded_share": current.excluded_share,
              "new_agent": new_agent}
    who = agent_label(current.agent, current.model)
    inconclusive: list[str] = []
    passed_over = list(baseline_notes)
    warnings: list[str] = list(passed_over)
    if current.excluded_share > max_excluded:
        inconclusive.append(
            f"{current.excluded_share:.1%} of attempts were excluded (truncated, provider, "
            f"environment or judge errors), above the {max_excluded:.0%} allowed")
    if current.uncalibrated:
        inconclusive.append("the judge that scored this release is not calibrated")
    pending = current.excluded.get("pending_judge", 0)
    if pending:  # never silently: the shares leave out the cases only a judge can decide
        warnings.append(f"{pending} of {current.attempts} attempts expect a judge and were not "
                        "judged (scored without --judge): the shares leave them out")

    first = [not_whole] if not_whole else []
    if baseline is None:
        if other_agent is not None and not new_agent:
            inconclusive.append(
                f"agent {current.agent} has no released release on {current.suite_name}, but "
                f"agent {other_agent.agent} has: its last is {other_agent.release} (model "
                f"{other_agent.model}); a model or agent change is gated, not waved through. "
                f"Compare with it: --baseline-agent {other_agent.agent}; or start a new line "
                "on purpose: --new-agent")
        outcome: Outcome = "inconclusive" if inconclusive or not_whole else "first_release"
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
                            warnings=warnings, **common)

    if baseline.server_errors != current.server_errors:
        def way(release: ReleaseScores) -> str:
            return ("counted as wrong answers" if release.server_errors == "count"
                    else "excluded")
        inconclusive.append(
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
        warnings.append(f"model parameters changed since {baseline.release}: "
                        + ", ".join(changed))
    now_suite = set(current.suite_cases or current.cases)
    then_suite = set(baseline.suite_cases or baseline.cases)
    added = sorted(now_suite - then_suite)
    removed = sorted(then_suite - now_suite)
    shared = sorted(c for c in set(current.cases) & set(baseline.cases)
                    if current.cases[c].trials and baseline.cases[c].trials)
    # Cases still in the suite that the baseline scored and this release did not: a partial
    # responses file or a run stopped early must not pass on the cases it happened to answer.
    scored_before = [c for c in then_suite & now_suite
                     if c in baseline.cases and baseline.cases[c].trials]
    unscored = sorted(c for c in scored_before
                      if c not in current.cases or not current.cases[c].trials)
    if scored_before and len(unscored) / len(scored_before) > max_excluded:
        inconclusive.append(
            f"{len(unscored)} of {len(scored_before)} cases the baseline scored have no scored "
            f"attempt now (first: {', '.join(unscored[:5])}), above the {max_excluded:.0%} "
            "allowed")
    elif unscored:
        warnings.append(f"{len(unscored)} case(s) scored in the baseline have no scored "
                        f"attempt now: {', '.join(unscored[:10])}")
    suite_changed = current.suite_fingerprint != baseline.suite_fingerprint
    if suite_changed:
        warnings.append(
            f"the suite changed since {baseline.release}: comparing on the {len(shared)} cases "
            f"both scored ({len(added)} added, {len(removed)} removed)")
    if current.judge_fingerprint != baseline.judge_fingerprint:
        warnings.append(
            f"the judge differs: baseline {baseline.judge_fingerprint or 'none'}, "
            f"now {current.judge_fingerprint or 'none'}")
    if not shared:
        inconclusive.append("no case was scored in both releases")

    now_fig = figures_of(current.cases[c] for c in shared)
    then_fig = figures_of(baseline.cases[c] for c in shared)
    checks = []
    for name in ("right_tool", "right_arguments"):
        then_share, now_share = getattr(then_fig, name), getattr(now_fig, name)
        change = (None if then_share.pct is None or now_share.pct is None
                  else now_share.pct - then_share.pct)
        passed = (lambda r: r.passed_tool) if name == "right_tool" else (lambda r: r.passed)
        worse = sum(passed(baseline.cases[c]) and not passed(current.cases[c]) for c in shared)
        better = sum(not passed(baseline.cases[c]) and passed(current.cases[c]) for c in shared)
        # With no flips observed, assume one: the detectable drop is then an optimistic bound.
        discordant = max(worse + better, 1) / len(shared) if shared else 0.0
        paired = detectable_drop_paired(len(shared), discordant)
        unpaired = (detectable_drop_unpaired(then_share.n, then_share.pct / 100)
                    if then_share.pct is not None else None)
        checks.append(FigureCheck(
            name=name, baseline=then_share, current=now_share, change=change,
            failed=change is not None and -change > max_drop + EPSILON,
            mcnemar_p=mcnemar_exact(worse, better) if shared else None,
            flipped_worse=worse, flipped_better=better,
            detectable_drop_paired=None if paired is None else 100 * paired,
            detectable_drop_unpaired=None if unpaired is None else 100 * unpaired,
        ))
        if shared and paired is None:
            warnings.append(
                f"{name.replace('_', ' ')}: {len(shared)} paired cases cannot detect any "
                f"drop with 80% power at a flip rate of {discordant:.0%} (at least one flip "
                f"assumed), so a drop of more than the {max_drop:g} points allowed can pass "
                "unseen; add cases or repeats")
        elif shared and paired is not None and 100 * paired > max_drop:
            warnings.append(
                f"{name.replace('_', ' ')}: with {len(shared)} paired cases the smallest drop "
                f"detectable with 80% power is {100 * paired:.1f} points, more than the "
                f"{max_drop:g} allowed: smaller real drops can pass unseen; add cases or repeats")

    checks = judge_as_given(checks, audited_figures)
    worse_ids, better_ids = changed_cases({c: baseline.cases[c] for c in shared},
                                          {c: current.cases[c] for c in shared})
    failed = [c for c in checks if c.failed]
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
               if check.name in set(audited_figures) else ""))
    judged_regression = False
    for judged_outcome, text in judged_checks:
        if judged_outcome == "undecided":
            inconclusive.append(text)
        else:
            judged_regression |= judged_outcome == "regression"
            messages.append(text)
    if not_whole:
        outcome = "inconclusive"
    elif failed or judged_regression:
        outcome = "regression"
    elif inconclusive:
        outcome = "inconclusive"
    else:
        outcome = "pass"
    return GateDecision(
        outcome=outcome, exit_code=EXIT_CODES[outcome], baseline_release=baseline.release,
        baseline_source=baseline_source, baseline_agent=baseline.agent,
        baseline_model=baseline.model, shared_cases=len(shared), added_cases=added,
        removed_cases=removed, suite_changed=suite_changed, checks=checks,
        worse=[CaseChange(case_id=c, reason=current.cases[c].reason) for c in worse_ids],
        better=[CaseChange(case_id=c, reason=baseline.cases[c].reason) for c in better_ids],
        messages=first + lineage + messages + inconclusive, warnings=warnings, **common,
    )


def judge_as_given(checks: list[FigureCheck], audited_figures: Iterable[str]
                   ) -> list[FigureCheck]:
    """When both releases are audited, a figure is decided on its audited estimates, not on
    the judge's verdicts as given (a judge lenient on one release and strict on the other moves
    those): its figure check is kept for the record, never failed."""
    audited = set(audited_figures)
    return [c.model_copy(update={"failed": False}) if c.name in audited else c for c in checks]


# --------------------------------------------------------------------------- finding releases


_CASE_RECORDS = TypeAdapter(dict[str, CaseRecord])


def stored_release(store: Store, run: Mapping[str, Any]) -> ReleaseScores:
    """A stored run's release scores, its cases tallied in SQL (as case_records would)."""
    # validated in one call (pydantic-core's loop, not one Python call a case)
    cases = _CASE_RECORDS.validate_python({
        case_id: {"trials": n, "right_tool": t, "right_arguments": a, "excluded": x,
                  "reason": r} for case_id, n, t, a, x, r in store.case_tallies(run["id"])})
    return release_from_run(run, (), store.suite_case_ids(run["suite"])).model_copy(
        update={"cases": cases})


def find_current(store: Store, agent: str, release: str, suite_name: str | None
                 ) -> Mapping[str, Any]:
    """The finished run of `agent`'s release. A name that is no agent's but the model id of
    exactly one agent's run of the release finds that run (`--model` given the model id of a
    release filed under its candidate's name)."""
    runs = [r for r in store.runs(agent, suite_name) if r["release"] == release]
    if not runs:
        runs = [r for r in store.runs(suite_name=suite_name)
                if r["release"] == release and r["model"] == agent]
        if len({r["agent"] for r in runs}) > 1:
            names = ", ".join(sorted({r["agent"] for r in runs}))
            raise CallgateError(f"release {release!r} of model {agent!r} belongs to several "
                                f"agents ({names}); choose one with --agent")
    if not runs:
        where = f" on suite {suite_name}" if suite_name else ""
        raise CallgateError(
            f"no finished run of agent {agent!r} release {release!r}{where} in {store.path}; "
            "score it first (callgate score or callgate run)")
    if len(runs) > 1:
        names = ", ".join(sorted(r["suite_name"] for r in runs))
        raise CallgateError(f"release {release!r} of {agent!r} was run on several suites "
                            f"({names}); choose one with --suite")
    return runs[0]


def _earlier_stored(store: Store, current: Mapping[str, Any], agent: str | None,
                    max_excluded: float) -> Iterator[tuple[Mapping[str, Any], str | None]]:
    """The runs on `current`'s suite made before it, newest first, of `agent` (None: of every
    other agent), each with why it is not a baseline (None: it can be one)."""
    earlier = [r for r in store.runs(agent, current["suite_name"])
               if (agent is not None or r["agent"] != current["agent"])
               and (r["agent"], r["release"]) != (current["agent"], current["release"])
               and (r["created_at"], r["id"]) < (current["created_at"], current["id"])]
    for run in reversed(earlier):
        scores = json.loads(run["scores"])
        why = why_not_a_baseline(gate_of(run), scores["attempts"], scores["excluded"],
                                 bool(scores.get("uncalibrated", False)), max_excluded)
        yield run, why or incomplete(run)  # a release missing shards was never whole


def baseline_from_store(store: Store, current: Mapping[str, Any],
                        max_excluded: float = DEFAULT_MAX_EXCLUDED, agent: str | None = None
                        ) -> tuple[ReleaseScores | None, list[str]]:
    """The most recent other *released* run of the same agent (or of `agent`, named with
    --baseline-agent) and suite before `current`, and a note for every newer one passed over
    because it was not released."""
    skipped: list[str] = []
    for run, why in _earlier_stored(store, current, agent or current["agent"], max_excluded):
        if why is None:
            return stored_release(store, run), skipped
        skipped.append(f"release {run['release']} is not a baseline: {why}")
    return None, skipped


def other_agent_in_store(store: Store, current: Mapping[str, Any],
                         max_excluded: float = DEFAULT_MAX_EXCLUDED) -> OtherAgent | None:
    """The newest released run of another agent on `current`'s suite before it, if any."""
    for run, why in _earlier_stored(store, current, None, max_excluded):
        if why is None:
            return OtherAgent(agent=run["agent"], release=run["release"], model=run["model"])
    return None


def baseline_from_path(path: Path, current: ReleaseScores,
                       max_excluded: float = DEFAULT_MAX_EXCLUDED, agent: str | None = None
                       ) -> tuple[ReleaseScores | None, list[str], OtherAgent | None]:
    """A scores file, or the newest released one in a folder of the same agent (or of
    `agent`, named with --baseline-agent) and suite; a note for every newer file passed over
    because its release was not released; and, when the folder holds no baseline and no agent
    was named, another agent's newest released release in it (decide's `other_agent`).

    A path that does not exist is an error, never "no baseline": a mistyped folder would
    otherwise pass every release as a first release. Start with an empty folder. A file named
    on its own is the baseline whatever agent it belongs to (it is named in the decision), but
    it must be of the same suite, of `agent` when one is named, and released."""
    if not path.exists():
        raise InputError(path, "no such scores file or folder (for the first release, create "
                               "the folder, e.g. releases/ with a .gitkeep, and commit it)")
    if not path.is_dir():
        baseline = read_release_file(path)
        if baseline.suite_name != current.suite_name or agent not in (None, baseline.agent):
            wanted = f"agent {agent}" if agent else current.agent
            raise InputError(
                path, f"holds agent {baseline.agent} ({baseline.model}) on "
                      f"{baseline.suite_name}, not {wanted} on {current.suite_name}")
        why = baseline.why_not_a_baseline(max_excluded)
        if why is not None:
            raise InputError(path, f"release {baseline.release} cannot be a baseline: {why}")
        return baseline, [], None
    earlier = []
    for file in sorted(path.glob("*.json")):
        release = read_release_file(file)
        if release.suite_name == current.suite_name and (
            (release.agent, release.release) != (current.agent, current.release)
            and release.created_at < current.created_at
        ):
            earlier.append((file, release))
    earlier.sort(key=lambda c: c[1].created_at, reverse=True)
    wanted = agent or current.agent
    skipped: list[str] = []
    for file, release in (c for c in earlier if c[1].agent == wanted):
        why = release.why_not_a_baseline(max_excluded)
        if why is None:
            return release, skipped, None
        skipped.append(f"release {release.release} ({file.name}) is not a baseline: {why}")
    if agent is None:
        for _, release in (c for c in earlier if c[1].agent != current.agent):
            if release.why_not_a_baseline(max_excluded) is None:
                return None, skipped, OtherAgent(agent=release.agent, release=release.release,
                                                 model=release.model)
    return None, skipped, None
