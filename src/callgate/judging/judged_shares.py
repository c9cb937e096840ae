"""The judged shares a run keeps in its scores (`Scores.judged`, written by
`step.judged_shares`), read back as a model: per dimension the raw share of the judged
attempts and, with the judge's certificate, its Rogan–Gladen correction with a 95% interval
(all in points), clustered by case. Readers take fields, not keys, so a renamed field is a
type error. Documents stored before a field was kept still read (`design_effect` 1, no `icc`,
no counts beside the population). `Scores` dumps them with the fields they were given only
(`exclude_unset`), so a stored or `--json` document is byte for byte what a dict gave."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from callgate.errors import from_validation_error

Dimension = Literal["tool_choice", "arguments"]
DIMENSIONS: tuple[Dimension, ...] = ("tool_choice", "arguments")


class JudgedShare(BaseModel):
    """One judged share (points): `raw` over the `n` attempts its calibration rates apply to,
    `corrected` (Rogan–Gladen) with `low`–`high` when the judge is certified, else None."""

    model_config = ConfigDict(frozen=True)
    # In the order `step.judged_shares` writes them, so a dump is the document it wrote.
    raw: float | None
    corrected: float | None = None
    low: float | None = None
    high: float | None = None
    n: int
    design_effect: float = 1.0
    icc: float | None = None
    # Arguments only: attempts the judge found nothing to grade in (n/a), and attempts a
    # deterministic check failed (invalid JSON, schema violation), both outside `n`.
    not_applicable: int = 0
    deterministic_failures: int = 0


class JudgedShares(BaseModel):
    """The judged part of a run's scores: its attempts judged, the judge, and a share per
    dimension (absent in a document that never judged that dimension)."""

    model_config = ConfigDict(frozen=True)
    n: int
    fingerprint: str = ""
    certified: bool = False
    tool_choice: JudgedShare | None = None
    arguments: JudgedShare | None = None
    judge_errors: int = 0
    estimators: dict[str, str] = Field(default_factory=dict)

    def share(self, dim: str) -> JudgedShare | None:
        """The share of `tool_choice` or `arguments`."""
        if dim == "tool_choice":
            return self.tool_choice
        if dim == "arguments":
            return self.arguments
        raise ValueError(f"no judged dimension {dim!r}")


def judged_shares(document: Mapping[str, Any] | None, where: str = "scores") -> JudgedShares | None:
    """The judged shares of a scores document (`Scores.judged`; None or empty: nothing was
    judged). A document that is not judged shares is refused in one line naming `where` and
    the field."""
    if not document:
        return None
    try:
        return JudgedShares.model_validate(document)
    except ValidationError as exc:
        raise from_validation_error(where, None, exc, prefix="scores.judged.") from None
