"""The store under real CI use: many writers at once, and store files that are not what
callgate expects (issue 11, points 1 and 2).

Every case runs the installed CLI as a subprocess on a real SQLite file and asserts the exit
code, a single stderr line naming the store, no traceback, and that the file is unchanged
(its bytes, and its `iterdump()` where SQLite can read it)."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import lookup_case, no_call_case
from conftest import write_suite as write_live_suite
from factories import calls, case, line, message, tool_call, write_lines, write_suite
from loopback import Loopback
from stores import legacy_store

from callgate.store.db import Store
from callgate.store.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

CALLGATE = str(Path(sys.executable).with_name("callgate"))


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
        ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CALLGATE_")}
    base.update({"COLUMNS": "200", "NO_COLOR": "1"}, **(env or {}))
    return subprocess.run([CALLGATE, *args], capture_output=True, text=True, env=base,
                          cwd=cwd, timeout=120)


def dump_hash(db: Path) -> str | None:
    """SHA-256 of the database's iterdump(), read through a read-only connection; None when
    SQLite cannot read it."""
    try:
        conn = sqlite3.connect(f"{db.absolute().as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            text = "\n".join(conn.iterdump())
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def file_bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "suite", [
        case("ord", calls(("lookup_order", {"order_id": "ord_7281"}))),
        case("shipped", {"type": "no_call"}, "What does status shipped mean?"),
    ], name="orders")


@pytest.fixture
def responses(tmp_path: Path) -> Path:
    return write_lines(tmp_path / "r.jsonl", [
        line("ord", message(tool_call("lookup_order", {"order_id": "ord_7281"})), latency_ms=90),
        line("ord", message(tool_call("lookup_order", {"order_id": "ord_7282"})), repeat=1),
        line("shipped", {"role": "assistant", "content": "It left the warehouse."},
             finish_reason="stop"),
    ])


def callgate_store(path: Path) -> Path:
    """A real callgate store holding one suite (made in process), checkpointed into the file."""
    suite = write_suite(path.parent / "made-suite", [
        case("ord", calls(("lookup_order", {"order_id": "ord_7281"}))),
    ], name="made")
    from callgate.suites.suite import load_suite

    with Store(path) as store:
        store.save_suite(load_suite(suite))
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


# ----------------------------------------------------------------- store files callgate refuses


@dataclass(frozen=True)
class BadStore:
    name: str
    make: Callable[[Path], Path]  # builds the bad store under tmp_path, returns --db
    says: tuple[str, ...]  # words the error line must hold besides the path
    env: tuple[tuple[str, str], ...] = ()


def _not_sqlite(tmp: Path) -> Path:
    path = tmp / "notes.db"
    path.write_text("these are my notes, not a database\n" * 50)
    return path


def _truncated(tmp: Path) -> Path:
    path = callgate_store(tmp / "cut.db")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _header_only(tmp: Path) -> Path:
    path = callgate_store(tmp / "stub.db")
    path.write_bytes(path.read_bytes()[:40])
    return path


def _damaged(tmp: Path) -> Path:
    path = callgate_store(tmp / "damaged.db")
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xa5" * (4096 - 100)  # the schema page, after the header
    path.write_bytes(bytes(data))
    return path


def _folder(tmp: Path) -> Path:
    path = tmp / "store.db"
    path.mkdir()
    return path


def _missing_folder(tmp: Path) -> Path:
    return tmp / "no-such-folder" / "callgate.db"


def _read_only_file(tmp: Path) -> Path:
    path = callgate_store(tmp / "ro.db")
    path.chmod(0o444)
    return path


def _read_only_folder_existing(tmp: Path) -> Path:
    folder = tmp / "ro-folder"
    folder.mkdir()
    path = callgate_store(folder / "callgate.db")
    folder.chmod(0o555)
    return path


def _read_only_folder_new(tmp: Path) -> Path:
    folder = tmp / "ro-empty"
    folder.mkdir()
    folder.chmod(0o555)
    return folder / "callgate.db"


def _foreign(tmp: Path) -> Path:
    path = tmp / "app.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT);"
                       "INSERT INTO notes (text) VALUES ('keep me');")
    conn.close()
    return path


def _foreign_marked(tmp: Path) -> Path:
    path = tmp / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("PRAGMA application_id = 1234567; PRAGMA user_version = 7;"
                       "CREATE TABLE runs (id INTEGER PRIMARY KEY);")
    conn.close()
    return path


def _foreign_wal(tmp: Path) -> Path:
    path = tmp / "wal-app.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1);"
                       "PRAGMA wal_checkpoint(TRUNCATE);")
    conn.close()
    return path


def _foreign_with_some_callgate_tables(tmp: Path) -> Path:
    path = tmp / "half.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE runs (id INTEGER PRIMARY KEY); CREATE TABLE scores (x);")
    conn.close()
    return path


def _newer(tmp: Path) -> Path:
    path = callgate_store(tmp / "newer.db")
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    return path


def _newer_migration(tmp: Path) -> Path:
    path = callgate_store(tmp / "branch.db")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO _callgate_migrations VALUES ('m999_from_the_future', 'x')")
    conn.close()
    return path


BAD_STORES = [
    BadStore("not-sqlite", _not_sqlite, ("not a SQLite database", "--db")),
    BadStore("truncated", _truncated, ("truncated", "restore")),
    BadStore("header-only", _header_only, ("truncated",)),
    BadStore("damaged", _damaged, ("damaged", "restore")),
    BadStore("folder", _folder, ("is a folder", "--db")),
    BadStore("missing-folder", _missing_folder, ("does not exist",)),
    BadStore("read-only-file", _read_only_file, ("read-only", "chmod")),
    BadStore("read-only-folder", _read_only_folder_existing, ("read-only", "-wal")),
    BadStore("read-only-folder-new", _read_only_folder_new, ("read-only", "cannot be created")),
    BadStore("foreign", _foreign, ("another program", "notes", "new file")),
    BadStore("foreign-marked", _foreign_marked, ("another program", "application_id")),
    BadStore("foreign-wal", _foreign_wal, ("another program",)),
    BadStore("foreign-lookalike", _foreign_with_some_callgate_tables, ("another program",)),
    BadStore("newer-schema", _newer, ("newer callgate", "upgrade")),
    BadStore("newer-migration", _newer_migration, ("newer callgate",)),
    BadStore("bad-busy-timeout", lambda tmp: callgate_store(tmp / "ok.db"),
             ("CALLGATE_BUSY_TIMEOUT",), env=(("CALLGATE_BUSY_TIMEOUT", "soon"),)),
]


def assert_one_line_error(result: subprocess.CompletedProcess[str], path: Path,
                          says: tuple[str, ...]) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    lines = [text for text in result.stderr.splitlines() if text.strip()]
    assert len(lines) == 1, result.stderr
    if "CALLGATE_BUSY_TIMEOUT" not in says:
        assert str(path) in lines[0], lines[0]
    for word in says:
        assert word in lines[0], lines[0]


# `score` on every kind; the read commands on a few.
READ_CHECKED = ("not-sqlite", "truncated", "folder", "foreign", "newer-schema")
BAD_STORE_RUNS = [(bad, "score") for bad in BAD_STORES] + [
    (bad, command) for command in ("gate", "history") for bad in BAD_STORES
    if bad.name in READ_CHECKED
] + [(bad, "judge-show") for bad in BAD_STORES if bad.name in ("not-sqlite", "foreign")]


@pytest.mark.slow
@pytest.mark.parametrize(("bad", "command"), BAD_STORE_RUNS,
                         ids=[f"{command}-{bad.name}" for bad, command in BAD_STORE_RUNS])
def test_a_bad_store_exits_2_naming_it_and_stays_unchanged(
    bad: BadStore, command: str, tmp_path: Path, suite_dir: Path, responses: Path
) -> None:
    db = bad.make(tmp_path)
    before, dump_before = file_bytes(db), dump_hash(db)
    args = {
        "score": ["score", str(suite_dir), "-r", str(responses), "-m", "m", "--release", "r1"],
        "gate": ["gate", "-m", "m", "--release", "r1"],
        "history": ["history", "-m", "m"],
        "judge-show": ["judge", "show", "tool_choice"],
    }[command]
    try:
        result = cli(*args, "--db", str(db), env=dict(bad.env))
    finally:
        for folder in (db.parent, tmp_path / "ro-folder"):
            if folder.is_dir():
                folder.chmod(0o755)
    assert_one_line_error(result, db, bad.says)
    assert file_bytes(db) == before
    assert dump_hash(db) == dump_before
    if before is None and not db.is_dir():
        assert not db.exists()


@pytest.mark.slow
def test_a_store_locked_by_a_long_write_waits_then_names_the_holder(
    tmp_path: Path, suite_dir: Path, responses: Path
) -> None:
    db = callgate_store(tmp_path / "busy.db")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         f"conn = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
         "conn.execute('BEGIN IMMEDIATE')\n"
         "conn.execute(\"INSERT INTO suites (fingerprint, name, path, tools, loaded_at) "
         "VALUES ('x', 'x', 'x', '[]', 'x')\")\n"
         "print('holding', flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        dump_before = dump_hash(db)
        started = time.monotonic()
        result = cli("score", str(suite_dir), "-r", str(responses), "-m", "m", "--release", "r1",
                     "--db", str(db), env={"CALLGATE_BUSY_TIMEOUT": "1.5"})
        waited = time.monotonic() - started
        assert_one_line_error(result, db, ("locked", f"pid {holder.pid}", "wait",
                                           "CALLGATE_BUSY_TIMEOUT"))
        assert waited >= 1.5
        assert dump_hash(db) == dump_before
    finally:
        holder.kill()
        holder.wait()
    # Once the holder is gone, the same command goes through.
    result = cli("score", str(suite_dir), "-r", str(responses), "-m", "m", "--release", "r1",
                 "--db", str(db))
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_a_foreign_database_gets_no_tables(tmp_path: Path, suite_dir: Path,
                                           responses: Path) -> None:
    """Issue 11: the foreign database got 5 empty tables created in it before the error."""
    db = _foreign(tmp_path)
    for _ in range(2):
        cli("score", str(suite_dir), "-r", str(responses), "-m", "m", "--release", "r1",
            "--db", str(db))
    conn = sqlite3.connect(db)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    assert tables == ["notes"]


# ----------------------------------------------------------------- stores callgate accepts


def marks(db: Path) -> tuple[int, int, list[str]]:
    conn = sqlite3.connect(db)
    try:
        return (conn.execute("PRAGMA application_id").fetchone()[0],
                conn.execute("PRAGMA user_version").fetchone()[0],
                [r[0] for r in conn.execute("SELECT name FROM _callgate_migrations ORDER BY 1")])
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["new", "empty-file"])
def test_a_new_or_empty_file_becomes_a_marked_store_silently(
    kind: str, tmp_path: Path, suite_dir: Path, responses: Path
) -> None:
    db = tmp_path / "fresh.db"
    if kind == "empty-file":
        db.write_bytes(b"")
    result = cli("score", str(suite_dir), "-r", str(responses), "-m", "m", "--release", "r1",
                 "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    app_id, version, applied = marks(db)
    assert (app_id, version) == (APPLICATION_ID, SCHEMA_VERSION)
    assert len(applied) == SCHEMA_VERSION


@pytest.mark.slow
@pytest.mark.parametrize("unique_runs", [False, True], ids=["673342a", "one-run-per-release"])
def test_a_store_made_by_673342a_is_migrated_with_a_notice(
    unique_runs: bool, tmp_path: Path, suite_dir: Path, responses: Path
) -> None:
    db = legacy_store(tmp_path / "old.db", unique_runs=unique_runs)
    conn = sqlite3.connect(db)
    old_verdicts = conn.execute("SELECT * FROM verdicts ORDER BY case_id, repeat").fetchall()
    conn.close()
    result = cli("score", str(suite_dir), "-r", str(responses), "-m", "agent", "--release", "r2",
                 "--db", str(db))
    assert result.returncode == 0, result.stderr
    notice = [text for text in result.stderr.splitlines() if text.strip()]
    assert len(notice) == 1 and str(db) in notice[0] and "upgraded" in notice[0], notice
    assert "m002_runs_without_unique_release" in notice[0]
    app_id, version, applied = marks(db)
    assert (app_id, version, len(applied)) == (APPLICATION_ID, SCHEMA_VERSION, SCHEMA_VERSION)
    conn = sqlite3.connect(db)
    runs_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    kept = conn.execute("SELECT * FROM verdicts WHERE run = 1 ORDER BY case_id, repeat").fetchall()
    conn.close()
    assert "UNIQUE" not in runs_sql
    # the release 673342a stored is still there, row for row; the columns added since are NULL
    # (its first calls unknown: m014 added verdicts.first_tool; m016 verdicts.violations)
    assert [row[:len(old_verdicts[0])] for row in kept] == old_verdicts
    assert {row[len(old_verdicts[0]):] for row in kept} == {(None, None)}
    # The release from before and the new one, and the gate between them.
    history = cli("history", "-m", "agent", "--db", str(db))
    assert history.returncode == 0 and "r1" in history.stdout and "r2" in history.stdout
    assert "upgraded" not in history.stderr  # migrated once: no notice the second time
    gate = cli("gate", "-m", "agent", "--release", "r2", "--db", str(db))
    assert gate.returncode == 0, gate.stdout + gate.stderr


def test_the_migration_is_a_named_step_applied_once(tmp_path: Path) -> None:
    db = legacy_store(tmp_path / "old.db")
    notices: list[str] = []
    with Store(db, notify=notices.append):
        pass
    with Store(db, notify=notices.append):
        pass
    assert len(notices) == 1
    assert marks(db)[2] == [m.__name__ for m in MIGRATIONS]  # each applied, in order
    assert marks(db)[2][:11] == ["m001_tables", "m002_runs_without_unique_release",
                                 "m003_run_owners", "m004_runs_gate_column", "m005_audits",
                                 "m006_runs_shard_columns", "m007_audit_item_skips",
                                 "m008_runs_agent_columns", "m009_run_pacing",
                                 "m010_case_tallies", "m011_attempt_marks"]


# ----------------------------------------------------------------- concurrent writers

SCORE_RELEASES = ("s1", "s2", "s3", "s4")
CASES = 60


def concurrency_inputs(tmp_path: Path, loopback: Loopback) -> list[list[str]]:
    """The six commands: four scores of different releases, two live runs of one release."""
    cases = [lookup_case(f"c{i:03}", order=f"ord_{i}") if i % 4 else no_call_case(f"c{i:03}")
             for i in range(CASES)]
    suite = write_live_suite(tmp_path / "suite", cases)
    commands = []
    for index, release in enumerate(SCORE_RELEASES):
        lines = []
        for i in range(CASES):
            for repeat in range(3):
                right = (i + repeat + index) % 5 != 0
                if i % 4 == 0:
                    response = {"role": "assistant", "content": "9 to 5"} if right else message(
                        tool_call("lookup_order", {"order_id": "x"}))
                else:
                    order = f"ord_{i}" if right else "ord_wrong"
                    response = message(tool_call("lookup_order", {"order_id": order}))
                lines.append(line(f"c{i:03}", response, repeat=repeat))
        path = write_lines(tmp_path / f"{release}.jsonl", lines)
        commands.append(["score", str(suite), "-r", str(path), "-m", "rec", "--release", release])
    cfg = tmp_path / "callgate.toml"
    cfg.write_text("[[candidates]]\nname = \"live\"\nmodel = \"openrouter/test/model\"\n"
                   f"api_base = \"{loopback.base_url}\"\napi_key_env = \"CALLGATE_TEST_KEY\"\n")
    for _ in range(2):
        commands.append(["run", str(suite), "-m", "live", "-k", "2", "--release", "l1",
                         "--no-cache", "--config", str(cfg)])
    return commands


def figures(db: Path) -> dict[tuple[str, str], tuple]:
    with Store(db) as store:
        found = {}
        for run in store.runs():
            scores = json.loads(run["scores"])
            rows = store.db.execute("SELECT count(*) FROM verdicts WHERE run = ?",
                                    [run["id"]]).fetchone()[0]
            found[(run["model"], run["release"])] = (
                scores["figures"]["right_tool"]["pct"], scores["figures"]["right_arguments"]["pct"],
                scores["figures"]["calls_per_task"], scores["figures"]["scored"], rows)
        return found


@pytest.mark.slow
def test_four_scores_and_two_runs_at_once_all_succeed(
    tmp_path: Path, loopback: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    from callgate.cli.main import app

    commands = concurrency_inputs(tmp_path, loopback)
    base = {k: v for k, v in os.environ.items() if not k.startswith("CALLGATE_")}
    base.update(CALLGATE_TEST_KEY="sk-test-concurrency", COLUMNS="200", NO_COLOR="1")

    # The reference: the same six commands one after another (in this process: the CPU of
    # starting six more interpreters goes to the parallel rounds instead).
    monkeypatch.setenv("CALLGATE_TEST_KEY", "sk-test-concurrency")
    monkeypatch.delenv("CALLGATE_BUSY_TIMEOUT", raising=False)
    sequential = tmp_path / "sequential.db"
    for command in commands:
        app([*command, "--db", str(sequential)], standalone_mode=False)
    expected = figures(sequential)
    assert len(expected) == 5

    failures: list[str] = []
    started = time.monotonic()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for round_ in range(5):
        db = tmp_path / f"parallel-{round_}.db"
        processes = [subprocess.Popen([CALLGATE, *command, "--db", str(db)], env=base,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True)
                     for command in commands]
        for process, command in zip(processes, commands, strict=True):
            _, err = process.communicate(timeout=120)
            if process.returncode != 0:
                failures.append(f"round {round_} {command[0]} {command[-3]}: "
                                f"exit {process.returncode}: {err.strip()[-300:]}")
        if not failures:
            assert figures(db) == expected, f"round {round_}"
            with Store(db) as store:
                leftover = store.db.execute(
                    "SELECT count(*) FROM runs WHERE status != 'done'").fetchone()[0]
            assert leftover == 0
    wall = time.monotonic() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    print(f"concurrency: 5 rounds x {len(commands)} processes, {len(failures)} failures, "
          f"{wall:.1f} s wall, {cpu:.1f} CPU-s in the processes")
    assert failures == []


@pytest.mark.slow
def test_a_bad_line_after_committed_batches_leaves_the_store_unchanged(
    tmp_path: Path, suite_dir: Path, responses: Path
) -> None:
    """score writes its rows in short transactions (other writers go on meanwhile); a bad
    line after the first batches were committed still leaves no trace."""
    db = tmp_path / "c.db"
    assert cli("score", str(suite_dir), "-r", str(responses), "-m", "m", "--release", "r1",
               "--db", str(db)).returncode == 0
    dump_before = dump_hash(db)
    good = message(tool_call("lookup_order", {"order_id": "ord_7281"}))
    lines = [line("ord", good, repeat=repeat) for repeat in range(4500)]
    lines.append({"case_id": "ord", "repeat": 4500, "response": good, "latency_ms": "slow"})
    bad = write_lines(tmp_path / "big.jsonl", lines)
    for release in ("r1", "r2"):
        result = cli("score", str(suite_dir), "-r", str(bad), "-m", "m", "--release", release,
                     "--db", str(db))
        assert result.returncode == 2 and "big.jsonl:4501: latency_ms" in result.stderr
        assert dump_hash(db) == dump_before


def _suite_for_runs(tmp_path: Path):
    from callgate.suites.suite import load_suite

    return load_suite(write_suite(tmp_path / "runs-suite", [
        case("ord", calls(("lookup_order", {"order_id": "ord_7281"}))),
    ], name="runs"))


def _attempt_rows(run_id: int) -> tuple[list[tuple], list[tuple]]:
    response = (run_id, "ord", 0, "tool_calls", None, None, None, None, None, None, "{}")
    verdict = (run_id, "ord", 0, "scored", "right", "", "right", None, "", 1, 1, 1, "lookup_order",
               None)
    return [response], [verdict]


SCORES = {"figures": {"scored": 1, "right_tool": {"pct": 100.0},
                      "right_arguments": {"pct": 100.0}, "calls_per_task": 1.0}, "by_tag": {}}


def test_a_run_finishing_keeps_a_run_of_the_release_another_process_still_writes(
    tmp_path: Path
) -> None:
    """The FOREIGN KEY constraint failed of two parallel `callgate run`s: the first to finish
    deleted the other's run row (and, by cascade, its rows) while it was still writing."""
    suite = _suite_for_runs(tmp_path)
    db = tmp_path / "c.db"
    with Store(db) as first, Store(db) as second:
        first.save_suite(suite)
        slow = first.replace_run(suite, "m", "r1", "live", "test")
        fast = second.replace_run(suite, "m", "r1", "live", "test")
        second.add_attempts(*_attempt_rows(fast))
        second.finish_run(fast, SCORES)
        first.add_attempts(*_attempt_rows(slow))  # its run row is still there
        first.finish_run(slow, SCORES)
        assert [run["id"] for run in first.runs()] == [fast]  # the newest run id wins
        assert first.db.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 2


