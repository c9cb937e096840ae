"""Whether a scored run is a result: the "not a result" rule (more than `max_excluded` of its
attempts excluded) and the record it leaves on the run, the same from the library
(`score_file`), the CLI (`score`, `run`) and `merge`. A run so marked is inconclusive and
never a baseline. The gate writes its own decisions in the same record (`GateRecord`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from callgate.scoring.exclusion import too_many_excluded

Outcome = Literal["pass", "first_release", "regression", "inconclusive"]


class GateRecord(BaseModel):
    """The decision taken on a release: only a released one (it passed its gate, or was the
    agent's first) can be a later release's baseline. `decided_by` is "gate", or "run" /
    "score" when those found the run mostly excluded attempts (exit 3). `new_agent`: the
    release started a new agent's line on purpose (`--new-agent`) beside another agent's."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    outcome: Outcome
    released: bool
    decided_by: Literal["gate", "run", "score"] = "gate"
    baseline_release: str | None = None
    baseline_agent: str | None = None
    new_agent: bool = False
    max_drop: float | None = None
    max_excluded: float
    messages: list[str] = Field(default_factory=list)


def not_a_result(by: Literal["run", "score"], attempts: int, excluded: Mapping[str, int],
                 max_excluded: float) -> GateRecord | None:
    """The record a run or a score leaves when most of its attempts were excluded (None when
    it is a result); the store writes it with the run's scores."""
    why = too_many_excluded(attempts, excluded, max_excluded)
    if why is None:
        return None
    return GateRecord(outcome="inconclusive", released=False, decided_by=by,
                      max_excluded=max_excluded, messages=[why])

