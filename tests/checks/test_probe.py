"""The probe (checks/probe.py) on constructed cases: weak ones (a do-nothing agent passes, the
oracle fails, a perturbation does not fail) are listed with their reason, strong ones are not;
the gate warns about them; `suite check --probe` prints them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from factories import TOOLS, line, message, tool_call, write_lines
from multiturn import STATE, env_suite, mt_case, plain_suite

from callgate.checks.probe import probe_suite
from callgate.gating.release import gate_release
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

CALLGATE = str(Path(sys.executable).with_name("callgate"))


def calls(*expected: tuple[str, dict[str, Any]], mode: str = "strict") -> dict[str, Any]:
    return {"type": "calls", "mode": mode,
            "calls": [{"tool": name, "args": args} for name, args in expected]}


STRONG = [
    mt_case("lookup", calls(("lookup_order", {"order_id": "ord_1"}))),
    mt_case("hours", {"type": "no_call"}),
    mt_case("parallel", calls(("lookup_order", {"order_id": "ord_1"}),
                              ("track_shipment", {"order_id": "ord_1"}), mode="unordered")),
    mt_case("cancel", calls(("cancel_order", {"order_id": "ord_1", "reason": "duplicate"}))),
    mt_case("either", {"type": "alternatives", "alternatives": [
        [{"tool": "lookup_order", "args": {"order_id": "ord_1"}}],
        [{"tool": "track_shipment", "args": {"order_id": {"regex": "^ord_1$"}}}]]}),
]
WEAK = [
    # any call is right: one junk call passes
    mt_case("anything", {"type": "any_call"}),
    # BFCL-style: no answer can meet the key (marked so); its oracle fails
    mt_case("unmeetable", calls(("lookup_order", {"order_id": "ord_1"})),
            never_right="the answer key names an order that does not exist"),
    # subset: calls left out are allowed, so dropping one still passes
    mt_case("subset", calls(("lookup_order", {"order_id": "ord_1"}),
                            ("track_shipment", {"order_id": "ord_1"}), mode="subset")),
    # a matcher that takes any string: the key argument cannot fail
    mt_case("any-order", calls(("lookup_order", {"order_id": {"regex": "."}}))),
]


def findings(report: Any) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for finding in report.weak:
        out.setdefault(finding.case_id, []).append((finding.probe, finding.reason))
    return out


def test_weak_cases_are_listed_with_their_reason_and_strong_ones_are_not(tmp_path: Path
                                                                         ) -> None:
    report = probe_suite(load_suite(plain_suite(tmp_path / "s", [*STRONG, *WEAK])))
    found = findings(report)
    assert sorted(found) == ["any-order", "anything", "subset", "unmeetable"]
    assert found["anything"] == [("do-nothing", "one junk call passes (expectation any_call: "
                                  "any call is right, one to a tool not offered too)")]
    assert found["unmeetable"] == [("oracle", "its oracle fails: no answer can be right here: "
                                    "the answer key names an order that does not exist")]
    assert found["subset"] == [("perturbation", "dropping the last of 2 calls (track_shipment) "
                                "still passes (mode subset: calls left out are allowed)")]
    assert found["any-order"] == [("perturbation", "lookup_order.order_id accepts every other "
                                   "value tried: this key argument cannot fail")]
    assert report.not_probed == () and report.answers > 8 * len(STRONG)


def test_a_perturbation_of_each_kind_fails_a_strong_case(tmp_path: Path) -> None:
    """The strong cases are not listed because each perturbation was tried and failed: the
    made-up answers are real answers, checked by the real checks."""
    from callgate.checks.probe import CaseProbe

    suite = load_suite(plain_suite(tmp_path / "s", STRONG))
    probing = CaseProbe(suite, suite.cases["parallel"])
    [(_, oracle)] = probing.oracles()
    labels = [label for label, _ in probing._perturbations(oracle)]
    assert labels == ["calling cancel_order instead of lookup_order",
                      'lookup_order.order_id changed from "ord_1" to "ord_2"',
                      "lookup_order without its required order_id",
                      "dropping the last of 2 calls (track_shipment)"]
    assert all(not probing.answer(plan).right_arguments
               for _, plan in probing._perturbations(oracle))
    assert probing.answer(oracle).right_arguments


def test_multi_turn_and_final_state_cases(tmp_path: Path) -> None:
    cancel = {"type": "final_state", "calls": [
        {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]}
    look = {"type": "final_state", "calls": [{"tool": "lookup_order",
                                              "args": {"order_id": "ord_1"}}]}
    trajectory = {"type": "trajectory", "mode": "strict", "args": "key",
                  "per_tool": {"lookup_order": "ignore"},
                  "calls": [{"tool": "lookup_order", "args": {"order_id": "ord_2"}, "step": 0},
                            {"tool": "cancel_order",
                             "args": {"order_id": "ord_2", "reason": "other"}, "step": 1}]}
    two_turns = mt_case("two-turns", {"type": "final_state", "per_turn": [
        [{"tool": "lookup_order", "args": {"order_id": "ord_2"}}],
        [{"tool": "cancel_order", "args": {"order_id": "ord_2", "reason": "other"}}]]},
        state=STATE, user_turns=[{"messages": [{"role": "user", "content": "yes, cancel"}]}])
    suite = load_suite(env_suite(tmp_path / "e", [
        mt_case("cancel", cancel, state=STATE), mt_case("look", look, state=STATE),
        mt_case("look-then-cancel", trajectory, state=STATE), two_turns]))
    found = findings(probe_suite(suite))
    # a conversation that does nothing reaches the goal of "look" (nothing changes)
    assert found.pop("look") == [
        ("do-nothing", "no call passes: the reference calls leave the state as it was"),
        ("do-nothing", "a text answer passes: the reference calls leave the state as it was"),
        ("do-nothing", "one junk call passes")]
    [(probe, reason)] = found.pop("look-then-cancel")
    assert probe == "perturbation" and reason.startswith("lookup_order.order_id changed")
    assert reason.endswith("(the trajectory's arguments rule for lookup_order is ignore: its "
                           "key arguments are never compared)")
    assert found == {}  # cancel and the two-turn conversation can gate


def test_judge_cases_and_values_not_found_are_not_probed(tmp_path: Path) -> None:
    tools = [*TOOLS, {"type": "function", "function": {
        "name": "ship", "parameters": {"type": "object", "required": ["code"], "properties": {
            "code": {"type": "string", "pattern": "^[0-9]{3}$", "maxLength": 2}}}}}]
    root = plain_suite(tmp_path / "s", [
        mt_case("judged", {"type": "judge", "rubric": "is it kind?"}),
        mt_case("ship", calls(("ship", {})))])
    (root / "tools.json").write_text(json.dumps(tools))
    report = probe_suite(load_suite(root))
    assert [(f.case_id, f.reason) for f in report.not_probed] == [
        ("judged", "decided by a judge"),
        ("ship", "found no value the schema of ship takes for a required argument")]
    assert report.weak == ()


def test_the_gate_warns_about_cases_that_cannot_gate(tmp_path: Path) -> None:
    suite = load_suite(plain_suite(tmp_path / "s", [*STRONG, *WEAK]))
    answers = write_lines(tmp_path / "a.jsonl", [
        line(case["id"], message(tool_call("lookup_order", {"order_id": "ord_1"})))
        for case in [*STRONG, *WEAK]])
    with Store(tmp_path / "callgate.db") as store:
        score_file(suite, answers, store, model="m", release="r1")
        assert sorted(store.suite_probe(suite.fingerprint) or {}) == [
            "any-order", "anything", "subset", "unmeetable"]
        decision, _ = gate_release(store, "m", "r1")
    [warning] = [w for w in decision.warnings if "cannot tell" in w]
    assert warning.startswith("4 case(s) of the suite cannot tell a good agent from a bad one "
                              "(callgate suite check --probe lists why): any-order "
                              "(perturbation: lookup_order.order_id accepts every other value")
    assert "; anything (do-nothing: one junk call passes" in warning


def test_a_strong_suite_gets_no_warning(tmp_path: Path) -> None:
    suite = load_suite(plain_suite(tmp_path / "s", STRONG))
    answers = write_lines(tmp_path / "a.jsonl", [line(c["id"], message(content="hi"))
                                                 for c in STRONG])
    with Store(tmp_path / "callgate.db") as store:
        score_file(suite, answers, store, model="m", release="r1")
        assert store.suite_probe(suite.fingerprint) == {}
        decision, _ = gate_release(store, "m", "r1")
    assert not [w for w in decision.warnings if "cannot tell" in w]


@pytest.mark.slow
def test_suite_check_probe_prints_them(tmp_path: Path) -> None:
    plain_suite(tmp_path / "s", [*STRONG, *WEAK])
    env = {k: v for k, v in os.environ.items() if k != "CALLGATE_DB"}
    done = subprocess.run([CALLGATE, "suite", "check", "--probe", str(tmp_path / "s")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(text.startswith("probe: 9 cases, 9 probed, ") and text.endswith(
        "4 case(s) cannot tell a good agent from a bad one:") for text in lines), done.stdout
    assert "  subset: perturbation: dropping the last of 2 calls (track_shipment) still " \
           "passes (mode subset: calls left out are allowed)" in lines
