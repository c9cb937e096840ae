"""Interval estimates shared by the stages (the judge's corrected shares, calibration's rates,
the scores' intervals): pure arithmetic, below every stage."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

Z95 = 1.959963984540054


def wilson(successes: float, n: float, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a proportion, as fractions in [0, 1]; None when n is 0.
    Counts may be fractional: an effective sample size (n / design effect) for clustered
    attempts."""
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At 0 and n the bounds are exactly 0 and 1; the formula leaves rounding dust there.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


# 0/1 outcomes by group: (successes, trials) per group, or how many groups have each
# (successes, trials). At 100,000 cases the counts have a few dozen keys, not 100,000 tuples.
Groups = Iterable[tuple[int, int]] | Mapping[tuple[int, int], int]


def rate_percent(successes: int, attempts: int) -> dict[str, int | float | None]:
    """A rate over attempts as the figures keep it: attempts, successes, percent and its
    Wilson 95% interval in percent (all None, counts 0, when there is no attempt)."""
    interval = wilson(successes, attempts)
    if interval is None:
        return {"attempts": 0, "successes": 0, "percent": None, "low": None, "high": None}
    return {"attempts": attempts, "successes": successes, "percent": 100 * successes / attempts,
            "low": 100 * interval[0], "high": 100 * interval[1]}


def _counted(groups: Groups) -> list[tuple[int, int, int]]:
    """(successes, trials, groups) for each kind of group with trials, in one order whatever
    order the groups came in (a merged release must score as the unsharded one, to the bit)."""
    counts = groups if isinstance(groups, Mapping) else Counter(groups)
    return sorted((s, t, w) for (s, t), w in counts.items() if t > 0 and w > 0)


def intraclass_correlation(groups: Groups) -> float | None:
    """ANOVA estimate of the intraclass correlation of a 0/1 outcome from (successes, trials)
    per group (Fleiss 1981, unequal group sizes), clipped to [0, 1] (a negative estimate is
    read as none, which never narrows an interval); None when it cannot be estimated: fewer
    than two groups, no group with two trials, or an outcome that never varies. An estimate
    within rounding dust of 0 or 1 is exactly that."""
    kinds = _counted(groups)
    total = sum(t * w for _, t, w in kinds)
    count = sum(w for _, _, w in kinds)
    if count < 2 or total <= count:
        return None
    share = sum(s * w for s, _, w in kinds) / total
    between = sum(w * t * (s / t - share) ** 2 for s, t, w in kinds) / (count - 1)
    within = sum(w * s * (1 - s / t) for s, t, w in kinds) / (total - count)
    mean_size = (total - sum(w * t * t for _, t, w in kinds) / total) / (count - 1)
    denominator = between + (mean_size - 1) * within
    if denominator <= 0:
        return None
    return min(1.0, max(0.0, round((between - within) / denominator, 12)))


def design_effect(groups: Groups) -> tuple[float, float, float | None]:
    """Kish's design effect of a mean over clustered 0/1 outcomes, 1 + (m − 1)·ICC, with m the
    size-weighted mean group size Σm²/Σm (the repeats per case) and the ICC estimated from the
    groups (0 when it cannot be). Returns (design effect, m, ICC or None)."""
    kinds = _counted(groups)
    total = sum(t * w for _, t, w in kinds)
    size = sum(w * t * t for _, t, w in kinds) / total if total else 1.0
    icc = intraclass_correlation({(s, t): w for s, t, w in kinds})
    return 1 + (size - 1) * (icc or 0.0), size, icc
