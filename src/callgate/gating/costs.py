"""Cost and latency per right answer beside the gate's figures: shown with their change
against the baseline, never gated (the 2-point rule is about the shares)."""

from __future__ import annotations

from callgate.scoring.scores import Scores

PER_RIGHT = (("cost per right answer", "${:.4f}"), ("latency per right answer", "{:.0f} ms"))


def _per_right(scores: Scores | None) -> tuple[float | None, float | None]:
    """Cost and latency per right answer, in PER_RIGHT's order."""
    if scores is None:
        return None, None
    return scores.cost_per_right_usd, scores.latency_per_right_ms


def change_pct(now: float | None, then: float | None) -> float | None:
    """The relative change now against then, in percent (None when either is unknown or 0)."""
    if now is None or not then:
        return None
    return 100 * (now - then) / then


def per_right_line(now: Scores | None, then: Scores | None) -> str | None:
    """"cost per right answer $0.0120 (baseline $0.0100, +20%); latency per right answer …",
    from two runs' scores; None when the release has neither figure."""
    parts = []
    for (label, fmt), value, before in zip(PER_RIGHT, _per_right(now), _per_right(then),
                                           strict=True):
        if value is None:
            continue
        text = f"{label} {fmt.format(value)}"
        change = change_pct(value, before)
        if before is not None:
            text += f" (baseline {fmt.format(before)}" + (
                f", {change:+.0f}%)" if change is not None else ")")
        parts.append(text)
    return "; ".join(parts) or None
