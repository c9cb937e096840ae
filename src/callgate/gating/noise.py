"""What the decision says about noise: each figure's paired test against the margin (the
statistical rule, gating.sequential), the figures a suite does not gate, the flaky cases and
the quarantined ones. `decide` hands its figure checks here; the playbook's point rule stays
the default, and the statistical rule only ever turns a point-rule regression into "cannot
tell", never a pass into a failure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from callgate.gating.cases import Paired
from callgate.gating.flaky import FlakyCase, flaky_note
from callgate.gating.quarantine import Quarantined, quarantine_note
from callgate.gating.sequential import Rule, drop_of, read


class _Check(Protocol):
    """What is read of a decision's FigureCheck (not imported: decision imports this)."""

    @property
    def name(self) -> str: ...
    @property
    def failed(self) -> bool: ...
    @property
    def mcnemar_p(self) -> float | None: ...
    @property
    def flipped_worse(self) -> int: ...
    @property
    def flipped_better(self) -> int: ...
    def model_copy(self: C, *, update: Mapping[str, Any] | None = None,
                   deep: bool = False) -> C: ...


C = TypeVar("C", bound=_Check)
ALL_FIGURES = ("right_tool", "right_arguments")


@dataclass(frozen=True)
class Noise:
    """How a decision treats noise: the rule that sets the exit code, the figures gated (a
    suite's `gate.figures`), the flaky cases found and the cases quarantined."""

    rule: Rule = "points"
    gated: tuple[str, ...] = ALL_FIGURES
    flaky: tuple[FlakyCase, ...] = ()
    quarantined: tuple[Quarantined, ...] = ()


@dataclass
class Said:
    messages: list[str]
    inconclusive: list[str]
    warnings: list[str]


def _label(name: str) -> str:
    return name.replace("_", " ")


def apply_noise(checks: list[C], pairs: Paired, max_drop: float, noise: Noise,
                shared: int) -> tuple[list[C], Said]:
    """The checks with their paired test, failed as the rule says; and what to tell."""
    said = Said([], [], [])
    out = []
    for check in checks:
        out.append(_one(check, pairs, max_drop, noise, said))
    note = flaky_note(list(noise.flaky), shared)
    if note:
        said.warnings.append(note)
    left_out = quarantine_note(noise.quarantined)
    if left_out:
        said.messages.append(left_out)
    return out, said


def _one(check: C, pairs: Paired, max_drop: float, noise: Noise, said: Said) -> C:
    drop = drop_of(pairs.counts, check.name)
    reading = read(check.name, drop, max_drop) if drop is not None else None
    update: dict[str, Any] = {"gated": check.name in noise.gated}
    if reading is not None:
        update.update(paired_drop=reading.drop.drop, paired_se=reading.drop.se,
                      p_margin=reading.p_value, tier=reading.tier)
    if check.name not in noise.gated:
        gated = ", ".join(_label(f) for f in noise.gated)
        said.messages.append(f"{_label(check.name)}: shown, not gated (this suite gates "
                             f"{gated})")
        update["failed"] = False
        return check.model_copy(update=update)
    if not check.failed or reading is None or reading.tier == "regression":
        return check.model_copy(update=update)
    mcnemar = (f"McNemar p = {check.mcnemar_p:.2g} on {check.flipped_worse} worse / "
               f"{check.flipped_better} better" if check.mcnemar_p is not None else "")
    if noise.rule == "statistical":
        update["failed"] = False
        said.inconclusive.append(
            f"{_label(check.name)} fell more than the {max_drop:g} points allowed, but the "
            f"paired test cannot confirm it (p = {reading.p_value:.2g} for a drop of at most "
            f"{max_drop:g}; {mcnemar}): cannot tell by the statistical rule; a drop of up to "
            f"{reading.hiding:.1f} points could still hide; re-run with "
            "`callgate run --until-decided` to decide")
    else:
        said.messages.append(
            f"{_label(check.name)}: regression by the playbook's rule; not significant, "
            f"p = {reading.p_value:.2g} (paired drop {reading.drop.drop:.1f} ± "
            f"{reading.drop.se:.1f} points against the {max_drop:g} allowed; {mcnemar}): "
            "re-run with `--until-decided` to confirm")
    return check.model_copy(update=update)


def gated_figures(value: object, where: str = "suite.json") -> tuple[str, ...]:
    """A suite's `gate.figures` as kept with its scores (None or absent: both figures)."""
    if value is None:
        return ALL_FIGURES
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        raise ValueError(f"{where}: gate.figures must be a non-empty list of "
                         f"{' or '.join(ALL_FIGURES)}")
    names = tuple(str(v) for v in value)
    unknown = [n for n in names if n not in ALL_FIGURES]
    if unknown:
        raise ValueError(f"{where}: gate.figures: unknown figure {unknown[0]!r} (the figures "
                         f"are {', '.join(ALL_FIGURES)})")
    return names
