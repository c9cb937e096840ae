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
