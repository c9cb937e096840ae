"""Gate one stored release: find it, find its baseline (the store's last release of its agent
that passed, or a scores file), decide, and record the decision on the run. `callgate gate`
and the public `gate_release` both go through here."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from callgate.errors import CallgateError
from callgate.gating.cases import Paired
from callgate.gating.decision import (
    DEFAULT_MAX_DROP,
    GateDecision,
    OtherAgent,
    decide,
    kept_decision,
)
from callgate.gating.finding import (
    baseline_from_path,
    baseline_in_store,
    find_current,
    other_agent_in_store,
    paired_releases,
    with_cases,
    with_expectations,
)
from callgate.gating.flaky import FlakyCase, flaky_cases, flaky_of_stored
from callgate.gating.gated import GateInputs, keep_gated
from callgate.gating.noise import Noise, gated_figures
from callgate.gating.quarantine import Quarantined, for_suite
from callgate.gating.recovery_gate import with_recovery
from callgate.gating.scores_file import RELEASED, ReleaseScores, release_from_run
from callgate.gating.sequential import Rule
from callgate.gating.slices import SliceRule
from callgate.gating.surface_gate import release_diff
from callgate.gating.what_to_fix import read_what_to_fix
from callgate.judging.kept_estimates import kept_estimates
from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED
from callgate.scoring.result import GateRecord
from callgate.scoring.stored import finished, stored_scores
from callgate.store.db import Store
from callgate.store.rows import StoredRun
from callgate.suites.shard import incomplete
from callgate.version import __version__


def gate_release(
    store: Store,
    agent: str,
    release: str,
    *,
    suite: str | None = None,
    baseline: str = "auto",
    max_drop: float = DEFAULT_MAX_DROP,
    max_excluded: float = DEFAULT_MAX_EXCLUDED,
    baseline_agent: str | None = None,
    new_agent: bool = False,
    rule: Rule = "points",
    quarantine: Sequence[Quarantined] = (),
    slice_rule: SliceRule | None = None,
    recovery_max_drop: float | None = None,
) -> tuple[GateDecision, ReleaseScores]:
    """Decide whether `release` of `agent` may ship, and record the decision in the store.

    Args:
        store: the store the release was scored into (`score_file` or `callgate run`).
        agent: the agent the release was filed under (without a name given, its model id).
        release: the release label.
        suite: the suite's name, when the release was scored on several suites.
        baseline: "auto" (the store's last release of the agent and suite that passed its
            gate), or the path of a scores file or of a folder of them.
        max_drop: the drop, in percentage points, tolerated before a regression is declared.
        max_excluded: inconclusive above this share of excluded attempts.
        baseline_agent: compare with this other agent's last released release instead.
        new_agent: the release starts a new agent's line on purpose: with no baseline of its
            own it is a first release even where another agent has released (recorded so).
        rule: "points" (the playbook's: fail on a drop of more than max_drop) or
            "statistical" (fail only when the paired test is sure; docs/noise.md).
        quarantine: cases left out of the gate (gating.quarantine), listed on the decision.
        slice_rule: the opt-in slice rule (gating/slices.py): which slices are gated, at what
            family-wise error rate; a slice it fails fails the gate.
        recovery_max_drop: gate recovery per fault kind (gating/recovery_gate.py): a drop of
            more points fails the gate; None shows it only.

    Returns the decision (`decision.exit_code`: 0 pass, 1 regression, 3 inconclusive) and the
    release's scores with the decision recorded (`scores.to_json()` is its scores file). A
    release some of whose shards are missing is inconclusive, its first message naming them,
    and recorded so (never a baseline).
    Raises CallgateError when the release or the baseline cannot be found or read."""
    run = find_current(store, agent, release, suite)
    decision, current = record_gate(store, run, baseline=baseline, max_drop=max_drop,
                                    max_excluded=max_excluded, baseline_agent=baseline_agent,
                                    new_agent=new_agent, rule=rule, quarantine=quarantine,
                                    slice_rule=slice_rule, recovery_max_drop=recovery_max_drop)
    return decision, with_cases(store, run, current)


def record_gate(
    store: Store,
    run: StoredRun,
    *,
    baseline: str = "auto",
    max_drop: float = DEFAULT_MAX_DROP,
    max_excluded: float = DEFAULT_MAX_EXCLUDED,
    baseline_agent: str | None = None,
    new_agent: bool = False,
    rule: Rule = "points",
    quarantine: Sequence[Quarantined] = (),
    slice_rule: SliceRule | None = None,
    recovery_max_drop: float | None = None,
) -> tuple[GateDecision, ReleaseScores]:
    """gate_release on the run found (find_current): the decision, recorded, and the
    release's scores with it but without its cases (with_cases adds them). `rule`: the
    playbook's point rule or the statistical one (docs/noise.md); `quarantine`: cases left
    out of the gate, each listed on the decision."""
    decision, current = decide_release(store, run, baseline=baseline, max_drop=max_drop,
                                       max_excluded=max_excluded, baseline_agent=baseline_agent,
                                       new_agent=new_agent, rule=rule, quarantine=quarantine,
                                       slice_rule=slice_rule,
                                       recovery_max_drop=recovery_max_drop)
    # Recorded so that only a release that passed can be a later one's baseline; kept whole
    # with its inputs in the same transaction, for the pages to show it (gating/gated.py).
    record = record_of(decision, max_excluded)
    key = decision_key(store, run, max_drop, max_excluded, slice_rule=slice_rule)
    body = decision.model_dump_json()
    inputs = GateInputs(baseline=baseline, max_drop=max_drop, max_excluded=max_excluded,
                        rule=rule, quarantine=list(quarantine), slice_rule=slice_rule,
                        recovery_max_drop=recovery_max_drop)
    with store.atomic():
        store.set_run_gate(run.id, record.model_dump_json())
        keep_gated(store, run.id, key, inputs, body)
        if (baseline == "auto" and rule == "points" and not quarantine
                and recovery_max_drop is None):
            store.save_gate_decision(run.id, key, body)
    return decision, current.model_copy(update={"gate": record,
                                                "estimates": audited_estimates(store, run.id)})


def decide_release(
    store: Store,
    run: StoredRun,
    *,
    baseline: str = "auto",
    max_drop: float = DEFAULT_MAX_DROP,
    max_excluded: float = DEFAULT_MAX_EXCLUDED,
    baseline_agent: str | None = None,
    new_agent: bool = False,
    rule: Rule = "points",
    quarantine: Sequence[Quarantined] = (),
    slice_rule: SliceRule | None = None,
    recovery_max_drop: float | None = None,
) -> tuple[GateDecision, ReleaseScores]:
    """The gate's decision on a stored run, by the same rules as `gate_release` (baseline,
    agents, audited estimates, missing shards), without recording it: what `serve` and
    `report` show. Without --baseline-agent or --new-agent, the ones the release's last gate
    was given count, so a decision taken with them is shown and re-taken as it was.

    Args:
        store: the store holding the run.
        run: the stored run (Store.stored_run / find_current).
        baseline: "auto", or the path of a scores file or a folder of them.
        max_drop, max_excluded, baseline_agent, new_agent, slice_rule: as for gate_release.
    Raises CallgateError when --new-agent and --baseline-agent are both given, when the
    agent already has a baseline (a new line cannot start twice), or when the named
    baseline agent has no released release on the suite."""
    current = release_from_run(run, ())
    if new_agent and baseline_agent:
        raise CallgateError("--new-agent starts a new line and --baseline-agent continues "
                            "another agent's: give one of them")
    explicit = new_agent or baseline_agent is not None
    recorded = current.gate
    if not explicit and recorded is not None and recorded.decided_by == "gate":
        new_agent = recorded.new_agent
        if recorded.baseline_agent not in (None, current.agent):
            baseline_agent = recorded.baseline_agent
    source = f"store {store.path}" if baseline == "auto" else baseline

    def find(agent: str | None) -> tuple[StoredRun | None, ReleaseScores | None,
                                         list[str], OtherAgent | None]:
        if baseline != "auto":
            return None, *baseline_from_path(Path(baseline), current, max_excluded, agent)
        found, skipped = baseline_in_store(store, run, max_excluded, agent)
        other = None if found is not None or agent else other_agent_in_store(store, run,
                                                                             max_excluded)
        return found, release_from_run(found, ()) if found else None, skipped, other

    base_run, base, skipped, other = find(baseline_agent)
    if base is None and baseline_agent and not explicit:  # the recorded agent's release is gone
        baseline_agent = None
        base_run, base, skipped, other = find(None)
    if explicit and baseline_agent and base is None:
        raise CallgateError(f"--baseline-agent {baseline_agent}: no released release of agent "
                            f"{baseline_agent!r} on suite {current.suite_name} before "
                            f"{current.release} in {source}")
    if explicit and new_agent and base is not None:
        raise CallgateError(f"--new-agent: agent {current.agent!r} already has a baseline on "
                            f"{current.suite_name} (release {base.release}); a new line "
                            "starts once: leave --new-agent out")
    new_agent = new_agent and base is None
    kept = kept_estimates(base.estimates) if base is not None else None
    if base is not None and (kept is None or not kept.complete):
        # No audit kept with the baseline (or one kept while incomplete): its audit in the store.
        found = stored_estimates(store, base)
        if found is not None:
            base = base.model_copy(update={"estimates": found})
    if base is not None and base.suite_fingerprint != current.suite_fingerprint:
        # the suites differ: which cases changed their expectation (from the stored cases)
        current = with_expectations(store, current, run.suite)
        if base_run is not None:
            base = with_expectations(store, base, base_run.suite)
    readings, audited = judged_checks(store, run.id, base, max_drop)
    left_out = tuple(for_suite(quarantine, run.suite_name).values())
    case_by_case = bool(left_out) or (base is not None and bool(
        release_diff(base, current).expectation_changed))  # cases left out of the pairs
    now, then, pairs = _paired(store, run, current, base_run, base, case_by_case)
    scores = finished(run)  # release_from_run above has read it: the run is finished
    stopped = scores.stopped
    if stopped:  # a live run's --max-cost / --max-attempts: the decision is on what it paired
        skipped = [f"the budget ended this run ({stopped}): the decision is over the cases "
                   "paired so far", *skipped]
    noise = Noise(rule=rule, gated=gated_figures(scores.gate_figures),
                  flaky=tuple(_flaky(store, run, base_run, now, then, pairs)),
                  quarantined=left_out)
    fix = (read_what_to_fix(store, run, base_run, now, then, slice_rule, max_drop, pairs,
                            noise.quarantined)  # the gate's own quarantine, passed on
           if then is not None else None)
    decision = decide(now, then, max_drop=max_drop, max_excluded=max_excluded,
                      baseline_source=source if base else None, baseline_notes=skipped,
                      judged_checks=readings, audited_figures=audited,
                      not_whole=incomplete(run) or _first_but_partial(stopped, base),
                      other_agent=other, new_agent=new_agent, pairs=pairs, noise=noise,
                      what_to_fix=fix)
    decision = with_recovery(decision, current, base, recovery_max_drop)
    return _with_notes(decision, store, run, base_run), current


def _with_notes(decision: GateDecision, store: Store, run: StoredRun,
                base_run: StoredRun | None) -> GateDecision:
    """The decision with what it does not decide on: cost and latency per right answer against
    the baseline, and the suite's cases that cannot gate (the probe's)."""
    from callgate.gating.costs import per_right_line

    line = per_right_line(stored_scores(run),
                          stored_scores(base_run) if base_run is not None else None)
    if line is not None:
        decision = decision.model_copy(update={"messages": [*decision.messages, line]})
    weak = probe_warning(store.suite_probe(run.suite))
    if weak:
        decision = decision.model_copy(update={"warnings": [*decision.warnings, weak]})
    return decision


def _paired(store: Store, run: StoredRun, current: ReleaseScores, base_run: StoredRun | None,
            base: ReleaseScores | None, case_by_case: bool,
            ) -> tuple[ReleaseScores, ReleaseScores | None, Paired | None]:
    """The release and its baseline as the gate pairs them; `case_by_case` (a quarantine, or
    cases whose expectation changed, leave cases out) reads both releases' cases one by one
    instead of pairing their tallies in the store."""
    if base is None:
        return current, None, None
    if not case_by_case:
        return paired_releases(store, run, current, base_run, base)
    now, then, pairs = paired_releases(store, run, current, None, base)
    if base_run is not None:
        now, then, pairs = with_cases(store, run, now), with_cases(store, base_run, base), None
    return now, then, pairs


def _first_but_partial(stopped: str | None, base: ReleaseScores | None) -> str | None:
    """A run the budget ended has no baseline to pair with: it cannot pass as a first release
    (it would be the next one's baseline with only the cases it reached)."""
    if not stopped or base is not None:
        return None
    return (f"the budget ended this run ({stopped}) and it has no baseline: a first release is "
            "whole; run the same command again to finish it")


def _flaky(store: Store, run: StoredRun, base_run: StoredRun | None, now: ReleaseScores,
           then: ReleaseScores | None, pairs: Paired | None) -> list[FlakyCase]:
    """The flaky cases of the release, with the baseline's attempts where it ran with the same
    model and parameters (identical inputs)."""
    same = then is not None and then.model == now.model and then.model_params == now.model_params
    if pairs is not None and base_run is not None:
        return flaky_of_stored(store.mixed_tallies(run.id),
                               store.mixed_tallies(base_run.id) if same else (),
                               pairs.changed, same)
    if not now.cases:
        if store.has_case_tallies(run.id):
            return flaky_of_stored(store.mixed_tallies(run.id), (), (), False)
        now = with_cases(store, run, now)
    tally = {c: (r.trials, r.right_tool, r.right_arguments) for c, r in now.cases.items()}
    if then is None or not same:
        return flaky_cases(tally)
    return flaky_cases(tally, {c: (r.trials, r.right_tool, r.right_arguments)
                               for c, r in then.cases.items()})


def probe_warning(weak: Mapping[str, str] | None, shown: int = 5) -> str | None:
    """The gate's warning about the suite's cases that cannot gate (found by the probe when it
    was first scored), None when there are none or it was not probed."""
    if not weak:
        return None
    first = "; ".join(f"{case_id} ({reason})" for case_id, reason in list(weak.items())[:shown])
    more = f"; and {len(weak) - shown} more" if len(weak) > shown else ""
    return (f"{len(weak)} case(s) of the suite cannot tell a good agent from a bad one "
            f"(callgate suite check --probe lists why): {first}{more}")


def stored_estimates(store: Store, release: ReleaseScores) -> dict[str, Any] | None:
    """The audited estimates of a release kept in the store (its run's audit), when the store
    holds that release: what a baseline read from the store, or from a scores file written
    before its audit, is compared with."""
    row = store.find_stored_run(release.suite_name, release.agent, release.release)
    if row is None or row.suite != release.suite_fingerprint:
        return None
    return audited_estimates(store, row.id)


def audited_estimates(store: Store, run_id: int) -> dict[str, Any] | None:
    """The run's audited estimates (kept in its scores file), or None without an audit."""
    if store.audit(run_id) is None:
        return None
    from callgate.judging.audit import audit_report, estimates_document  # only with an audit

    return estimates_document(audit_report(store, run_id))


def judged_checks(store: Store, run_id: int, base: ReleaseScores | None, max_drop: float
                  ) -> tuple[list[tuple[str, str]], list[str]]:
    """The readings of the judged figures, like for like, and the figures they decide:

    - both releases have a complete audit: each figure's PPI++ estimate now against the
      baseline's PPI++ estimate (their difference's interval, audit.judged_check); these
      readings decide the figure, the judge-as-given check is shown beside them;
    - only one has: said so, and the judged attempts are compared as the judge gave them on
      both sides (the figure checks); the audited estimate is not mixed with the other side's
      judge-as-given figure;
    - neither: a note that the judge's verdicts were counted as they are.
    An audit with skips in its labelled prefix (incomplete) counts as no audit."""
    judged = len(store.judgements(run_id))
    if base is None:
        return [], []
    kept = kept_estimates(base.estimates) if base.estimates else None
    then = kept if kept is not None and kept.complete else None
    report = None
    if store.audit(run_id) is not None:
        from callgate.judging.audit import audit_report  # only with an audit

        report = audit_report(store, run_id)
    out: list[tuple[str, str]] = []
    if report is not None and not report.complete:
        out.append(("note", f"the audit of run {run_id} is incomplete ({report.skipped} "
                            f"skipped, {report.counted} counted): not used; label the skipped "
                            f"items: callgate judge label --audit {run_id}"))
        report = None
    if report is None and then is None:
        if judged:
            out.append(("note", f"{judged} attempts were decided by the judge and are counted "
                                "as it said (raw); audit them for an estimate that does not "
                                f"trust it: callgate judge audit {run_id} --n 40"))
        return out, []
    if report is None or then is None:
        side = (f"only this release is audited (the baseline {base.release} has no complete "
                "audit)" if then is None else
                f"only the baseline {base.release} is audited (this release has no complete "
                "audit)")
        out.append(("note", f"{side}: the judged attempts are compared as the judge gave them "
                            "on both sides; audit the other release to compare audited "
                            "estimates"))
        from callgate.gating.audit_rule import one_sided  # only with an audit

        return out + one_sided(store, run_id, report, base, then, max_drop), []
    from callgate.judging.audit import judged_check

    figures = []
    for figure in ("right_tool", "right_arguments"):
        estimate = then.figure(figure)
        if estimate is None or estimate.pct is None:
            continue
        check = judged_check(report, figure, estimate.pct, max_drop,
                             baseline_se=estimate.se_points())
        if check is not None:
            out.append((check.outcome, check.message))
            figures.append(figure)
    return out, figures


def recorded_decision(store: Store, run: StoredRun, *,
                      max_drop: float = DEFAULT_MAX_DROP,
                      max_excluded: float = DEFAULT_MAX_EXCLUDED, key: str | None = None
                      ) -> tuple[GateDecision, ReleaseScores]:
    """decide_release against the store's baseline, read from the store when it was decided
    on the same inputs before (by `callgate gate` or an earlier page), else decided and kept.
    The scores returned carry the run's figures but not its cases. `key`: decision_key's,
    when the caller has it."""
    key = key or decision_key(store, run, max_drop, max_excluded)
    kept = store.gate_decision(run.id, key)
    if kept is not None:
        decision = kept_decision(kept)
    else:
        decision, _ = decide_release(store, run, max_drop=max_drop, max_excluded=max_excluded)
        store.save_gate_decision(run.id, key, decision.model_dump_json())
    return decision, release_from_run(run, ())


def decision_key(store: Store, run: StoredRun, max_drop: float,
                 max_excluded: float,
                 suite_runs: Sequence[StoredRun] | None = None,
                 slice_rule: SliceRule | None = None) -> str:
    """A digest of what the store-baseline decision on a finished run depends on: the run (its
    verdicts never change under its id; its shards and scores may, by a merge), the earlier
    runs on its suite, of every agent (its baseline, or another agent's release that makes a
    first release inconclusive, with their gate records), its judgements and audit, the
    thresholds, and callgate's version (the rules). `suite_runs`: store.runs of the run's
    suite, when the caller has read them already (a page deciding every release of it)."""
    if suite_runs is None:
        suite_runs = store.stored_runs(suite_name=run.suite_name)
    # the stored columns, as text (the same key for a run however it was read)
    earlier = [dict(r.row) for r in suite_runs
               if (r.created_at, r.id) < (run.created_at, run.id)]
    parts = {
        "version": __version__, "max_drop": max_drop, "max_excluded": max_excluded,
        "run": {k: v for k, v in run.row.items() if k != "gate"},  # its own record is an output
        "earlier": earlier,
        "judgements": store.judgement_count(run.id),
        "audit": store.audit(run.id),
        "audit_items": store.audit_items(run.id),
    }
    if slice_rule is not None and slice_rule.active:  # the default decision's key unchanged
        parts["slice_rule"] = slice_rule.model_dump()
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def record_of(decision: GateDecision, max_excluded: float) -> GateRecord:
    return GateRecord(outcome=decision.outcome, released=decision.outcome in RELEASED,
                      baseline_release=decision.baseline_release,
                      baseline_agent=decision.baseline_agent, new_agent=decision.new_agent,
                      max_drop=decision.max_drop, max_excluded=max_excluded,
                      messages=decision.messages)
