"""Repeats of one case under an audit: about the agent's rate they are one draw as far as
they agree (a variance clustered by case, stated), and the planner counts the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit_releases import audit_in_full, repeats_suite, scored_release
from live_judge import (
    certified,  # noqa: F401  (a fixture)
    run,
)
from loopback import Loopback

from callgate.judging.estimates import Clustering, combined_share
from callgate.judging.planning import audit_labels_for_width, moments_from_rates


@pytest.mark.slow
def test_identical_repeats_do_not_narrow_the_agent_interval_and_the_plan_counts_them(
    certified: Path, loopback: Loopback, callgate_exe: str, cli_env: dict,  # noqa: F811
    tmp_path: Path
) -> None:
    exe, env = callgate_exe, cli_env
    repeats_suite(tmp_path / "suite")
    once = scored_release(loopback, exe, env, tmp_path, certified, "once", 1)
    thrice = scored_release(loopback, exe, env, tmp_path, certified, "thrice", 3)
    plan = run(exe, env, tmp_path, "judge", "plan", "--run", str(thrice), "--width", "20",
               "--estimand", "agent", "--db", "c.db")
    assert plan.returncode == 0, plan.stderr
    assert "repeats' design effect 3.00" in plan.stdout
    ses = {}
    for run_id in (once, thrice):
        audit_in_full(tmp_path, run_id)
        audit = run(exe, env, tmp_path, "judge", "audit", str(run_id), "--estimand", "agent",
                    "--json", "--db", "c.db")
        assert audit.returncode == 0, audit.stderr
        figure = json.loads(audit.stdout)["release"]["right_tool"]
        assert figure["value"] == pytest.approx(20 / 30)
        ses[run_id] = figure["se"]
        text = run(exe, env, tmp_path, "judge", "audit", str(run_id), "--estimand", "agent",
                   "--db", "c.db").stdout
        assert "repeats clustered by case" in text
    # Three identical answers of a case are one draw of the agent: the same interval as one
    # answer (independent attempts would make it √3 narrower).
    assert ses[thrice] == pytest.approx(ses[once], rel=0.1)
    text = run(exe, env, tmp_path, "judge", "audit", str(thrice), "--estimand", "agent",
               "--db", "c.db").stdout
    assert "checked part 3.0 attempts per case, ICC 1.00, design effect 3.00" in text
    assert "judged part 3.0 attempts per case, ICC 1.00, design effect 3.00" in text
    # About this release's attempts the repeats change nothing: checked ones are known and a
    # full audit leaves no judged uncertainty.
    release = json.loads(run(exe, env, tmp_path, "judge", "audit", str(thrice), "--json",
                             "--db", "c.db").stdout)["release"]["right_tool"]
    assert release["se"] == 0


def test_the_checked_part_about_the_agent_is_clustered_by_case() -> None:
    # 20 cases: 3 identical repeats each (60 attempts) against one each; no judged attempts
    # and then some. The clustered share has the one-repeat interval, not a √3 narrower one.
    groups = [(3, 3)] * 14 + [(0, 3)] * 6
    repeated = Clustering.of("checked", groups)
    assert (repeated.repeats, repeated.icc, repeated.design_effect) == (3.0, 1.0, 3.0)
    thrice = combined_share(42, 60, None, 0, checked=repeated)
    once = combined_share(14, 20, None, 0, checked=Clustering.of("checked", [(1, 1)] * 14
                                                                 + [(0, 1)] * 6))
    assert thrice is not None and once is not None
    assert thrice.low == pytest.approx(once.low) and thrice.high == pytest.approx(once.high)
    assert thrice.clustering == (repeated,)


def test_the_planner_asks_for_more_labels_when_repeats_are_correlated() -> None:
    moments = moments_from_rates(0.8, 0.85, 0.80)
    independent = audit_labels_for_width(0.05, 3000, moments, estimand="agent")
    correlated = audit_labels_for_width(0.05, 3000, moments, estimand="agent",
                                        design_effect=2.5)
    assert independent.labels is not None and correlated.labels is not None
    assert correlated.labels > independent.labels and correlated.design_effect == 2.5
    # About this release's attempts the audit samples attempts: repeats change nothing.
    release = audit_labels_for_width(0.05, 3000, moments, design_effect=2.5)
    assert release.labels == audit_labels_for_width(0.05, 3000, moments).labels
    assert release.design_effect == 1.0
