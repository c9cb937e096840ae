"""The decision `serve` shows on a release `callgate gate` never decided, when the team's
callgate.toml sets a [gate] rule, quarantine, slice rule or recovery threshold (`serve
--config`): the decision `callgate gate --model M --release R` would take with that file,
kept in the store under a key of its inputs as well as of what it depends on."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from callgate.gating.decision import GateDecision, kept_decision
from callgate.gating.gated import GateInputs
from callgate.gating.release import decide_release, decision_key
from callgate.gating.scores_file import ReleaseScores, release_from_run
from callgate.store.db import Store
from callgate.store.rows import StoredRun


def configured_decision(store: Store, run: StoredRun, inputs: GateInputs,
                        suite_runs: Sequence[StoredRun] | None = None
                        ) -> tuple[ReleaseScores, GateDecision]:
    """decide_release with the configured inputs, against the store's baseline: read from the
    store when decided on the same store and inputs before, else decided and kept (in place
    of the run's default-rule decision, whose key differs)."""
    depends = decision_key(store, run, inputs.max_drop, inputs.max_excluded, suite_runs,
                           inputs.slice_rule)
    key = hashlib.sha256(f"configured\0{depends}\0{inputs.model_dump_json()}".encode()
                         ).hexdigest()
    kept = store.gate_decision(run.id, key)
    if kept is not None:
        decision = kept_decision(kept)
    else:
        decision, _ = decide_release(
            store, run, baseline=inputs.baseline, max_drop=inputs.max_drop,
            max_excluded=inputs.max_excluded, rule=inputs.rule, quarantine=inputs.quarantine,
            slice_rule=inputs.slice_rule, recovery_max_drop=inputs.recovery_max_drop)
        store.save_gate_decision(run.id, key, decision.model_dump_json())
    return release_from_run(run, ()), decision
