"""End-to-end: the installed `callgate` CLI as a subprocess on a temporary database."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from factories import calls, case, line, message, tool_call, write_lines, write_suite

CALLGATE = str(Path(sys.executable).with_name("callgate"))


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("CALLGATE_DB", None)
    return subprocess.run([CALLGATE, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)


def table_counts(db: Path) -> dict[str, int]:
    if not db.exists():
        return {}
    with sqlite3.connect(db) as conn:
        names = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        return {n: conn.execute(f"select count(*) from [{n}]").fetchone()[0] for n in names}


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "suite", [
        case("ord", calls(("lookup_order", {"order_id": "ord_7281"}))),
        case("shipped", {"type": "no_call"}, "What does status shipped mean?"),
    ], name="orders")


def good_lines() -> list[dict]:
    return [
        line("ord", message(tool_call("lookup_order", {"order_id": "ord_7281"})), latency_ms=90),
        line("ord", message(tool_call("lookup_order", {"order_id": "ord_7282"})), repeat=1),
        line("shipped", {"role": "assistant", "content": "It left the warehouse."},
             finish_reason="stop"),
    ]


@pytest.mark.slow
def test_score_json_document(tmp_path: Path, suite_dir: Path) -> None:
    responses = write_lines(tmp_path / "r.jsonl", good_lines())
    db = tmp_path / "c.db"
    result = cli("score", str(suite_dir), "--responses", str(responses), "--model", "m",
                 "--release", "r1", "--db", str(db), "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["suite"]["name"] == "orders" and doc["release"] == "r1"
    fig = doc["scores"]["figures"]
    assert fig["right_tool"]["pct"] == pytest.approx(100.0)
    assert fig["right_arguments"]["pct"] == pytest.approx(200 / 3)
    wrong = [a for a in doc["attempts"] if a["arguments"] == "wrong_value"]
    assert len(wrong) == 1 and "ord_7282" in wrong[0]["arguments_reason"]
    counts = table_counts(db)
    assert counts["responses"] == 3 and counts["verdicts"] == 3 and counts["runs"] == 1


@pytest.mark.slow
def test_score_table_and_db_from_environment(tmp_path: Path, suite_dir: Path) -> None:
    responses = write_lines(tmp_path / "r.jsonl", good_lines())
    env_db = tmp_path / "env.db"
    env = {**os.environ, "CALLGATE_DB": str(env_db), "COLUMNS": "200"}
    result = subprocess.run([CALLGATE, "score", str(suite_dir), "-r", str(responses), "-m", "m",
                             "--release", "r1"], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "right tool" in result.stdout and "ord_7282" in result.stdout
    assert env_db.exists() and not (tmp_path / "callgate.db").exists()


@pytest.mark.slow
def test_bad_suite_exits_2_with_file_line_field(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "bad", [
        case("ord", calls(("lookup_order", {"order_id": "ord_1"}))),
        case("x", calls(("nope", {}))),
    ])
    db = tmp_path / "c.db"
    responses = write_lines(tmp_path / "r.jsonl", good_lines()[:1])
    result = cli("score", str(root), "-r", str(responses), "-m", "m", "--release", "r1",
                 "--db", str(db))
    assert result.returncode == 2
    assert f"{root / 'cases.jsonl'}:2: expect.calls[0].tool: unknown tool 'nope'" in result.stderr
    assert table_counts(db) == {}
    check = cli("suite", "check", str(root))
    assert check.returncode == 2 and "cases.jsonl:2" in check.stderr


@pytest.mark.slow
def test_bad_response_file_exits_2_and_leaves_store_unchanged(
    tmp_path: Path, suite_dir: Path
) -> None:
    db = tmp_path / "c.db"
    first = cli("score", str(suite_dir), "-r", str(write_lines(tmp_path / "a.jsonl",
                                                                   good_lines())),
                "-m", "m", "--release", "r1", "--db", str(db))
    assert first.returncode == 0, first.stderr
    before = table_counts(db)
    bad = [*good_lines(), {"case_id": "ord", "repeat": 2, "response": {"role": "assistant"},
                           "latency_ms": "slow"}]
    # Same release (would replace r1) and a new one: neither may leave a trace.
    for release in ("r1", "r2"):
        result = cli("score", str(suite_dir), "-r", str(write_lines(tmp_path / "b.jsonl", bad)),
                     "-m", "m", "--release", release, "--db", str(db))
        assert result.returncode == 2
        assert "b.jsonl:4: latency_ms:" in result.stderr
        assert table_counts(db) == before


@pytest.mark.slow
def test_missing_responses_file(tmp_path: Path, suite_dir: Path) -> None:
    result = cli("score", str(suite_dir), "-r", str(tmp_path / "none.jsonl"), "-m", "m",
                 "--release", "r1", "--db", str(tmp_path / "c.db"))
    assert result.returncode == 2 and "file not found" in result.stderr


@pytest.mark.slow
def test_suite_check_reports_coverage(suite_dir: Path) -> None:
    result = cli("suite", "check", str(suite_dir))
    assert result.returncode == 0
    assert "2 cases" in result.stdout and "no_call 1" in result.stdout


@pytest.mark.slow
def test_score_file_marks_a_run_not_a_result_as_callgate_score_does(
    tmp_path: Path, suite_dir: Path
) -> None:
    """The "not a result" rule is scoring's: the library's score_file leaves the gate record
    `callgate score` leaves (before, only the CLI wrote it, and the library's run stayed a
    candidate baseline)."""
    from callgate.scoring.pipeline import score_file
    from callgate.store.db import Store
    from callgate.suites.suite import load_suite

    cut = line("shipped", {"role": "assistant", "content": "It left"}, repeat=1,
               finish_reason="length")
    responses = write_lines(tmp_path / "r.jsonl", [*good_lines(), cut])  # 1 of 4 truncated
    by_cli = tmp_path / "cli.db"
    done = cli("score", str(suite_dir), "--responses", str(responses), "--model", "m",
               "--release", "r1", "--db", str(by_cli))
    assert done.returncode == 3, done.stderr
    assert "never used as a baseline." in done.stderr  # score asks no one again
    assert "asks the attempts" not in done.stderr
    by_library = tmp_path / "library.db"
    with Store(by_library) as store:
        result = score_file(load_suite(suite_dir), responses, store, model="m", release="r1")
    assert result.not_a_result is not None and result.not_a_result.decided_by == "score"

    def gate_records(db: Path) -> list[tuple[str, str, str]]:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT agent, release, gate FROM runs").fetchall()

    assert gate_records(by_library) == gate_records(by_cli)
    (_, _, gate), = gate_records(by_cli)
    assert json.loads(gate)["outcome"] == "inconclusive"
    assert json.loads(gate) == result.not_a_result.model_dump(mode="json")
