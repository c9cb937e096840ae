"""Typed store rows: a stored run comes back with its JSON columns parsed once, and the rows the
store writes are given by column name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import calls, case, line, message, tool_call, write_lines, write_suite

from callgate.report.history import history_rows
from callgate.scoring.pipeline import score_file
from callgate.store.columns import RESPONSE_COLUMNS
from callgate.store.db import Store
from callgate.store.gate_rows import recount_argument_failures
from callgate.store.rows import (
    StoredRun,
    calibration_item_row,
    judge_output_row,
    judgement_row,
    live_response_row,
    response_row,
    run_request_row,
    run_turn_row,
)
from callgate.suites.shard import Shard
from callgate.suites.suite import load_suite


def scored(tmp_path: Path, store: Store, *, truncated: bool = False, shard: Shard | None = None
           ) -> int:
    suite = load_suite(write_suite(tmp_path / "suite", [
        case("ord", calls(("lookup_order", {"order_id": "ord_7281"}))),
        case("shipped", {"type": "no_call"}, "What does status shipped mean?"),
    ], name="orders"))
    answers = [line("ord", message(tool_call("lookup_order", {"order_id": "ord_7281"}))),
               line("shipped", {"role": "assistant", "content": "It left"},
                    finish_reason="length" if truncated else "stop")]
    responses = write_lines(tmp_path / "r.jsonl", answers)
    return score_file(suite, responses, store, model="m", release="r1", agent="bot",
                      shard=shard).run_id


def test_a_stored_run_has_its_json_columns_parsed(tmp_path: Path) -> None:
    with Store(tmp_path / "c.db") as store:
        run_id = scored(tmp_path, store, truncated=True, shard=Shard(index=1, count=1))
        row, run = store.run(run_id), store.stored_run(run_id)
        assert row is not None and run is not None
        assert run.scores == json.loads(row["scores"]) and run.scores["attempts"] == 2
        assert run.gate is not None and run.gate == json.loads(row["gate"])
        assert run.gate["outcome"] == "inconclusive" and run.gate["decided_by"] == "score"
        assert run.shards == (1,) and run.shard_count == 1
        assert (run.id, run.agent, run.model, run.release, run.suite_name) == (
            run_id, "bot", "m", "r1", "orders")
        # The columns as stored, for the code that reads them so (gating, web).
        assert run == row and run["scores"] == row["scores"] and dict(run.row) == row
        assert [r.id for r in store.stored_runs("bot")] == [run_id]
        assert store.stored_run(run_id + 1) is None


def test_an_unsharded_run_without_a_gate_decision_has_none(tmp_path: Path) -> None:
    with Store(tmp_path / "c.db") as store:
        run = store.stored_run(scored(tmp_path, store))
    assert run is not None and run.gate is None and run.shards is None
    assert run.model_params is None and run.scores is not None


def test_history_reads_the_parsed_gate_and_scores(tmp_path: Path) -> None:
    with Store(tmp_path / "c.db") as store:
        scored(tmp_path, store, truncated=True)
        (row,) = history_rows(store.stored_runs("bot"))
    assert row.gate == "inconclusive" and row.attempts == 2 and row.agent == "bot"


def test_a_run_from_before_agents_is_filed_under_its_model() -> None:
    run = StoredRun({"id": 1, "model": "m", "agent": None, "scores": None, "gate": None,
                     "shards": None, "model_params": None})
    assert run.agent == "m" and run.scores is None


def test_a_response_row_is_written_by_column_name() -> None:
    columns = {name: f"<{name}>" for name in RESPONSE_COLUMNS}
    assert response_row(**columns) == tuple(f"<{name}>" for name in RESPONSE_COLUMNS)
    assert response_row(**dict(reversed(columns.items()))) == response_row(**columns)
    with pytest.raises(TypeError, match=r"missing \['body'\]"):
        response_row(**{k: v for k, v in columns.items() if k != "body"})
    with pytest.raises(TypeError, match=r"unknown \['bodie'\]"):
        response_row(**columns, bodie="x")


def test_every_writer_puts_each_named_value_in_its_column(tmp_path: Path) -> None:
    """The rows built by name land in the columns they name, whatever order they were given
    in: the builders and the store's INSERTs read the same column lists."""
    with Store(tmp_path / "c.db") as store:
        run = scored(tmp_path, store)
        live = dict(key="k1", model="m", case_id="ord", repeat=0, request="{}", line="{}",
                    error_kind=None, tries=1, created_at="2026-01-01T00:00:00")
        store.save_live_responses([live_response_row(**dict(reversed(live.items())))])
        request = dict(run=run, case_id="ord", repeat=0, cache_key="k1", cached=1)
        store.save_run_requests([run_request_row(**dict(reversed(request.items())))])
        turn = dict(run=run, case_id="ord", repeat=0, turn=1, cache_key="k1", cached=0)
        store.save_run_turns([run_turn_row(**dict(reversed(turn.items())))])
        judged = dict(run=run, case_id="ord", repeat=0, fingerprint="f", tool_choice="pass",
                      arguments="fail", reason="why")
        store.save_judgements([judgement_row(**dict(reversed(judged.items())))])
        output = dict(key="jk", fingerprint="f", output='{"x": 1}')
        store.save_judge_outputs([judge_output_row(**dict(reversed(output.items())))])
        item = dict(item_id="i1", split="test", label_tool_choice="pass",
                    label_arguments="n/a", body="{}")
        store.save_calibration_items("set.jsonl",
                                     [calibration_item_row(**dict(reversed(item.items())))])
        for table, written in (("live_responses", live), ("run_requests", request),
                               ("run_turns", turn), ("judgements", judged),
                               ("judge_cache", output), ("calibration_items", item)):
            (row,) = store.db.execute(
                f"SELECT {', '.join(written)} FROM {table} WHERE {next(iter(written))} = ?",
                [next(iter(written.values()))]).fetchall()
            assert dict(zip(written, row, strict=True)) == written, table
    with pytest.raises(TypeError, match=r"judgements row: missing \['reason'\]"):
        judgement_row(**{k: v for k, v in judged.items() if k != "reason"})


