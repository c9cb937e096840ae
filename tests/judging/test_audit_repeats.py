"""Repeats of one case under an audit: about the agent's rate they are one draw as far as
they agree (a variance clustered by case, stated), and the planner counts the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from live_judge import (
    TOOLS,
    certified,  # noqa: F401  (a fixture)
    run,
    verdict,
)
from loopback import Loopback, ok

from callgate.judging.estimates import Clustering, combined_share
from callgate.judging.planning import audit_labels_for_width, moments_from_rates

CHECKED, JUDGED = 24, 6


def _suite(root: Path) -> None:
    root.mkdir()
    (root / "tools.json").write_text(json.dumps(TOOLS))
    cases = [{"id": f"d{n:02d}", "messages": [{"role": "user", "content": "hours?"}],
              "expect": {"type": "no_call"}} for n in range(CHECKED)]
    cases += [{"id": f"g{n:02d}", "messages": [{"role": "user", "content": "a person"}],
               "expect": {"type": "judge", "rubric": "Escalate faithfully."}}
              for n in range(JUDGED)]
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))


def _release(loopback: Loopback, exe: str, env: dict, cwd: Path, spec: Path, release: str,
             repeats: int) -> int:
    """Score a release whose every case answers the same way in each of its repeats: 16 of
    the 24 checked cases right (no call), and the judge passing 4 of the 6 judged ones."""
    lines = []
    for n in range(CHECKED):
        response = ({"role": "assistant", "content": "9 to 5"} if n < 16 else
                    {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                     "function": {"name": "escalate", "arguments": '{"summary": "x"}'}}]})
        lines += [{"case_id": f"d{n:02d}", "repeat": r, "response": response}
                  for r in range(repeats)]
    for n in range(JUDGED):
        marker = f"[{release}-{n:02d}]"
        loopback.script(marker, ok(content=verdict("pass", "pass") if n < 4
                                   else verdict("fail", "n/a"), provider=None, cost=None))
        response = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                    "function": {"name": "escalate",
                                 "arguments": json.dumps({"summary": marker})}}]}
        lines += [{"case_id": f"g{n:02d}", "repeat": r, "response": response}
                  for r in range(repeats)]
    path = cwd / f"{release}.jsonl"
    path.write_text("".join(json.dumps({**line, "finish_reason": "stop"}) + "\n"
                            for line in lines))
    scored = run(exe, env, cwd, "score", "suite", "-r", str(path), "-m", "m", "--release",
                 release, "--db", "c.db", "--judge", str(spec), "--json")
    assert scored.returncode == 0, scored.stderr
    return json.loads(scored.stdout)["run_id"]


def _audit_in_full(cwd: Path, run_id: int) -> None:
    """Every judged attempt labelled as the judge said it (cases g00–g03 right)."""
    from callgate.judging.audit_sample import draw_audit
    from callgate.store.db import Store

    with Store(cwd / "c.db") as store:
        _, items = draw_audit(store, run_id, 3 * JUDGED, seed=11)
        for item in items:
            right = int(item["case_id"][1:]) < 4
            store.save_audit_label(run_id, item["case_id"], item["repeat"],
                                   "pass" if right else "fail", "pass" if right else "n/a",
                                   "Ada")


@pytest.mark.slow
def test_identical_repeats_do_not_narrow_the_agent_interval_and_the_plan_counts_them(
    certified: Path, loopback: Loopback, callgate_exe: str, cli_env: dict,  # noqa: F811
    tmp_path: Path
) -> None:
    exe, env = callgate_exe, cli_env
    _suite(tmp_path / "suite")
    once = _release(loopback, exe, env, tmp_path, certified, "once", 1)
    thrice = _release(loopback, exe, env, tmp_path, certified, "thrice", 3)
    plan = run(exe, env, tmp_path, "judge", "plan", "--run", str(thrice), "--width", "20",
               "--estimand", "agent", "--db", "c.db")
    assert plan.returncode == 0, plan.stderr
    assert "repeats' design effect 3.00" in plan.stdout
    ses = {}
    for run_id in (once, thrice):
        _audit_in_full(tmp_path, run_id)
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
