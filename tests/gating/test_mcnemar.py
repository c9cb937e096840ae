"""The exact McNemar p-value against exact integers: every pair of discordant counts (b, c)
with b + c <= 2,000 (each n's binomial row by Pascal's rule, in chunks of n that xdist runs
side by side), spot checks to 100,000, and its speed there."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from itertools import accumulate
from operator import add

import pytest

from callgate.gating.statistics import mcnemar_exact

RELATIVE = 1e-12
TINY = 1e-290  # below, the reference itself is a subnormal float: compared absolutely
LARGEST_N = 2_000
# Chunks of n with about equal work (a row's cost grows with n, so later chunks are narrower).
CHUNKS = [(0, 707), (708, 1000), (1001, 1225), (1226, 1414), (1415, 1581), (1582, 1732),
          (1733, 1871), (1872, LARGEST_N)]


def binomial_rows(first: int, last: int) -> Iterator[tuple[int, list[int]]]:
    """(n, [C(n, 0), ..., C(n, n)]) for every n from first to last, in exact integers: the
    first row by C(n, i + 1) = C(n, i) (n - i) / (i + 1), each next one by Pascal's rule."""
    row = [1]
    for i in range(first):
        row.append(row[-1] * (first - i) // (i + 1))
    for n in range(first, last + 1):
        yield n, row
        row = [1, *map(add, row, row[1:]), 1]


def exact_tails(n: int, row: list[int]) -> list[float]:
    """The reference p-value for each k <= n / 2: 2 sum_{i<=k} C(n, i) / 2^n, capped at 1
    (one rounding, in the division of two exact integers)."""
    whole = 1 << n
    return [min(1.0, 2 * (tail / whole)) for tail in accumulate(row[:n // 2 + 1])]


def agrees(got: float, want: float) -> bool:
    if want > TINY:
        return abs(got - want) <= RELATIVE * want
    return got <= 2 * TINY


def test_the_chunks_cover_every_n_once() -> None:
    covered = [n for first, last in CHUNKS for n in range(first, last + 1)]
    assert covered == list(range(LARGEST_N + 1))


def test_the_reference_rows_are_binomial_coefficients() -> None:
    for n, row in binomial_rows(95, 100):
        assert row == [math.comb(n, i) for i in range(n + 1)]
    assert exact_tails(4, [1, 4, 6, 4, 1]) == [2 / 16, 10 / 16, 1.0]


@pytest.mark.slow
@pytest.mark.parametrize("first, last", CHUNKS)
def test_every_pair_up_to_2000(first: int, last: int) -> None:
    for n, row in binomial_rows(first, last):
        tails = exact_tails(n, row)
        wrong = [(b, n - b) for b in range(n + 1)
                 if not agrees(mcnemar_exact(b, n - b), tails[min(b, n - b)])]
        assert not wrong, (n, wrong[:5])


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
