"""The verdicts of a suite on disk scored through the real pipeline, and the policies each
broke: what the policy and claim tests read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from multiturn import score

from callgate.checks.verdict import Verdict
from callgate.suites.suite import load_suite


def scored(tmp_path: Path, root: Path, lines: list[dict[str, Any]]) -> dict[str, Verdict]:
    """Each case's first attempt's verdict, the suite at `root` scored on `lines`."""
    result = score(tmp_path, load_suite(root), lines)
    return {v.case_id: v for v in result.verdicts if v.repeat == 0}


def reasons(verdict: Verdict) -> list[tuple[str, str]]:
    return [(v.policy, v.reason) for v in verdict.violations]