def test_argument_failures_kept_with_the_scores_are_counted_per_reason(tmp_path: Path) -> None:
    # Three attempts with the right tool and wrong arguments, two reasons: the rows kept when
    # the scores are written equal those counted from the verdicts (they were once grouped by
    # arguments verdict only, one reason standing for all).
    suite = load_suite(write_suite(tmp_path / "suite", [
        case("ord", calls(("lookup_order", {"order_id": "ord_7281"}))),
        case("other", calls(("lookup_order", {"order_id": "ord_1000"}))),
    ], name="orders"))
    answers = [line("ord", message(tool_call("lookup_order", {"order_id": "ord_1"}))),
               line("ord", message(tool_call("lookup_order", {"order_id": "ord_1"})), repeat=1),
               line("other", message(tool_call("lookup_order", {"order_id": "ord_2"})))]
    with Store(tmp_path / "c.db") as store:
        run_id = score_file(suite, write_lines(tmp_path / "r.jsonl", answers), store,
                            model="m", release="r1", agent="bot").run_id
        assert store.has_slice_tallies(run_id)
        kept = sorted(store.argument_failures(run_id))
        store.db.execute("DELETE FROM slice_calls WHERE run = ?", [run_id])
        counted = sorted(store.argument_failures(run_id))  # from the verdicts
        # A store written before the fix had one row for both reasons: m017 counts again.
        store.db.execute("INSERT INTO slice_calls (run, mark, first_tool, attempts, calls) "
                         "VALUES (?, '', '', 0, 0)", [run_id])
        store.db.execute("DELETE FROM argument_failures WHERE run = ?", [run_id])
        store.db.execute("INSERT INTO argument_failures (run, arguments, schema_kind, reason, "
                         "attempts) VALUES (?, 'wrong_value', NULL, 'one for all', 3)", [run_id])
        recount_argument_failures(store.db.conn)
        recounted = sorted(store.argument_failures(run_id))
    assert kept == counted == recounted
    assert sorted(attempts for *_, attempts in kept) == [1, 2]
    assert all("ord_7281" in reason for _, _, reason, n in kept if n == 2)
