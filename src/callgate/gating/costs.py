"""Cost and latency per right answer beside the gate's figures: shown with their change
against the baseline, never gated (the 2-point rule is about the shares)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PER_RIGHT = (("cost_per_right_usd", "cost per right answer", "${:.4f}"),
             ("latency_per_right_ms", "latency per right answer", "{:.0f} ms"))


def change_pct(now: float | None, then: float | None) -> float | None:
    """The relative change now against then, in percent (None when either is unknown or 0)."""
    if now is None or not then:
        return None
    return 100 * (now - then) / then


def per_right_line(now: Mapping[str, Any], then: Mapping[str, Any] | None) -> str | None:
    """"cost per right answer $0.0120 (baseline $0.0100, +20%); latency per right answer …",
    from two runs' scores documents; None when the release has neither figure."""
    parts = []
    for key, label, fmt in PER_RIGHT:
        value = now.get(key)
        if value is None:
            continue
        text = f"{label} {fmt.format(value)}"
        before = (then or {}).get(key)
        change = change_pct(value, before)
        if before is not None:
            text += f" (baseline {fmt.format(before)}" + (
                f", {change:+.0f}%)" if change is not None else ")")
        parts.append(text)
    return "; ".join(parts) or None
