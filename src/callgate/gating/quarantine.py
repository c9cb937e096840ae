"""Quarantine: cases taken out of the gate on purpose, each with a reason and who set it,
listed on every decision they are left out of. Kept in `callgate.toml`

```toml
[gate]
rule = "points"          # or "statistical" (docs/noise.md)
[[gate.quarantine]]
case = "multi_turn_base_17"
reason = "the expected answer depends on today's date"
by = "jana@example.com"
suite = "bfcl-multi-turn"   # optional: else every suite with such a case
```

or in a file of their own kept in git (`callgate gate --quarantine FILE`: the same
`[[quarantine]]` entries at the top level)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from callgate.gating.sequential import Rule
from callgate.reading import reading_toml, validate


class Quarantined(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    case: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    by: str = Field(min_length=1)
    suite: str | None = None
    since: str | None = None


class GateSettings(BaseModel):
    """callgate.toml's `[gate]` table: the rule and the adaptive run (docs/noise.md), the
    quarantine, and the opt-in slice rule (docs/what-to-fix.md: gate every expected tool's
    slice, the slices of these tags, "all" for every tag, at this family-wise error rate)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rule: Rule = "points"
    adaptive: bool = False
    max_rounds: int = Field(default=3, ge=1, le=50)
    quarantine: list[Quarantined] = Field(default_factory=list)
    per_tool: bool = False
    per_tag: list[str] = Field(default_factory=list)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    # Gate recovery per fault kind: fail on a drop of more than this many points (off: None).
    recovery_max_drop: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    # `run --perturb`: fail when the robustness figure is more than this many points below the
    # baseline release's (docs/robustness.md); None: not gated
    robustness_max_drop: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class QuarantineFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    quarantine: list[Quarantined] = Field(default_factory=list)


def gate_settings(path: Path | str) -> GateSettings:
    """The `[gate]` table of a callgate.toml (the defaults without the file or the table).
    Raises InputError naming the file, the line and the field."""
    source = Path(path)
    if not source.exists():
        return GateSettings()
    with reading_toml(source) as raw:
        return validate(GateSettings, raw.get("gate") or {}, source, prefix="gate.")


def quarantine_file(path: Path | str) -> list[Quarantined]:
    source = Path(path)
    with reading_toml(source, missing="quarantine file not found") as raw:
        return list(validate(QuarantineFile, raw, source).quarantine)


def for_suite(entries: Iterable[Quarantined], suite_name: str) -> dict[str, Quarantined]:
    """The entries that apply to a suite, by case id (the first entry of a case counts)."""
    out: dict[str, Quarantined] = {}
    for entry in entries:
        if entry.suite in (None, suite_name):
            out.setdefault(entry.case, entry)
    return out


def quarantined_cases(entries: Iterable[Quarantined]) -> frozenset[str]:
    """The case ids a quarantine leaves out: the one rule the gate's pairs (gating.decision)
    and what to fix (gating.what_to_fix) both leave them out by."""
    return frozenset(entry.case for entry in entries)


def quarantine_note(entries: Iterable[Quarantined]) -> str | None:
    listed = [f"{e.case} ({e.reason}; set by {e.by}{', since ' + e.since if e.since else ''})"
              for e in entries]
    if not listed:
        return None
    return (f"{len(listed)} case(s) quarantined, left out of the gate: " + "; ".join(listed))
