"""A run scored under a fault plan keeps the plan with the run row it is made with, in one
transaction (runs.fault_plan, what a merge reads its recovery again with), whether it is scored
through the CLI or the library's score_file; a run whose scoring fails leaves neither."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from multiturn import STATE, env_suite, mt_case, turns

from callgate.errors import CallgateError
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.fault_runs import with_fault_plan
from callgate.suites.suite import load_suite

PLAN = {"seed": 0, "faults": [{"tool": "lookup_order", "kind": "timeout", "calls": [1]}],
        "after_fault": {"retries": 1, "no_success_claim": True}}
TRAJECTORY = {"type": "trajectory", "mode": "superset", "calls": [{"tool": "lookup_order"}]}


def _scored(tmp_path: Path, lines: list[dict[str, object]]) -> tuple[Path, Path]:
    folder = env_suite(tmp_path / "shop", [mt_case("a0", TRAJECTORY, state=STATE)])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder, answers


def _line(repeat: int) -> dict[str, object]:
    lookup = [("lookup_order", {"order_id": "ord_1"})]
    return {**turns("a0", lookup, lookup, "ord_1 is pending.", repeat=repeat),
            "faults": [{"tool": "lookup_order", "call": 0, "kind": "timeout"}]}


def test_score_file_keeps_the_plan_with_the_run(tmp_path: Path) -> None:
    folder, answers = _scored(tmp_path, [_line(0), _line(1)])
    suite = with_fault_plan(load_suite(folder), tmp_path / "plan.json")
    with Store(tmp_path / "store.db") as store:
        result = score_file(suite, answers, store, model="m", release="r1")
        row = store.run(result.run_id)
    assert row is not None and row["status"] == "done"
    assert json.loads(row["fault_plan"])["plan"] == suite.faults.plan.model_dump(mode="json")


def test_a_failed_scoring_leaves_no_run_and_no_plan(tmp_path: Path) -> None:
    folder, answers = _scored(tmp_path, [_line(0), {"case_id": "nope", "repeat": 0}])
    suite = with_fault_plan(load_suite(folder), tmp_path / "plan.json")
    with Store(tmp_path / "store.db") as store:
        with pytest.raises(CallgateError):
            score_file(suite, answers, store, model="m", release="r1")
        assert store.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
