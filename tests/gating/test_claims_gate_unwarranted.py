"""The unwarranted-call rate gated on its own (issue 37 point 1, docs/policies.md): shown with
its change in every decision, failing a release whose shares held only when suite.json asks
(`policies.unwarranted_calls.max_rise`, 0 for zero tolerance); a case cannot set it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factories import calls, case, line, message, tool_call, write_lines, write_suite

from callgate.errors import InputError
from callgate.gating.release import gate_release
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite

LOOKUP = calls(("lookup_order", {"order_id": "ord_1"}))
NO_CALL = {"type": "no_call", "answer": "ask"}


def suite(root: Path, gate: dict[str, Any] | None) -> Path:
    write_suite(root, [case(f"n{i}", NO_CALL) for i in range(4)] + [case("c", LOOKUP)])
    policies = {"unwarranted_calls": gate} if gate is not None else {}
    (root / "suite.json").write_text(json.dumps({"name": "s", "policies": policies}))
    return root


def release(wrong: set[str]) -> list[dict[str, Any]]:
    """Every no-call case answers in text but those in `wrong`, which call; `c` calls unless
    it is in `wrong`, so the shares can hold while the unwarranted calls rise."""
    call = tool_call("lookup_order", {"order_id": "ord_1"})
    out = [line(f"n{i}", message(call) if f"n{i}" in wrong else message(content="Which?"))
           for i in range(4)]
    return [*out, line("c", message(content="Hm.") if "c" in wrong else message(call))]


def gate(tmp_path: Path, root: Path, first: set[str] | None = None,
         second: set[str] | None = None) -> list[Any]:
    loaded = load_suite(root)
    out = []
    with Store(tmp_path / "c.db") as store:
        for name, wrong in (("r1", first or {"n0", "c"}), ("r2", second or {"n0", "n1"})):
            path = write_lines(tmp_path / f"{name}.jsonl", release(wrong))
            score_file(loaded, path, store, model="m", release=name)
            out.append(gate_release(store, "m", name, suite="s")[0])
    return out


def test_a_rise_fails_with_zero_tolerance_and_its_line_comes_first(tmp_path: Path) -> None:
    first, second = gate(tmp_path, suite(tmp_path / "s", {}), {"c"}, {"n0"})
    assert first.outcome == "first_release"
    assert [c.change for c in second.checks] == [0.0, 0.0]  # the shares held
    assert second.outcome == "regression" and second.exit_code == 1
    assert second.messages[0] == (
        "unwarranted calls: 0.0% → 25.0% (+25.0 points; 1 of 4 attempts of no-call cases "
        "called a tool; allowed rise 0) — UNWARRANTED CALLS ROSE")


def test_without_a_baseline_the_rate_is_compared_with_zero(tmp_path: Path) -> None:
    first, _ = gate(tmp_path, suite(tmp_path / "s", {}))
    assert first.outcome == "regression"  # as a declared policy's rate is
    assert first.messages[0].startswith("unwarranted calls: 0% (no baseline figure) → 25.0%")


def test_a_rise_within_max_rise_passes_and_shows_its_line(tmp_path: Path) -> None:
    first, second = gate(tmp_path, suite(tmp_path / "s", {"max_rise": 30}))
    assert first.outcome == "first_release" and second.outcome == "pass"
    assert any(m.startswith("unwarranted calls: 25.0% → 50.0% (+25.0 points")
               and m.endswith("allowed rise 30)") for m in second.messages)


def test_not_asked_it_is_in_the_decision_but_gates_nothing(tmp_path: Path) -> None:
    _, second = gate(tmp_path, suite(tmp_path / "s", None))
    assert second.unwarranted_calls is not None
    assert (second.unwarranted_calls.baseline, second.unwarranted_calls.current) == (25.0, 50.0)
    assert second.unwarranted_calls.max_rise is None and not second.unwarranted_calls.failed
    assert not any(m.startswith("unwarranted calls") for m in second.messages)


def test_a_case_cannot_set_the_gate(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [
        case("n", NO_CALL, policies={"unwarranted_calls": {"max_rise": 1}})])
    with pytest.raises(InputError) as raised:
        load_suite(root)
    assert raised.value.line == 1 and raised.value.field == "policies.unwarranted_calls"
