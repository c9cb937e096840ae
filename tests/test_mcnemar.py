"""The exact McNemar p-value against the sum of math.comb it replaced: every pair of discordant
counts up to 400, a dense sample to 2,000, spot checks to 100,000, and its speed there."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from itertools import accumulate

import pytest

from callgate.gating.statistics import mcnemar_exact

RELATIVE = 1e-12
TINY = 1e-290  # below, the reference itself is a subnormal float: compared absolutely


def exact_tails(n: int, ks: Iterable[int]) -> dict[int, float]:
    """The reference p-values for the k given (0 <= k <= n / 2): 2 sum_{i<=k} C(n, i) / 2^n,
    capped at 1, from exact integers (one rounding, in the division)."""
    sums = list(accumulate(math.comb(n, i) for i in range(n // 2 + 1)))
    return {k: min(1.0, 2 * (sums[k] / 2**n)) for k in ks}


def agrees(got: float, want: float) -> bool:
    if want > TINY:
        return abs(got - want) <= RELATIVE * want
    return got <= 2 * TINY


@pytest.mark.slow
def test_every_pair_up_to_400() -> None:
    for n in range(401):
        tails = exact_tails(n, range(n // 2 + 1))
        for b in range(n + 1):
            want = tails[min(b, n - b)]
            assert agrees(mcnemar_exact(b, n - b), want), (b, n - b)


@pytest.mark.slow
def test_a_dense_sample_up_to_2000() -> None:
    # Every 7th n (both parities); every 40th k, and the 40 k nearest n/2, where p is not tiny
    # and the sum is longest. (Every pair to 2,000 takes minutes.)
    for n in range(401, 2001, 7):
        half = n // 2
        ks = set(range(0, half + 1, 40)) | set(range(max(0, half - 40), half + 1))
        tails = exact_tails(n, ks)
        for k in ks:
            assert agrees(mcnemar_exact(k, n - k), tails[k]), (k, n - k)
            assert agrees(mcnemar_exact(n - k, k), tails[k]), (n - k, k)


def bounded_tail(b: int, c: int) -> float:
    """The reference at large n: math.comb's largest term, the smaller ones by the exact
    integer recurrence, stopped once all that is left is below 2^-80 of the sum."""
    n, k = b + c, min(b, c)
    term = total = math.comb(n, k)
    for i in range(k, 0, -1):
        term = term * i // (n - i + 1)
        total += term
        if term * i < total >> 80:  # at most i terms are left, each below this one
            break
    return min(1.0, 2 * (total / 2**n))


@pytest.mark.parametrize("b, c", [(50_000, 50_000), (49_000, 51_000), (48_500, 51_500),
                                  (45_000, 55_000), (17_095, 16_000), (3_000, 3_500),
                                  (29, 99_971), (30, 1_000), (31, 60), (60_000, 39_000)])
def test_spot_checks_up_to_100000(b: int, c: int) -> None:
    assert agrees(mcnemar_exact(b, c), bounded_tail(b, c))


def test_fast_at_100000_flips() -> None:
    start = time.perf_counter()
    for b in range(49_900, 50_001, 10):
        mcnemar_exact(b, 100_000 - b)
    assert time.perf_counter() - start < 0.1
