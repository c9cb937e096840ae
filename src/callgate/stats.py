"""Interval estimates shared by the stages (the judge's corrected shares, calibration's rates,
the scores' intervals): pure arithmetic, below every stage."""

from __future__ import annotations

import math
from collections.abc import Sequence

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


def intraclass_correlation(groups: Sequence[tuple[int, int]]) -> float | None:
    """ANOVA estimate of the intraclass correlation of a 0/1 outcome from (successes, trials)
    per group (Fleiss 1981, unequal group sizes), clipped to [0, 1] (a negative estimate is
    read as none, which never narrows an interval); None when it cannot be estimated: fewer
    than two groups, no group with two trials, or an outcome that never varies.

    The same groups in any order give the same bits (a merged release must score as the
    unsharded one), and an estimate within rounding dust of 0 or 1 is exactly that."""
    groups = sorted((s, t) for s, t in groups if t > 0)
    sizes = [trials for _, trials in groups]
    total, count = sum(sizes), len(sizes)
    if count < 2 or total <= count:
        return None
    share = sum(s for s, _ in groups) / total
    between = sum(t * (s / t - share) ** 2 for s, t in groups) / (count - 1)
    within = sum(s * (1 - s / t) for s, t in groups) / (total - count)
    mean_size = (total - sum(t * t for t in sizes) / total) / (count - 1)
    denominator = between + (mean_size - 1) * within
    if denominator <= 0:
        return None
    return min(1.0, max(0.0, round((between - within) / denominator, 12)))


def design_effect(groups: Sequence[tuple[int, int]]) -> tuple[float, float, float | None]:
    """Kish's design effect of a mean over clustered 0/1 outcomes, 1 + (m − 1)·ICC, with m the
    size-weighted mean group size Σm²/Σm (the repeats per case) and the ICC estimated from the
    groups (0 when it cannot be). Returns (design effect, m, ICC or None)."""
    total = sum(trials for _, trials in groups)
    size = sum(trials * trials for _, trials in groups) / total if total else 1.0
    icc = intraclass_correlation(groups)
    return 1 + (size - 1) * (icc or 0.0), size, icc
