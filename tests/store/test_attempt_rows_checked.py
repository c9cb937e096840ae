"""Store.add_attempts checks the run its rows name once per batch, inside the batch's
transaction, instead of SQLite checking each row's foreign key: a run another process deleted
meanwhile is still refused, nothing of the batch lands, and the connection's foreign keys are
on again afterwards (deleting a run still takes its rows)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from callgate.cli.demo import example_path
from callgate.scoring.pipeline import score_file
from callgate.store.columns import RESPONSE_COLUMNS, VERDICT_COLUMNS
from callgate.store.db import Store
from callgate.store.opening import StoreError
from callgate.suites.suite import load_suite


def _rows(run_id: int, repeat: int) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    response = {name: None for name in RESPONSE_COLUMNS}
    response.update(run=run_id, case_id="clean-001", repeat=repeat, body="{}")
    verdict = {name: None for name in VERDICT_COLUMNS}
    verdict.update(run=run_id, case_id="clean-001", repeat=repeat, status="scored", calls=0,
                   right_tool=0, right_arguments=0)
    return ([tuple(response[name] for name in RESPONSE_COLUMNS)],
            [tuple(verdict[name] for name in VERDICT_COLUMNS)])


def _scored_store(tmp_path: Path) -> tuple[Path, int]:
    db = tmp_path / "store.db"
    suite = load_suite(example_path())
    with Store(db) as store:
        result = score_file(suite, example_path() / "responses-2026.10.jsonl", store,
                            model="m", release="r1")
    return db, result.run_id


def test_rows_of_a_run_deleted_by_another_process_are_refused_and_none_land(
        tmp_path: Path) -> None:
    db, run_id = _scored_store(tmp_path)
    with Store(db) as store:
        other = sqlite3.connect(db)
        other.execute("PRAGMA foreign_keys = ON")
        other.execute("DELETE FROM runs WHERE id = ?", [run_id])
        other.commit()
        other.close()
        responses, verdicts = _rows(run_id, 99)
        with pytest.raises(StoreError, match="FOREIGN KEY"):
            store.add_attempts(responses, verdicts, [(run_id, "lookup_order", "clean-001", 99)])
        for table in ("responses", "verdicts", "attempt_tools"):
            assert store.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table
        assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_rows_of_a_live_run_land_and_deleting_the_run_takes_them(tmp_path: Path) -> None:
    db, run_id = _scored_store(tmp_path)
    with Store(db) as store:
        responses, verdicts = _rows(run_id, 99)
        store.add_attempts(responses, verdicts, [(run_id, "lookup_order", "clean-001", 99)])
        assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert store.db.execute("SELECT COUNT(*) FROM verdicts WHERE repeat = 99"
                                ).fetchone()[0] == 1
        with store.atomic():
            store.db.execute("DELETE FROM runs WHERE id = ?", [run_id])
        for table in ("responses", "verdicts", "attempt_tools"):
            assert store.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table


def test_a_batch_naming_two_runs_one_missing_is_refused(tmp_path: Path) -> None:
    db, run_id = _scored_store(tmp_path)
    with Store(db) as store:
        responses, verdicts = _rows(run_id, 99)
        missing_responses, missing_verdicts = _rows(run_id + 1000, 1)
        with pytest.raises(StoreError, match="FOREIGN KEY"):
            store.add_attempts(responses + missing_responses, verdicts + missing_verdicts)
        assert store.db.execute("SELECT COUNT(*) FROM verdicts WHERE repeat = 99"
                                ).fetchone()[0] == 0
