"""Gate one stored release: find it, find its baseline (the store's last release of its agent
that passed, or a scores file), decide, and record the decision on the run. `callgate gate`
and the public `gate_release` both go through here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from callgate.errors import CallgateError
from callgate.gating.gate import (
    DEFAULT_MAX_DROP,
    GateDecision,
    OtherAgent,
    ReleaseScores,
    baseline_from_path,
    baseline_from_store,
    decide,
    find_current,
    other_agent_in_store,
    record_of,
    stored_release,
)
from callgate.gating.thresholds import DEFAULT_MAX_EXCLUDED
from callgate.judging.audit import audit_report, estimates_document, judged_check
from callgate.store.db import Store
from callgate.suites.shard import incomplete


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

    Returns the decision (`decision.exit_code`: 0 pass, 1 regression, 3 inconclusive) and the
    release's scores with the decision recorded (`scores.to_json()` is its scores file). A
    release some of whose shards are missing is inconclusive, its first message naming them,
    and recorded so (never a baseline).
    Raises CallgateError when the release or the baseline cannot be found or read."""
    run = find_current(store, agent, release, suite)
    decision, current = decide_release(store, run, baseline=baseline, max_drop=max_drop,
                                       max_excluded=max_excluded, baseline_agent=baseline_agent,
                                       new_agent=new_agent)
    # Recorded so that only a release that passed can be a later one's baseline.
    record = record_of(decision, max_excluded)
    store.set_run_gate(run["id"], record.model_dump_json())
    return decision, current.model_copy(update={"gate": record,
                                                "estimates": audited_estimates(store, run["id"])})


def decide_release(
    store: Store,
    run: Mapping[str, Any],
    *,
    baseline: str = "auto",
    max_drop: float = DEFAULT_MAX_DROP,
    max_excluded: float = DEFAULT_MAX_EXCLUDED,
    baseline_agent: str | None = None,
    new_agent: bool = False,
) -> tuple[GateDecision, ReleaseScores]:
    """The gate's decision on a stored run, by the same rules as `gate_release` (baseline,
    agents, audited estimates, missing shards), without recording it: what `serve` and
    `report` show. Without --baseline-agent or --new-agent, the ones the release's last gate
    was given count, so a decision taken with them is shown and re-taken as it was.

    Args:
        store: the store holding the run.
        run: the run's row (Store.run / find_current).
        baseline: "auto", or the path of a scores file or a folder of them.
        max_drop, max_excluded, baseline_agent, new_agent: as for gate_release.
    Raises CallgateError when --new-agent and --baseline-agent are both given, when the
    agent already has a baseline (a new line cannot start twice), or when the named
    baseline agent has no released release on the suite."""
    current = stored_release(store, run)
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

    def find(agent: str | None) -> tuple[ReleaseScores | None, list[str], OtherAgent | None]:
        if baseline != "auto":
            return baseline_from_path(Path(baseline), current, max_excluded, agent)
        base, skipped = baseline_from_store(store, run, max_excluded, agent)
        other = None if base is not None or agent else other_agent_in_store(store, run,
                                                                            max_excluded)
        return base, skipped, other

    base, skipped, other = find(baseline_agent)
    if base is None and baseline_agent and not explicit:  # the recorded agent's release is gone
        baseline_agent = None
        base, skipped, other = find(None)
    if explicit and baseline_agent and base is None:
        raise CallgateError(f"--baseline-agent {baseline_agent}: no released release of agent "
                            f"{baseline_agent!r} on suite {current.suite_name} before "
                            f"{current.release} in {source}")
    if explicit and new_agent and base is not None:
        raise CallgateError(f"--new-agent: agent {current.agent!r} already has a baseline on "
                            f"{current.suite_name} (release {base.release}); a new line "
                            "starts once: leave --new-agent out")
    new_agent = new_agent and base is None
    decision = decide(current, base, max_drop=max_drop, max_excluded=max_excluded,
                      baseline_source=source if base else None, baseline_notes=skipped,
                      judged_checks=judged_checks(store, run["id"], base, max_drop),
                      not_whole=incomplete(run), other_agent=other, new_agent=new_agent)
    return decision, current


def audited_estimates(store: Store, run_id: int) -> dict[str, Any] | None:
    """The run's audited estimates (kept in its scores file), or None without an audit."""
    if store.audit(run_id) is None:
        return None
    return estimates_document(audit_report(store, run_id))


def judged_checks(store: Store, run_id: int, base: ReleaseScores | None, max_drop: float
                  ) -> list[tuple[str, str]]:
    """With judged attempts: the figures estimated with the run's audit (PPI++), or a note
    that the judge's verdicts were counted as they are when the run has no audit."""
    judged = len(store.judgements(run_id))
    if not judged or base is None:
        return []
    if store.audit(run_id) is None:
        return [("note", f"{judged} attempts were decided by the judge and are counted as it "
                         "said (raw); audit them for an estimate that does not trust it: "
                         f"callgate judge audit {run_id} --n 40")]
    report = audit_report(store, run_id)
    out: list[tuple[str, str]] = []
    for figure in ("right_tool", "right_arguments"):
        # The baseline's audited estimate when its scores file kept one, else its figure.
        audited = (base.estimates or {}).get(figure) or {}
        pct = audited.get("pct", getattr(base.figures, figure).pct)
        check = judged_check(report, figure, pct, max_drop) if pct is not None else None
        if check is not None:
            out.append((check.outcome, check.message))
    return out
