"""Releases' scores built by hand for the gate's tests: per-case records and the figures they
give."""

from __future__ import annotations

from callgate.gating.cases import CaseRecord, figures_of
from callgate.gating.scores_file import ReleaseScores


def release(name: str, cases: dict[str, tuple[int, int, int]], *, fingerprint: str = "f1",
            excluded: int = 0, created: str | None = None, judge: str | None = None
            ) -> ReleaseScores:
    """cases: id -> (trials, right_tool, right_arguments)."""
    records = {c: CaseRecord(trials=n, right_tool=t, right_arguments=a, reason=f"{c} failed")
               for c, (n, t, a) in cases.items()}
    attempts = sum(n for n, _, _ in cases.values()) + excluded
    return ReleaseScores(
        callgate_version="test", model="m", release=name, suite_name="s",
        suite_fingerprint=fingerprint, created_at=created or f"2026-01-0{name[-1]}",
        judge_fingerprint=judge, attempts=attempts,
        excluded={"truncated": excluded, "provider_error": 0, "pending_judge": 0},
        figures=figures_of(records.values()), cases=records,
    )


def uniform(n_cases: int, tool_right: int, args_right: int) -> dict[str, tuple[int, int, int]]:
    """n_cases single-attempt cases: the first tool_right have the right tool, the first
    args_right of those the right arguments too."""
    return {f"c{i:04d}": (1, int(i < tool_right), int(i < args_right)) for i in range(n_cases)}
