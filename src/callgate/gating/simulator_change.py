"""A change of the simulated user (`run --user`, docs/simulated-user.md) between a baseline and
a release, named in the gate as a change of the model's parameters is: the conversations of
scenario cases were played by another user, so part of a difference may be the user's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from callgate.gating.scores_file import ReleaseScores


def _named(user: Mapping[str, Any] | None) -> str:
    if user is None:
        return "none"
    print_ = str(user.get("fingerprint") or "")[:12]
    return f"{user.get('name')} ({user.get('model')}, fingerprint {print_})"


def simulator_warnings(baseline: ReleaseScores, current: ReleaseScores) -> list[str]:
    """One warning line when the simulated user's fingerprint differs (or one release had
    none); nothing when both ran without one or with the same."""
    then, now = baseline.user_simulator, current.user_simulator
    if (then or {}).get("fingerprint") == (now or {}).get("fingerprint"):
        return []
    return [f"simulated user changed since {baseline.release}: {_named(then)} → {_named(now)}"]
