"""The statistical rule: is a figure's drop more than the margin, and is the paired test sure?

The unit is the case. Each case has a rate on each side (its right attempts ÷ its scored
attempts), and the drop is the mean over the shared cases of (rate then − rate now), each case
weighing the same however often it was asked (an adaptive run asks the undecided cases more
often; weighting by attempts would let those cases pull the share down).

The null hypothesis is "the drop is at most the margin" (the playbook's 2 points): a
regression is declared only when the test rejects it, so the statistical rule never fails what
the playbook's rule passes, and its false-regression rate is at most `alpha` for any true drop
up to the margin (no drop included). The test is a one-sided z-test on the paired drop with a
standard error from each case's own repeats (a case with one repeat on a side counts its squared
difference, which over-states its noise, never under-states it).

Looks: an adaptive run looks after every round. The error rate is spent over the rounds it may
take (alpha spending, Bonferroni: FIRST_LOOK, half, of `alpha` at the first look, the rest
split evenly over the others), so whatever rule stops it, the chance that any look declares a
false regression stays at most `alpha` (union bound; it needs no independence between looks).
The price: each later look needs a larger z than a single test would."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

DEFAULT_ALPHA = 0.05
FIRST_LOOK = 0.5  # the share of alpha the first look spends
_N = NormalDist()

Tier = Literal["regression", "pass", "cannot_tell"]
Rule = Literal["points", "statistical"]
RULES: tuple[Rule, ...] = ("points", "statistical")

# A case's tallies on one side: scored attempts and right ones (on the figure tested).
SideTally = tuple[int, int]


@dataclass(frozen=True)
class PairedDrop:
    """A figure's drop over the shared cases, in points, with its standard error."""

    cases: int
    drop: float  # points, then − now (positive: worse now)
    se: float  # points

    def z(self, margin: float) -> float:
        """How many standard errors the drop is above the margin."""
        if self.se <= 0:
            return math.inf if self.drop > margin else -math.inf
        return (self.drop - margin) / self.se

    def p_value(self, margin: float) -> float:
        """One-sided p-value of "the drop is at most `margin`"."""
        z = self.z(margin)
        if math.isinf(z):
            return 0.0 if z > 0 else 1.0
        return 1 - _N.cdf(z)


def _side_variance(trials: int, right: int) -> float | None:
    """Unbiased variance of a case's rate from its repeats; None with one repeat."""
    if trials < 2:
        return None
    return right * (trials - right) / (trials * trials * (trials - 1))


def paired_drop(pairs: Iterable[tuple[SideTally, SideTally, int]]) -> PairedDrop | None:
    """The paired drop from (then, now, number of cases) triples, each side (trials, right).
    Cases without a scored attempt on a side are left out. None without a shared case."""
    cases = 0
    total = 0.0
    variance = 0.0
    for (n_then, r_then), (n_now, r_now), number in pairs:
        if n_then <= 0 or n_now <= 0 or number <= 0:
            continue
        d = r_then / n_then - r_now / n_now
        v_then, v_now = _side_variance(n_then, r_then), _side_variance(n_now, r_now)
        # one repeat on a side: d² is at least the pair's variance in expectation
        case_variance = d * d if v_then is None or v_now is None else v_then + v_now
        cases += number
        total += number * d
        variance += number * case_variance
    if not cases:
        return None
    return PairedDrop(cases=cases, drop=100 * total / cases,
                      se=100 * math.sqrt(variance) / cases)


FIELD = {"right_tool": 1, "right_arguments": 2}


def drop_of(counts: Mapping[tuple[tuple[int, int, int], tuple[int, int, int]], int],
            figure: str) -> PairedDrop | None:
    """The paired drop of a figure from Paired.counts ((then tally, now tally) → cases, each
    tally (trials, right tool, right arguments))."""
    field = FIELD[figure]
    return paired_drop(((then[0], then[field]), (now[0], now[field]), number)
                       for (then, now), number in counts.items())


def look_alpha(look: int, looks: int, alpha: float = DEFAULT_ALPHA) -> float:
    """The error rate spent at look `look` (1-based) of at most `looks`: all of it with one
    look; else half at the first and the rest split evenly over the others."""
    if looks < 1 or not 1 <= look <= looks:
        raise ValueError(f"look {look} of {looks}")
    if looks == 1:
        return alpha
    return alpha * FIRST_LOOK if look == 1 else alpha * (1 - FIRST_LOOK) / (looks - 1)


def boundary(look: int, looks: int, alpha: float = DEFAULT_ALPHA) -> float:
    """The z a drop must exceed (above the margin) at this look."""
    return _N.inv_cdf(1 - look_alpha(look, looks, alpha))


@dataclass(frozen=True)
class Reading:
    """What the statistical rule reads from one figure at one look."""

    figure: str
    tier: Tier
    drop: PairedDrop
    margin: float
    p_value: float  # one-sided, of "the drop is at most the margin"
    needed: float  # the p-value this look needed (the error rate it spends)
    hiding: float  # points: the drop that could still hide (80% power at this look's boundary)

    @property
    def sure(self) -> bool:
        return self.tier == "regression"


def read(figure: str, drop: PairedDrop, margin: float, *, look: int = 1, looks: int = 1,
         alpha: float = DEFAULT_ALPHA) -> Reading:
    """The tier of a figure at a look: regression when the test is sure the drop is more
    than the margin; pass when the drop is within the margin (as the playbook's rule, which
    the statistical rule never overrules towards failing); else cannot tell (an adaptive run
    asks again, until its last look)."""
    needed = look_alpha(look, looks, alpha)
    p = drop.p_value(margin)
    z_needed = _N.inv_cdf(1 - needed)
    hiding = margin + (z_needed + _N.inv_cdf(0.8)) * drop.se
    if p < needed and drop.drop > margin:
        tier: Tier = "regression"
    elif drop.drop <= margin + 1e-9:
        tier = "pass"
    else:
        tier = "cannot_tell"
    return Reading(figure=figure, tier=tier, drop=drop, margin=margin, p_value=p,
                   needed=needed, hiding=hiding)


def combined(readings: Iterable[Reading]) -> Tier:
    """The decision's tier over its gated figures: a regression if any figure is one, else
    cannot tell if any figure cannot, else pass."""
    tiers = {r.tier for r in readings}
    if "regression" in tiers:
        return "regression"
    return "cannot_tell" if "cannot_tell" in tiers else "pass"


def explain(reading: Reading) -> str:
    """One line a person can act on."""
    label = reading.figure.replace("_", " ")
    d = reading.drop
    said = (f"{label}: paired drop {d.drop:.1f} ± {d.se:.1f} points over {d.cases} cases, "
            f"p = {reading.p_value:.3g} for a drop of at most {reading.margin:g}")
    if reading.tier == "regression":
        return said + f" (< {reading.needed:.3g}): the test is sure, a regression"
    if reading.tier == "pass":
        return said + ": within the margin"
    return (said + f" (needs < {reading.needed:.3g}): cannot tell; a drop of up to "
            f"{reading.hiding:.1f} points could still hide (80% power)")
