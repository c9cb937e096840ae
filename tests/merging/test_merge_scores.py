"""A merged release's scores equal the unsharded release's, in process: the policies its suite
declares (a policy no attempt broke included, with the suite's max_rise) and the figures its
suite gates on (suite.json gate.figures) come through a merge of shard stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factories import calls, case, line, message, tool_call, write_lines, write_suite

from callgate.merging.merge import merge_stores
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.shard import Shard, shard_of
from callgate.suites.suite import load_suite


def _suite(root: Path) -> Path:
    write_suite(root, [case(f"c{i}", calls(("lookup_order", {"order_id": f"ord_{i}"})))
                       for i in range(8)])
    (root / "suite.json").write_text(json.dumps({
        "name": "s", "gate": {"figures": ["right_tool"]},
        "policies": {"forbidden_tools": ["track_shipment"], "max_calls": 1, "max_rise": 1.5,
                     "unwarranted_calls": {"max_rise": 2.0}}}))
    return root


def _lines() -> list[dict[str, Any]]:
    out = []
    for i in range(8):
        made = [tool_call("lookup_order", {"order_id": f"ord_{i}"})]
        if i == 3:  # breaks max_calls only: forbidden_tools is declared and held
            made.append(tool_call("lookup_order", {"order_id": "ord_9"}, "call_2"))
        out.append(line(f"c{i}", message(*made)))
    return out


def _scores(db: Path) -> dict[str, Any]:
    with Store(db) as store:
        (run,) = store.stored_runs("bot")
    assert run.scores is not None
    return {k: v for k, v in run.scores.items() if k not in ("cost_usd", "latency_p50_ms",
                                                             "latency_p95_ms")}


def test_a_merged_release_keeps_its_declared_policies_and_gated_figures(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path / "suite"))
    lines = _lines()
    whole = tmp_path / "whole.db"
    with Store(whole) as store:
        score_file(suite, write_lines(tmp_path / "all.jsonl", lines), store, model="m",
                   release="r1", agent="bot")
    shards = []
    for index in (1, 2):
        mine = [x for x in lines if shard_of(x["case_id"], 2) == index]
        db = tmp_path / f"shard{index}.db"
        with Store(db) as store:
            score_file(suite, write_lines(tmp_path / f"s{index}.jsonl", mine), store,
                       model="m", release="r1", agent="bot", shard=Shard(index=index, count=2))
        shards.append(db)
    merge_stores(tmp_path / "merged.db", shards)

    merged, unsharded = _scores(tmp_path / "merged.db"), _scores(whole)
    assert merged["gate_figures"] == ["right_tool"]
    policies = merged["policies"]
    assert list(policies["by_policy"]) == ["forbidden_tools", "max_calls"]
    assert policies["max_rise"] == 1.5 and policies["by_policy"]["forbidden_tools"][
        "violations"] == 0
    assert merged["unwarranted_calls_max_rise"] == 2.0
    assert merged == unsharded
