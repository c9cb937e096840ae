"""Holm's step-down correction (Holm 1979): many tests at once with the family-wise error rate,
the chance of even one false rejection, held at alpha whatever the tests' dependence."""

from __future__ import annotations

from collections.abc import Sequence


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Each p-value adjusted by Holm's method, in the order given: the i-th smallest becomes
    max over j <= i of (m − j + 1) · p_(j), capped at 1. A test rejects at family-wise level
    alpha when its adjusted p-value is at most alpha."""
    m = len(p_values)
    order = sorted(range(m), key=p_values.__getitem__)
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def holm_rejects(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Which tests Holm's method rejects at family-wise error rate alpha."""
    return [p <= alpha for p in holm_adjusted(p_values)]


def tarone_count(min_p_values: Sequence[float], alpha: float) -> int:
    """Tarone's K (Tarone 1990) for discrete tests: the smallest K with at most K tests whose
    smallest attainable p-value is at most alpha / K. A test that cannot reach alpha / K can
    never reject, so only those K need correcting for."""
    m = len(min_p_values)
    for k in range(1, m + 1):
        if sum(p <= alpha / k for p in min_p_values) <= k:
            return k
    return m


def tarone_holm_adjusted(p_values: Sequence[float], min_p_values: Sequence[float],
                         alpha: float) -> tuple[list[float], int]:
    """Holm's method over the tests that can reach significance (Tarone's set: the tests whose
    smallest attainable p-value is at most alpha / K), and K; the others get 1 (they are not
    tested). The set depends only on what each test's smallest attainable p-value depends on
    (for McNemar's test, the number of flipped cases, which the exact test conditions on), so
    the family-wise error rate stays at most alpha."""
    k = tarone_count(min_p_values, alpha)
    tested = [i for i, p in enumerate(min_p_values) if p <= alpha / k]
    adjusted = [1.0] * len(p_values)
    for index, value in zip(tested, holm_adjusted([p_values[i] for i in tested]), strict=True):
        adjusted[index] = value
    return adjusted, len(tested)
