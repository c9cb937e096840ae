"""The excluded-share limits, kept in `callgate.scoring.exclusion` (scoring applies them to a run,
the gate to a comparison); named here too for the gate's modules."""

from __future__ import annotations

from callgate.scoring.exclusion import (
    DEFAULT_MAX_EXCLUDED,
    EXCLUDED_KINDS,
    excluded_share,
    too_many_excluded,
)

__all__ = ["DEFAULT_MAX_EXCLUDED", "EXCLUDED_KINDS", "excluded_share", "too_many_excluded"]
