"""A release made under a `--faults` plan (docs/faults.md) merged from its shards: the store
keeps the plan (runs.fault_plan), so the merge reads the shards' recovery again with the plan's
after_fault and the merged release has the recovery figures and gate decision of the same
release made unsharded; shards made with other plans, or one live and one scored, are refused
(one line naming the shard file and the column, exit 2, nothing written). In process, on real
SQLite files, through the CLI's commands (typer's runner) and a live run against the loopback
model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from fault_model import RetryingModel
from live_runs import candidate, settings
from loopback import Loopback
from multiturn import STATE, env_suite, mt_case, turns
from typer.testing import CliRunner

from callgate.cli.main import app
from callgate.errors import CallgateError
from callgate.gating.release import gate_release
from callgate.merging.merge import merge_stores
from callgate.running.run import run_live
from callgate.store.db import Store
from callgate.suites.fault_runs import with_fault_plan
from callgate.suites.shard import Shard, shard_of
from callgate.suites.suite import load_suite

IDS = [f"a{i}" for i in range(6)]
TRAJECTORY = {"type": "trajectory", "mode": "superset", "calls": [{"tool": "lookup_order"}]}
PLAN = {"seed": 0, "faults": [{"tool": "lookup_order", "kind": "timeout", "calls": [1]}],
        "after_fault": {"retries": 1, "no_success_claim": True}}
NOISE = ("cost_usd", "latency_p50_ms", "latency_p95_ms")


def _suite_dir(tmp: Path) -> Path:
    """Cases that state no faults and no after_fault: the plan gives both."""
    assert {shard_of(case_id, 2) for case_id in IDS} == {1, 2}
    return env_suite(tmp / "shop", [mt_case(case_id, TRAJECTORY, state=STATE)
                                    for case_id in IDS])


def _line(case_id: str, repeat: int, retried: bool) -> dict[str, Any]:
    lookup = [("lookup_order", {"order_id": "ord_1"})]
    made = [lookup, lookup] if retried else [lookup]
    final = "ord_1 is pending." if retried else "Done: ord_1 is all set."
    return {**turns(case_id, *made, final, repeat=repeat),
            "faults": [{"tool": "lookup_order", "call": 0, "kind": "timeout"}]}


def _answers(tmp: Path, release: str) -> Path:
    """r0 always recovers; r1 in some repeats of some cases (the shares clustered by case)."""
    path = tmp / f"{release}.jsonl"
    path.write_text("".join(
        json.dumps(_line(case_id, r, release == "r0" or (i + r) % 3 != 0 or i == 0)) + "\n"
        for i, case_id in enumerate(IDS) for r in range(3)))
    return path


def _plan(tmp: Path, name: str = "faults.json", **changes: Any) -> Path:
    path = tmp / name
    path.write_text(json.dumps({**PLAN, **changes}))
    return path


def _score(tmp: Path, db: Path, release: str, plan: Path, shard: str | None = None) -> None:
    args = ["score", str(tmp / "shop"), "-r", str(_answers(tmp, release)), "-m", "m",
            "--agent", "bot", "--release", release, "--db", str(db), "--faults", str(plan)]
    result = CliRunner().invoke(app, [*args, *(["--shard", shard] if shard else [])])
    assert result.exit_code == 0, result.output


def _merge(*stores: Path) -> Any:
    return CliRunner().invoke(app, ["merge", *map(str, stores)])


def _release(db: Path, release: str = "r1") -> tuple[dict[str, Any], Any]:
    with Store(db) as store:
        (run,) = [r for r in store.stored_runs("bot") if r.release == release]
        row = store.run(run.id)
    assert run.scores is not None and row is not None
    return {k: v for k, v in run.scores.items() if k not in NOISE}, row["fault_plan"]


def _gates(db: Path) -> list[dict[str, Any]]:
    out = []
    with Store(db) as store:
        for release in ("r0", "r1"):
            decision, _ = gate_release(store, "bot", release, recovery_max_drop=10.0)
            shown = decision.model_dump(mode="json")
            shown.pop("baseline_source", None)
            out.append(shown)
    return out


def test_a_scored_plan_made_release_merged_from_shards_recovers_as_unsharded(
        tmp_path: Path) -> None:
    """Fails on the old code: there the store kept no plan and the merge was refused
    (scores.recovery)."""
    _suite_dir(tmp_path)
    plan = _plan(tmp_path)
    whole, base = tmp_path / "whole.db", tmp_path / "base.db"
    for db in (whole, base):
        _score(tmp_path, db, "r0", plan)
    _score(tmp_path, whole, "r1", plan)
    shards = [tmp_path / f"shard{k}.db" for k in (1, 2)]
    for k, db in enumerate(shards, 1):
        _score(tmp_path, db, "r1", plan, f"{k}/2")
    merged = tmp_path / "merged.db"
    result = _merge(merged, base, *shards)
    assert result.exit_code == 0, result.output
    (mine, kept), (theirs, unsharded_plan) = _release(merged), _release(whole)
    assert kept == unsharded_plan and json.loads(kept)["plan"]["after_fault"]["retries"] == 1
    assert mine["recovery"] == theirs["recovery"]
    assert mine["recovery"]["timeout"]["n"] == 18
    assert mine["recovery"]["timeout"]["successes"] < 18  # r1 did not always recover
    assert mine == theirs
    gates = _gates(merged)
    assert gates == _gates(whole)
    assert gates[1]["outcome"] == "regression"  # recovery fell from r0's 100%


def test_a_live_plan_made_release_keeps_its_plan_and_merges_as_unsharded(
        tmp_path: Path) -> None:
    suite = with_fault_plan(load_suite(_suite_dir(tmp_path)), _plan(tmp_path))
    server = Loopback(default=RetryingModel(0.5, seed=3)).start()
    try:
        stores = {}
        for name, shard in (("whole", None), ("s1", Shard(index=1, count=2)),
                            ("s2", Shard(index=2, count=2))):
            server.default = RetryingModel(0.5, seed=3)  # the same answers each run
            stores[name] = tmp_path / f"{name}.db"
            with Store(stores[name]) as store:
                run_live(suite, candidate(server), store, release="r1",
                         settings=settings(repeats=3, shard=shard), environ={KEY_ENV: KEY})
    finally:
        server.stop()
    merged = tmp_path / "merged.db"
    merge_stores(merged, [stores["s1"], stores["s2"]])
    with Store(merged) as store:
        (run,) = store.stored_runs("cand")
        row = store.run(run.id)
    with Store(stores["whole"]) as store:
        (alone,) = store.stored_runs("cand")
        alone_row = store.run(alone.id)
    assert row is not None and alone_row is not None and run.scores and alone.scores
    assert row["fault_plan"] is not None and row["fault_plan"] == alone_row["fault_plan"]
    assert run.scores["recovery"] == alone.scores["recovery"]
    assert run.scores["recovery"]["timeout"]["n"] == 18


def test_shards_made_with_other_plans_are_refused(tmp_path: Path) -> None:
    _suite_dir(tmp_path)
    shards = [tmp_path / "shard1.db", tmp_path / "shard2.db"]
    _score(tmp_path, shards[0], "r1", _plan(tmp_path), "1/2")
    _score(tmp_path, shards[1], "r1", _plan(tmp_path, "other.json", after_fault={
        "retries": 2, "no_success_claim": True}), "2/2")
    merged = tmp_path / "merged.db"
    result = _merge(merged, *shards)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"{shards[1]}: " in lines[0], result.output
    assert "runs.fault_plan" in lines[0] and "same --faults plan" in lines[0]
    assert not merged.exists()


def test_a_shard_scored_from_a_file_and_one_run_live_are_refused(tmp_path: Path) -> None:
    suite_dir = _suite_dir(tmp_path)
    plan = _plan(tmp_path)
    live = tmp_path / "live.db"
    server = Loopback(default=RetryingModel(1.0)).start()
    try:
        with Store(live) as store:
            run_live(with_fault_plan(load_suite(suite_dir), plan), candidate(server), store,
                     release="r1", settings=settings(shard=Shard(index=1, count=2)),
                     environ={KEY_ENV: KEY})
    finally:
        server.stop()
    scored = tmp_path / "scored.db"
    result = CliRunner().invoke(app, [
        "score", str(suite_dir), "-r", str(_answers(tmp_path, "r1")), "-m",
        "openrouter/test/model", "--agent", "cand", "--release", "r1", "--db", str(scored),
        "--faults", str(plan), "--shard", "2/2"])
    assert result.exit_code == 0, result.output
    with pytest.raises(CallgateError) as refused:
        merge_stores(tmp_path / "merged.db", [live, scored])
    message = str(refused.value)
    assert message.startswith(f"{scored}: ") and "\n" not in message
    assert "runs.source" in message
    assert not (tmp_path / "merged.db").exists()


def test_a_kept_plan_that_is_not_its_print_is_refused(tmp_path: Path) -> None:
    _suite_dir(tmp_path)
    shard = tmp_path / "shard1.db"
    _score(tmp_path, shard, "r1", _plan(tmp_path), "1/2")
    with sqlite3.connect(shard) as conn:
        kept = json.loads(conn.execute("SELECT fault_plan FROM runs").fetchone()[0])
        kept["plan"]["seed"] = 7
        conn.execute("UPDATE runs SET fault_plan = ?", [json.dumps(kept)])
    conn.close()
    merged = tmp_path / "merged.db"
    result = _merge(merged, shard)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(shard) in lines[0] and "fault_plan" in lines[0], lines
    assert not merged.exists()


def test_a_shard_that_kept_no_plan_is_refused_as_before(tmp_path: Path) -> None:
    """A store upgraded from before runs.fault_plan holds NULL there: beside a shard that kept
    its plan, the plans differ; alone, its plan-made recovery is refused as it was."""
    _suite_dir(tmp_path)
    plan = _plan(tmp_path)
    shards = [tmp_path / "shard1.db", tmp_path / "shard2.db"]
    for k, db in enumerate(shards, 1):
        _score(tmp_path, db, "r1", plan, f"{k}/2")
    with sqlite3.connect(shards[0]) as conn:  # what the upgrade leaves: the column, empty
        conn.execute("UPDATE runs SET fault_plan = NULL")
    conn.close()
    merged = tmp_path / "merged.db"
    result = _merge(merged, *shards)
    assert result.exit_code == 2
    (refusal,) = result.output.strip().splitlines()
    assert f"{shards[1]}: " in refusal and "runs.fault_plan (fault plan) plan " in refusal
    assert "differs from none" in refusal
    with sqlite3.connect(shards[1]) as conn:
        conn.execute("UPDATE runs SET fault_plan = NULL")
    conn.close()
    result = _merge(merged, *shards)
    assert result.exit_code == 2
    (refusal,) = result.output.strip().splitlines()
    assert f"{shards[0]}: " in refusal and "scores.recovery" in refusal
    assert not merged.exists()
