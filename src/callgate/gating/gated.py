"""The decision `callgate gate` took on a release, kept with the inputs it took it with (the
baseline, the thresholds, the rule, the quarantine, the slice rule, the recovery gate), so that
`serve` and `report --html` show that decision, the one the release's gate record and its
exit code came from, and never the default rule's taken again without the quarantine."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from callgate.gating.decision import GateDecision, kept_decision
from callgate.gating.quarantine import Quarantined
from callgate.gating.sequential import Rule
from callgate.gating.slices import SliceRule
from callgate.store.db import Store


class GateInputs(BaseModel):
    """What a gate decision was taken with, besides the store: gating.release.decide_release's
    keyword arguments, as `callgate gate` gave them."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    baseline: str = "auto"
    max_drop: float
    max_excluded: float
    rule: Rule = "points"
    quarantine: list[Quarantined] = Field(default_factory=list)
    slice_rule: SliceRule | None = None
    recovery_max_drop: float | None = None


class Gated(NamedTuple):
    """A kept gate decision: the key of the store it was taken on (gating.release.
    decision_key, with its slice rule), its inputs and the decision's JSON."""

    key: str
    inputs: GateInputs
    body: str
    inputs_json: str = ""  # the inputs as kept (what a compare-and-swap compares)

    def decision(self) -> GateDecision:
        return kept_decision(self.body)


def keep_gated(store: Store, run_id: int, key: str, inputs: GateInputs, body: str) -> None:
    """Keep the decision the gate took on a run (`body`: its model_dump_json), in place of the
    one it took before."""
    store.save_gated_decision(run_id, key, inputs.model_dump_json(), body)


def kept_gated(store: Store, run_id: int) -> Gated | None:
    """The decision `callgate gate` last took on a run, None when it never gated it."""
    row = store.gated_decision(run_id)
    if row is None:
        return None
    key, inputs, body = row
    return Gated(key, GateInputs.model_validate_json(inputs), body, inputs)


def retake_gated(store: Store, run_id: int, was: Gated, key: str, body: str) -> bool:
    """Keep a decision taken again with `was`'s inputs on a changed store, only if `was` is
    still the one kept: a `callgate gate` (another process) that kept a newer one meanwhile
    wins. True when kept."""
    return store.replace_gated_decision(run_id, (was.key, was.inputs_json), key, body)
