"""History parses a run's stored scores once into the models scoring owns: stored content that
does not fit them is refused in one line naming the run and the field (it was a KeyError, an
internal error, before)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from factories import calls, case, line, message, tool_call, write_lines, write_suite
from stores import legacy_store

from callgate.errors import CallgateError
from callgate.report.history import history_document, history_rows
from callgate.scoring.pipeline import score_file
from callgate.store.db import Store
from callgate.suites.suite import load_suite


def stored_release(tmp_path: Path) -> Path:
    db = tmp_path / "c.db"
    suite = load_suite(write_suite(tmp_path / "suite", [
        case("ord", calls(("lookup_order", {"order_id": "ord_7281"}))),
    ], name="orders"))
    answers = [line("ord", message(tool_call("lookup_order", {"order_id": "ord_7281"})))]
    with Store(db) as store:
        score_file(suite, write_lines(tmp_path / "r.jsonl", answers), store, model="m",
                   release="r1", agent="bot")
    return db


def rewrite_scores(db: Path, change: Any) -> None:
    """The stored scores document changed in place, as a hand-edited or damaged store has it."""
    conn = sqlite3.connect(db)
    ((text,),) = conn.execute("SELECT scores FROM runs").fetchall()
    scores = json.loads(text)
    change(scores)
    conn.execute("UPDATE runs SET scores = ?", [json.dumps(scores)])
    conn.commit()
    conn.close()


def test_history_reads_the_stored_figures_as_the_model(tmp_path: Path) -> None:
    db = stored_release(tmp_path)
    with Store(db) as store:
        (row,) = history_rows(store.stored_runs("bot"))
    assert row.figures.right_tool.pct == 100.0 and row.figures.scored == 1
    assert row.estimator == "checks"


def test_history_json_gives_an_older_runs_figures_as_it_stored_them(tmp_path: Path) -> None:
    db = legacy_store(tmp_path / "old.db")  # stored before a Share had design_effect, icc
    with Store(db) as store:
        (run,) = store.stored_runs("agent")
        (row,) = history_rows([run])
    assert run.scores is not None
    (shown,) = history_document("agent", [row])["releases"]
    assert shown["figures"] == run.scores["figures"]
    assert "design_effect" not in shown["figures"]["right_tool"]
    assert row.figures.right_tool.design_effect == 1.0  # read at its default


def test_stored_figures_that_do_not_fit_are_refused_naming_run_and_field(tmp_path: Path) -> None:
    db = stored_release(tmp_path)
    rewrite_scores(db, lambda s: s["figures"]["right_tool"].pop("pct"))
    with Store(db) as store, pytest.raises(CallgateError) as refused:
        history_rows(store.stored_runs("bot"))
    assert str(refused.value) == "run 1 (r1): scores.figures.right_tool.pct: Field required"


def test_stored_judged_shares_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    db = stored_release(tmp_path)
    rewrite_scores(db, lambda s: s.update(judged={"n": 1, "tool_choice": {"raw": "most"}}))
    with Store(db) as store, pytest.raises(CallgateError) as refused:
        history_rows(store.stored_runs("bot"))
    assert str(refused.value).startswith("run 1 (r1): scores.judged.tool_choice.raw: ")


@pytest.mark.slow
def test_the_history_command_exits_2_with_one_line(tmp_path: Path, callgate_exe: str,
                                                   cli_env: dict[str, str]) -> None:
    db = stored_release(tmp_path)
    rewrite_scores(db, lambda s: s["figures"].pop("scored"))
    done = subprocess.run([callgate_exe, "history", "--agent", "bot", "--db", str(db)],
                          env=cli_env, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "error: run 1 (r1): scores.figures.scored: Field required"