def test_a_run_left_running_by_a_dead_process_is_removed_by_the_next_finish(
    tmp_path: Path
) -> None:
    suite = _suite_for_runs(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with Store(tmp_path / "c.db") as store:
        store.save_suite(suite)
        killed = store.replace_run(suite, "m", "r1", "live", "test")
        store.add_attempts(*_attempt_rows(killed))
        with store.atomic():
            store.db.execute("UPDATE run_owners SET pid = ? WHERE run = ?", [dead.pid, killed])
        later = store.replace_run(suite, "m", "r1", "live", "test")
        store.finish_run(later, SCORES)
        assert [row[0] for row in store.db.execute("SELECT id FROM runs")] == [later]
        assert store.db.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 0


@pytest.mark.slow
def test_a_full_disk_mid_score_is_a_store_error_and_leaves_the_store_unchanged(
    tmp_path: Path, suite_dir: Path, responses: Path
) -> None:
    """SQLite's "database or disk is full" in the middle of a score is the store's trouble,
    said in one line naming it (exit 2 through the CLI), not an internal error; the rows
    already written go with the run."""
    from callgate.scoring.pipeline import score_file
    from callgate.store.db import StoreError
    from callgate.suites.suite import load_suite

    db = tmp_path / "c.db"
    assert cli("score", str(suite_dir), "-r", str(responses), "-m", "m", "--release", "r1",
               "--db", str(db)).returncode == 0
    dump_before = dump_hash(db)
    good = message(tool_call("lookup_order", {"order_id": "ord_7281"}))
    big = write_lines(tmp_path / "big.jsonl",
                      [line("ord", good, repeat=repeat) for repeat in range(6000)])
    with Store(db) as store:
        pages = store.db.conn.execute("PRAGMA page_count").fetchone()[0]
        # The file may grow by a few pages, not by the thousands the new rows need: "full".
        store.db.conn.execute(f"PRAGMA max_page_count = {pages + 8}")
        with pytest.raises(StoreError) as raised:
            score_file(load_suite(suite_dir), big, store, model="m", release="r2")
    assert str(raised.value).startswith(f"{db}: ") and "full" in str(raised.value)
    assert "\n" not in str(raised.value)
    assert dump_hash(db) == dump_before


def test_a_store_migrated_by_another_process_mid_look_is_read_from_one_snapshot(
    tmp_path: Path,
) -> None:
    """A migration another process commits between the reads of a look at the file must not
    show its tables without its marks (the look then took the new store for another
    program's database; seen once in CI with six writers on a new file)."""
    from callgate.store.opening import inspect_store

    db = tmp_path / "racing.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("CREATE TABLE first (x)")

    class CommitsBetweenReads(sqlite3.Connection):
        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
            cursor = super().execute(sql, *args)
            if sql == "PRAGMA application_id":
                writer.executescript(
                    "BEGIN; CREATE TABLE suites (x); CREATE TABLE cases (x); "
                    "CREATE TABLE runs (x); CREATE TABLE responses (x); "
                    "CREATE TABLE verdicts (x); CREATE TABLE scores (x); "
                    f"PRAGMA application_id = {APPLICATION_ID}; "
                    f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            return cursor

    reader = sqlite3.connect(db, factory=CommitsBetweenReads)
    try:
        found = inspect_store(reader)
        assert not reader.in_transaction
    finally:
        reader.close()
        writer.close()
    assert (found.application_id, found.user_version, found.tables) == (0, 0, {"first"})
