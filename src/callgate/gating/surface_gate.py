"""The gate's use of the tool-surface diff (surface_diff.py): the cases whose expectation
changed are left out of the pairs (the checker changed, not the release), and each tool the
diff touches is shown with its compared cases and their flips."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from callgate.gating.cases import CaseRecord, Paired
from callgate.gating.scores_file import ReleaseScores
from callgate.gating.surface_diff import SurfaceDiff, surface_diff, with_flips


def release_diff(baseline: ReleaseScores, current: ReleaseScores) -> SurfaceDiff:
    """What changed from the baseline's surface to the release's (nothing, without looking at
    every case, when both ran the same suite with the same surface recorded)."""
    then, now = baseline.tool_surface, current.tool_surface
    if (baseline.suite_fingerprint == current.suite_fingerprint and then is not None
            and now is not None and then.mcp_server == now.mcp_server
            and then.system == now.system):
        return SurfaceDiff(baseline_release=baseline.release)
    return surface_diff(then, now, baseline.release)


def without(cases: Mapping[str, CaseRecord], left_out: Collection[str]
            ) -> Mapping[str, CaseRecord]:
    """The records but those of the cases `left_out`."""
    return {k: v for k, v in cases.items() if k not in left_out} if left_out else cases


def compared_pairs(baseline: ReleaseScores, current: ReleaseScores, in_suites: set[str],
                   diff: SurfaceDiff, pairs: Paired | None,
                   quarantined: Collection[str] = ()) -> Paired:
    """The pairs the figures are counted on: the releases' cases but those whose expectation
    changed and those `quarantined`. `pairs` (counted in the store) is used as it is when no
    case is left out; when one is, the releases must carry their cases (gating.release reads
    them then)."""
    left_out = set(diff.expectation_changed) | set(quarantined)
    if pairs is not None and not left_out:
        return pairs
    if pairs is not None and not (baseline.cases and current.cases):
        raise ValueError("cases whose expectation changed are left out of the pairs: give "
                         "both releases with their cases")
    return Paired.of(without(baseline.cases, left_out), without(current.cases, left_out),
                     in_suites - left_out)


def shown_diff(diff: SurfaceDiff, baseline: ReleaseScores, current: ReleaseScores,
               suite_changed: bool, worse: Collection[str], better: Collection[str]
               ) -> SurfaceDiff | None:
    """The diff as the decision keeps it (None when there is nothing to say), with, for each
    tool it touches, the cases of both suites expecting it (their expectation unchanged) and
    how many of them flipped."""
    if not (diff.surface_changed or diff.expectation_changed
            or (diff.unrecorded and suite_changed)):
        return None
    then, now = baseline.tool_surface, current.tool_surface
    if then is None or now is None:
        return diff
    compared = (then.expectations.keys() & now.expectations.keys()) - set(
        diff.expectation_changed)
    return with_flips(diff, now, compared, worse, better)
