"""An audit's estimates as a scores file keeps them (`audit.estimates_document`), read back as
a model: what the gate compares a release with when its baseline was audited. Files written
before a field was kept still read: a missing `se` is worked out from the 95% interval, a
missing `complete` counts as complete (skips were not recorded then)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from callgate.stats import Z95


class KeptEstimate(BaseModel):
    """One figure in points (0–100), naming its estimator (`Estimate.points()`)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)
    estimator: str | None = None
    pct: float | None = None
    low: float | None = None
    high: float | None = None
    n: int | None = None
    labels: int | None = None
    weight: float | None = Field(default=None, alias="lambda")
    se: float | None = None
    estimand: str | None = None

    def se_points(self) -> float:
        """The standard error in points; from the 95% interval in older files."""
        if self.se is not None:
            return self.se
        if self.low is None or self.high is None:
            raise ValueError(f"a kept {self.estimator} estimate has neither se nor interval")
        return (self.high - self.low) / (2 * Z95)


class KeptAudit(BaseModel):
    """The audit the estimates come from."""

    model_config = ConfigDict(frozen=True)
    run: int | None = None
    seed: int | None = None
    sample: int | None = None
    labelled: int | None = None
    labellers: list[str] = Field(default_factory=list)
    counted: int | None = None
    skipped: int | None = None
    complete: bool = True
    estimand: str | None = None


class KeptEstimates(BaseModel):
    """The audited figures of a release: right tool % and right arguments % over all its
    attempts, the judged shares per dimension (raw, rogan_gladen, ppi++), and per tag."""

    model_config = ConfigDict(frozen=True)
    audit: KeptAudit | None = None
    right_tool: KeptEstimate | None = None
    right_arguments: KeptEstimate | None = None
    judged: dict[str, dict[str, KeptEstimate | None]] = Field(default_factory=dict)
    by_tag: dict[str, dict[str, KeptEstimate | None]] = Field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """A kept audit is complete unless it says otherwise."""
        return self.audit is None or self.audit.complete

    def figure(self, name: str) -> KeptEstimate | None:
        """`right_tool` or `right_arguments`, None when not estimated."""
        if name == "right_tool":
            return self.right_tool
        if name == "right_arguments":
            return self.right_arguments
        raise ValueError(f"no kept figure {name!r}")


def kept_estimates(document: Mapping[str, Any] | None) -> KeptEstimates | None:
    """The estimates document of a scores file as the model (None: no audit kept)."""
    return KeptEstimates.model_validate(document) if document is not None else None
