"""Gate one stored release: find it, find its baseline (the store's last release that passed,
or a scores file), decide, and record the decision on the run. `callgate gate` and the public
`gate_release` both go through here."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from callgate.gating.gate import (
    DEFAULT_MAX_DROP,
    GateDecision,
    ReleaseScores,
    baseline_from_path,
    baseline_from_store,
    decide,
    find_current,
    record_of,
    release_from_run,
    stored_release,
)
from callgate.gating.thresholds import DEFAULT_MAX_EXCLUDED
from callgate.store.db import Store
from callgate.suites.shard import incomplete
from callgate.version import __version__


def gate_release(
    store: Store,
    model: str,
    release: str,
    *,
    suite: str | None = None,
    baseline: str = "auto",
    max_drop: float = DEFAULT_MAX_DROP,
    max_excluded: float = DEFAULT_MAX_EXCLUDED,
) -> tuple[GateDecision, ReleaseScores]:
    """Decide whether `release` of `model` may ship, and record the decision in the store.

    Args:
        store: the store the release was scored into (`score_file` or `callgate run`).
        model: the model name the release was scored under.
        release: the release label.
        suite: the suite's name, when the release was scored on several suites.
        baseline: "auto" (the store's last release of the model and suite that passed its
            gate), or the path of a scores file or of a folder of them.
        max_drop: the drop, in percentage points, tolerated before a regression is declared.
        max_excluded: inconclusive above this share of excluded attempts.

    Returns the decision (`decision.exit_code`: 0 pass, 1 regression, 3 inconclusive) and the
    release's scores with the decision recorded (`scores.to_json()` is its scores file). A
    release some of whose shards are missing is inconclusive, its first message naming them,
    and recorded so (never a baseline).
    Raises CallgateError when the release or the baseline cannot be found or read."""
    run = find_current(store, model, release, suite)
    decision, current = decide_release(store, run, baseline=baseline, max_drop=max_drop,
                                       max_excluded=max_excluded)
    # Recorded so that only a release that passed can be a later one's baseline.
    record = record_of(decision, max_excluded)
    store.set_run_gate(run["id"], record.model_dump_json())
    if baseline == "auto":  # kept for the pages, which show the store's decision
        store.save_gate_decision(run["id"], decision_key(store, run, max_drop, max_excluded),
                                 decision.model_dump_json())
    return decision, current.model_copy(update={"gate": record,
                                                "estimates": audited_estimates(store, run["id"])})


def decide_release(
    store: Store,
    run: Mapping[str, Any],
    *,
    baseline: str = "auto",
    max_drop: float = DEFAULT_MAX_DROP,
    max_excluded: float = DEFAULT_MAX_EXCLUDED,
) -> tuple[GateDecision, ReleaseScores]:
    """The gate's decision on a stored run, by the same rules as `gate_release` (baseline,
    audited estimates, missing shards), without recording it: what `serve` and `report` show.

    Args:
        store: the store holding the run.
        run: the run's row (Store.run / find_current).
        baseline: "auto", or the path of a scores file or a folder of them.
        max_drop, max_excluded: as for gate_release."""
    current = stored_release(store, run)
    if baseline == "auto":
        base, skipped = baseline_from_store(store, run, max_excluded)
        source = f"store {store.path}"
    else:
        base, skipped = baseline_from_path(Path(baseline), current, max_excluded)
        source = baseline
    decision = decide(current, base, max_drop=max_drop, max_excluded=max_excluded,
                      baseline_source=source if base else None, baseline_notes=skipped,
                      judged_checks=judged_checks(store, run["id"], base, max_drop),
                      not_whole=incomplete(run))
    return decision, current


def audited_estimates(store: Store, run_id: int) -> dict[str, Any] | None:
    """The run's audited estimates (kept in its scores file), or None without an audit."""
    if store.audit(run_id) is None:
        return None
    from callgate.judging.audit import audit_report, estimates_document  # only with an audit

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
    from callgate.judging.audit import audit_report, judged_check  # only with an audit

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


def recorded_decision(store: Store, run: Mapping[str, Any], *,
                      max_drop: float = DEFAULT_MAX_DROP,
                      max_excluded: float = DEFAULT_MAX_EXCLUDED, key: str | None = None
                      ) -> tuple[GateDecision, ReleaseScores]:
    """decide_release against the store's baseline, read from the store when it was decided
    on the same inputs before (by `callgate gate` or an earlier page), else decided and kept.
    The scores returned carry the run's figures but not its cases. `key`: decision_key's,
    when the caller has it."""
    key = key or decision_key(store, run, max_drop, max_excluded)
    kept = store.gate_decision(run["id"], key)
    if kept is not None:
        decision = GateDecision.model_validate_json(kept)
    else:
        decision, _ = decide_release(store, run, max_drop=max_drop, max_excluded=max_excluded)
        store.save_gate_decision(run["id"], key, decision.model_dump_json())
    return decision, release_from_run(run, ())


def decision_key(store: Store, run: Mapping[str, Any], max_drop: float,
                 max_excluded: float) -> str:
    """A digest of what the store-baseline decision on a finished run depends on: the run (its
    verdicts never change under its id; its shards and scores may, by a merge), the earlier
    runs of its model and suite that may be its baseline (with their gate records), its
    judgements and audit, the thresholds, and callgate's version (the rules)."""
    earlier = [r for r in store.runs(model=run["model"], suite_name=run["suite_name"])
               if (r["created_at"], r["id"]) < (run["created_at"], run["id"])]
    parts = {
        "version": __version__, "max_drop": max_drop, "max_excluded": max_excluded,
        "run": {k: v for k, v in run.items() if k != "gate"},  # its own record is an output
        "earlier": earlier,
        "judgements": store.judgement_count(run["id"]),
        "audit": store.audit(run["id"]),
        "audit_items": store.audit_items(run["id"]),
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
