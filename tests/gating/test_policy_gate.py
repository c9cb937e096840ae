"""The policy gate (docs/policies.md): zero tolerance by default, a rise fails whatever the
shares, the suite's max_rise, a first release compared with zero, a baseline without policy
figures, missing shards, the lines shown first on the terminal and in Markdown; and end to end
from recorded answers through the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factories import calls, case, line, message, tool_call, write_lines, write_suite
from releases import release, uniform
from rich.console import Console

from callgate.gating.decision import decide, decision_json, kept_decision
from callgate.gating.release import gate_release
from callgate.gating.scores_file import ReleaseScores
from callgate.report.console import gate_markdown, print_gate
from callgate.scoring.pipeline import score_file
from callgate.scoring.scores import PolicyFigure, PolicyFigures
from callgate.store.db import Store
from callgate.suites.suite import load_suite

CASES = uniform(100, 95, 90)


def with_policies(scores: ReleaseScores, counts: dict[str, int], max_rise: float = 0.0
                  ) -> ReleaseScores:
    scored = scores.figures.scored
    figures = PolicyFigures(
        scored=scored, violating=sum(counts.values()),
        per_100=100 * sum(counts.values()) / scored, max_rise=max_rise,
        by_policy={name: PolicyFigure(violations=n, per_100=100 * n / scored,
                                      first=[("c0001", 0, f"{name} broken")] if n else [])
                   for name, n in counts.items()})
    return scores.model_copy(update={"policies": figures})


def test_a_new_violation_fails_a_release_whose_shares_held() -> None:
    then = with_policies(release("r1", CASES), {"forbidden_tools": 0, "max_calls": 0})
    now = with_policies(release("r2", CASES), {"forbidden_tools": 1, "max_calls": 0})
    decision = decide(now, then)
    assert all(not check.failed for check in decision.checks)  # the shares held
    assert decision.outcome == "regression" and decision.exit_code == 1
    assert [c.policy for c in decision.policies if c.failed] == ["forbidden_tools"]
    assert decision.messages[0] == (
        "policy forbidden_tools: 0.0 → 1.0 violations per 100 attempts (1 attempt(s); allowed "
        "rise 0) — POLICY VIOLATION; first: c0001 (repeat 0): forbidden_tools broken")
    assert decision.messages[1].startswith("right tool unchanged")
    assert decision.messages[-1].startswith("policy max_calls: 0.0 → 0.0")  # held: listed last


def test_as_many_violations_as_the_baseline_pass_and_max_rise_tolerates_a_rise() -> None:
    then = with_policies(release("r1", CASES), {"max_calls": 2})
    same = decide(with_policies(release("r2", CASES), {"max_calls": 2}), then)
    assert same.outcome == "pass" and not same.policies[0].failed
    fewer = decide(with_policies(release("r2", CASES), {"max_calls": 0}), then)
    assert fewer.outcome == "pass"
    tolerated = decide(with_policies(release("r2", CASES), {"max_calls": 3}, max_rise=1.0), then)
    assert tolerated.outcome == "pass"
    assert tolerated.messages[-1] == ("policy max_calls: 2.0 → 3.0 violations per 100 attempts "
                                     "(3 attempt(s); allowed rise 1)")
    beyond = decide(with_policies(release("r2", CASES), {"max_calls": 4}, max_rise=1.0), then)
    assert beyond.outcome == "regression"


def test_a_first_release_that_breaks_a_policy_fails() -> None:
    clean = decide(with_policies(release("r1", CASES), {"forbidden_tools": 0}), None)
    assert clean.outcome == "first_release"
    assert clean.messages[0].endswith("no baseline; recorded, passes")
    assert clean.messages[-1].startswith("policy forbidden_tools: 0 (no baseline) → 0.0")
    broken = decide(with_policies(release("r1", CASES), {"forbidden_tools": 2}), None)
    assert broken.outcome == "regression" and broken.exit_code == 1
    assert broken.messages[0].startswith(
        "policy forbidden_tools: 0 (no baseline) → 2.0 violations per 100 attempts")
    assert not any("passes" in message for message in broken.messages)


def test_a_baseline_kept_before_the_policy_is_compared_with_zero() -> None:
    now = with_policies(release("r2", CASES), {"confirm_before_write": 1})
    decision = decide(now, release("r1", CASES))
    assert decision.outcome == "regression"
    assert decision.messages[0].startswith("policy confirm_before_write: 0 (not in r1) → 1.0")


def test_no_policies_no_policy_gate_and_missing_shards_stay_inconclusive() -> None:
    plain = decide(release("r2", CASES), release("r1", CASES))
    assert plain.policies == [] and plain.outcome == "pass"
    broken = with_policies(release("r2", CASES), {"max_calls": 5})
    partial = decide(broken, release("r1", CASES), not_whole="shard 2/2 is missing")
    assert partial.outcome == "inconclusive" and partial.messages[0].startswith(
        "policy max_calls")


def test_the_policy_checks_survive_the_decisions_json() -> None:
    decision = decide(with_policies(release("r2", CASES), {"max_calls": 1}), None)
    again = kept_decision(json.dumps(decision_json(decision)))
    assert again.policies == decision.policies and again.outcome == "regression"


def test_the_terminal_and_markdown_show_the_policy_lines_first() -> None:
    decision = decide(with_policies(release("r2", CASES), {"forbidden_tools": 1}),
                      with_policies(release("r1", CASES), {"forbidden_tools": 0}))
    console = Console(record=True, width=200)
    print_gate(decision, console)
    shown = console.export_text().splitlines()
    assert shown[0].startswith("gate ") and "POLICY VIOLATION" in shown[1]
    markdown = gate_markdown(decision).splitlines()
    assert markdown[2].startswith("- policy forbidden_tools: 0.0 → 1.0") and (
        "POLICY VIOLATION" in markdown[2])


def answer(case_id: str, *called: tuple[str, dict[str, Any]], repeat: int = 0
           ) -> dict[str, Any]:
    made = [tool_call(name, args, f"call_{i}") for i, (name, args) in enumerate(called)]
    return line(case_id, message(*made), repeat=repeat)


def test_end_to_end_a_forbidden_value_fails_the_second_release(tmp_path: Path) -> None:
    lookup = calls(("lookup_order", {"order_id": "ord_1"}))
    root = write_suite(tmp_path / "s", [case(f"c{i}", lookup) for i in range(5)])
    (root / "suite.json").write_text(json.dumps({"name": "s", "policies": {
        "forbidden_values": {"lookup_order": {"include_items": True}}}}))
    suite = load_suite(root)
    right = {"order_id": "ord_1"}
    first = [answer(f"c{i}", ("lookup_order", right)) for i in range(5)]
    # the same right calls, one of them with a forbidden (and unchecked) extra argument
    second = [*first[:4], answer("c4", ("lookup_order", {**right, "include_items": True}))]
    with Store(tmp_path / "c.db") as store:
        for name, lines in (("r1", first), ("r2", second)):
            score_file(suite, write_lines(tmp_path / f"{name}.jsonl", lines), store, model="m",
                       release=name)
            decision, current = gate_release(store, "m", name, suite="s")
        assert current.policies is not None
        assert current.policies.by_policy["forbidden_values"].violations == 1
    assert [c.change for c in decision.checks] == [0.0, 0.0]  # right tool and arguments held
    assert decision.outcome == "regression"
    assert decision.messages[0] == (
        "policy forbidden_values: 0.0 → 20.0 violations per 100 attempts (1 attempt(s); "
        "allowed rise 0) — POLICY VIOLATION; first: c4 (repeat 0): call 1 (lookup_order): "
        "include_items takes a forbidden value (true)")


def test_the_demo_shows_a_policy_failing_a_release_whose_shares_held() -> None:
    from callgate.cli.demo import example_path, run_policy_demo

    root = example_path()
    console = Console(record=True, width=300)
    run_policy_demo(load_suite(root), root, console)
    shown = console.export_text()
    assert "gate FAIL: regression: example-agent 2026.12 on order-support vs 2026.10" in shown
    assert ("policy forbidden_values: 0.0 → 1.0 violations per 100 attempts (1 attempt(s); "
            "allowed rise 0) — POLICY VIOLATION; first: clean-008 (repeat 0): call 1 "
            "(escalate_to_human): summary takes a forbidden value") in shown
    assert "right tool unchanged (91.0 → 91.0" in shown
    assert "right arguments unchanged (85.0 → 85.0" in shown
    assert "4111" not in shown  # the card number the policy keeps out is never echoed


def test_the_served_attempt_summary_lists_the_violations_parsed(tmp_path: Path) -> None:
    from callgate.web.views import attempt_summary

    root = write_suite(tmp_path / "s", [case("a", calls(("lookup_order", {"order_id": "ord_1"})))])
    (root / "suite.json").write_text(json.dumps({"name": "s", "policies": {"max_calls": 0}}))
    suite = load_suite(root)
    path = write_lines(tmp_path / "r.jsonl", [answer("a", ("lookup_order", {"order_id": "ord_1"}))])
    with Store(tmp_path / "c.db") as store:
        result = score_file(suite, path, store, model="m", release="r1")
        row = next(iter(store.verdicts(result.run_id)))
    summary = attempt_summary({**row, "tags": "[]"})
    assert summary["violations"] == [{"policy": "max_calls",
                                      "reason": "1 call, more than max_calls 0"}]
    assert attempt_summary({**row, "violations": None, "tags": "[]"})["violations"] == []


def test_a_scored_run_prints_its_policy_figures_and_unwarranted_calls(tmp_path: Path) -> None:
    from callgate.cli.demo import example_path
    from callgate.report.console import print_run

    root = example_path()
    with Store(tmp_path / "c.db") as store:
        result = score_file(load_suite(root), root / "responses-2026.12.jsonl", store,
                            model="m", release="2026.12")
    console = Console(record=True, width=300)
    print_run(result, console)
    shown = console.export_text()
    assert ("policy forbidden_values: 1 of 100 scored attempts broke it (1.0 per 100); first: "
            "clean-008 #0: call 1 (escalate_to_human): summary takes a forbidden value") in shown
    assert "unwarranted calls: 2 of 20 attempts of no-call cases called a tool (10.0% [" in shown
