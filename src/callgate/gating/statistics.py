"""The statistics around the gate: an exact McNemar test on paired cases, and the smallest drop
a suite of a given size can detect, paired (McNemar, Connor 1987) or unpaired (two
proportions). Wilson intervals are in `callgate.stats`, shared with calibration."""

from __future__ import annotations

import math
from statistics import NormalDist


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts b and c."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


_Z = NormalDist().inv_cdf


def paired_cases_needed(drop: float, discordant: float, alpha: float = 0.05,
                        power: float = 0.8) -> float:
    """Paired cases needed to detect a drop (a fraction) with McNemar's test (Connor 1987),
    given the share of cases whose verdict flips either way."""
    # The drop is p10 − p01 and the flip share p10 + p01, so no drop exceeds the flip share.
    if drop <= 0 or discordant <= 0 or drop > discordant:
        return math.inf
    za, zb = _Z(1 - alpha / 2), _Z(power)
    spread = za * math.sqrt(discordant) + zb * math.sqrt(max(0.0, discordant - drop * drop))
    return spread * spread / (drop * drop)


def detectable_drop_paired(n: int, discordant: float, alpha: float = 0.05,
                           power: float = 0.8) -> float | None:
    """Smallest drop (a fraction) that n paired cases detect with the given power."""
    if n <= 0 or discordant <= 0:
        return None
    low, high = 0.0, min(1.0, discordant)
    if paired_cases_needed(high, discordant, alpha, power) > n:
        return None  # not even a drop as large as the flip share is detectable
    for _ in range(80):
        mid = (low + high) / 2
        if paired_cases_needed(mid, discordant, alpha, power) > n:
            low = mid
        else:
            high = mid
    return high


def detectable_drop_unpaired(n: int, share: float, alpha: float = 0.05,
                             power: float = 0.8) -> float | None:
    """Smallest drop from `share` that two independent samples of n attempts detect."""
    if n <= 0:
        return None
    za, zb = _Z(1 - alpha / 2), _Z(power)

    def needed(drop: float) -> float:
        p1, p2 = share, share - drop
        mean = (p1 + p2) / 2
        spread = za * math.sqrt(2 * mean * (1 - mean)) + zb * math.sqrt(
            p1 * (1 - p1) + p2 * (1 - p2))
        return spread * spread / (drop * drop)

    low, high = 0.0, share
    if high <= 0 or needed(high) > n:
        return None
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if needed(mid) > n else (low, mid)
    return high
