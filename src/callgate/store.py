"""The SQLite store (sqlite-utils): suites, cases, runs, responses, verdicts and scores.

Every prompt, response, verdict and score is a row, so any figure can be recomputed and browsed
later (e.g. with Datasette). WAL mode; writes are batched inside transactions.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import stat
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from callgate.errors import CallgateError
from callgate.suite import Suite, canonical_json, case_expect_types, case_tags

# A release may have several rows while it is re-run: the earlier finished run stays until the
# new one finishes, and the reads see only the newest finished row of a (suite, model, release).
RUNS_TABLE = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    suite_name TEXT NOT NULL,
    suite TEXT NOT NULL REFERENCES suites(fingerprint),
    model TEXT NOT NULL,
    release TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at TEXT NOT NULL,
    callgate_version TEXT NOT NULL,
    judge_fingerprint TEXT,
    status TEXT NOT NULL,
    scores TEXT
);
"""
# Stores made before: one row per release, enforced; rebuilt without the constraint on opening.
_OLD_UNIQUE = re.compile(r"UNIQUE\s*\(\s*suite_name\s*,\s*model\s*,\s*release\s*\)")
_NEWEST_DONE = (
    "status = 'done' AND id = (SELECT MAX(newer.id) FROM runs AS newer "
    "WHERE newer.suite_name = runs.suite_name AND newer.model = runs.model "
    "AND newer.release = runs.release AND newer.status = 'done')"
)

SCHEMA = RUNS_TABLE + """
CREATE TABLE IF NOT EXISTS suites (
    fingerprint TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    path TEXT,
    tools TEXT NOT NULL,
    loaded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cases (
    suite TEXT NOT NULL REFERENCES suites(fingerprint),
    case_id TEXT NOT NULL,
    expect_type TEXT NOT NULL,
    tags TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (suite, case_id)
);
CREATE TABLE IF NOT EXISTS responses (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    finish_reason TEXT,
    provider TEXT,
    cost REAL,
    latency_ms REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    error_kind TEXT,
    body TEXT NOT NULL,
    PRIMARY KEY (run, case_id, repeat)
);
CREATE TABLE IF NOT EXISTS verdicts (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    status TEXT NOT NULL,
    tool TEXT,
    tool_reason TEXT,
    arguments TEXT,
    schema_kind TEXT,
    arguments_reason TEXT,
    calls INTEGER NOT NULL,
    right_tool INTEGER NOT NULL,
    right_arguments INTEGER NOT NULL,
    PRIMARY KEY (run, case_id, repeat)
);
CREATE TABLE IF NOT EXISTS scores (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    scope TEXT NOT NULL,
    scored INTEGER NOT NULL,
    right_tool REAL,
    right_arguments REAL,
    calls_per_task REAL,
    PRIMARY KEY (run, scope)
);
CREATE INDEX IF NOT EXISTS runs_by_model ON runs (model, suite_name, created_at);
CREATE INDEX IF NOT EXISTS runs_by_release ON runs (suite_name, model, release);
CREATE TABLE IF NOT EXISTS live_responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    request TEXT NOT NULL,
    line TEXT NOT NULL,
    error_kind TEXT,
    tries INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS run_requests (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    cache_key TEXT NOT NULL,
    cached INTEGER NOT NULL,
    PRIMARY KEY (run, case_id, repeat)
);
CREATE TABLE IF NOT EXISTS run_turns (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    cache_key TEXT NOT NULL,
    cached INTEGER NOT NULL,
    PRIMARY KEY (run, case_id, repeat, turn)
);
CREATE TABLE IF NOT EXISTS judge_cache (
    key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    output TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judgements (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    case_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    tool_choice TEXT NOT NULL,
    arguments TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (run, case_id, repeat)
);
CREATE TABLE IF NOT EXISTS calibration_items (
    set_name TEXT NOT NULL,
    item_id TEXT NOT NULL,
    split TEXT NOT NULL,
    label_tool_choice TEXT NOT NULL,
    label_arguments TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (set_name, item_id)
);
CREATE TABLE IF NOT EXISTS certificates (
    fingerprint TEXT NOT NULL,
    judge TEXT NOT NULL,
    created_at TEXT NOT NULL,
    certified INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (fingerprint, created_at)
);
"""

# ----------------------------------------------------------------- marks and migrations
# A callgate store carries APPLICATION_ID (PRAGMA application_id) and its schema version
# (PRAGMA user_version = how many of MIGRATIONS it has had); the names of the migrations applied
# are rows of MIGRATIONS_TABLE_NAME. To change the schema, append a migration function below;
# never edit or rename one that has shipped. Tables added to SCHEMA are also created on opening.

APPLICATION_ID = 0x43474154  # "CGAT"
MIGRATIONS_TABLE_NAME = "_callgate_migrations"
MIGRATIONS_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE_NAME} "
    "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
)
# The tables every callgate store has had since the first release: an unmarked file holding
# them is a store made before the marks (e.g. by commit 673342a) and is upgraded.
CORE_TABLES = frozenset({"suites", "cases", "runs", "responses", "verdicts", "scores"})
BUSY_TIMEOUT_ENV = "CALLGATE_BUSY_TIMEOUT"
DEFAULT_BUSY_TIMEOUT = 60.0
SQLITE_HEADER = b"SQLite format 3\x00"

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = []


def migration(function: Migration) -> Migration:
    MIGRATIONS.append(function)
    return function


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]


@migration
def m001_tables(conn: sqlite3.Connection) -> None:
    """The tables and indexes of SCHEMA (a store made before the marks keeps its own)."""
    for statement in _statements(SCHEMA):
        conn.execute(statement)


@migration
def m002_runs_without_unique_release(conn: sqlite3.Connection) -> None:
    """Rebuild a `runs` table made with UNIQUE (suite_name, model, release), keeping every row
    and id, so a release can hold a finished run and the run replacing it."""
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
    ).fetchone()
    if row is None or not _OLD_UNIQUE.search(row[0]):
        return
    conn.execute(RUNS_TABLE.replace("IF NOT EXISTS runs", "runs_rebuilt"))
    columns = ("id, suite_name, suite, model, release, source, created_at, callgate_version, "
               "judge_fingerprint, status, scores")
    conn.execute(f"INSERT INTO runs_rebuilt ({columns}) SELECT {columns} FROM runs")
    conn.execute("DROP TABLE runs")
    conn.execute("ALTER TABLE runs_rebuilt RENAME TO runs")
    for statement in _statements(SCHEMA):
        if statement.startswith("CREATE INDEX") and " ON runs " in statement:
            conn.execute(statement)


@migration
def m003_run_owners(conn: sqlite3.Connection) -> None:
    """Which process writes a running run, so a finished run of the same release removes only
    the runs no live process is still writing."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS run_owners ("
        "run INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE, "
        "host TEXT NOT NULL, pid INTEGER NOT NULL)"
    )


@migration
def m004_runs_gate_column(conn: sqlite3.Connection) -> None:
    """runs.gate: the gate decision on the run (JSON, callgate.gate.GateRecord), NULL until
    one is taken. (An unmarked store made by a callgate that added it on opening has it.)"""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "gate" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN gate TEXT")


@migration
def m005_audits(conn: sqlite3.Connection) -> None:
    """Per-release audits (issue 16): a seeded uniform sample of a run's judged attempts, and
    the labels a person gave them, with who and when."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS audits ("
        "run INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE, "
        "seed INTEGER NOT NULL, population INTEGER NOT NULL, created_at TEXT NOT NULL)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS audit_items ("
        "run INTEGER NOT NULL REFERENCES audits(run) ON DELETE CASCADE, "
        "position INTEGER NOT NULL, case_id TEXT NOT NULL, repeat INTEGER NOT NULL, "
        "label_tool_choice TEXT, label_arguments TEXT, labeller TEXT, labelled_at TEXT, "
        "PRIMARY KEY (run, case_id, repeat))")


@migration
def m006_runs_shard_columns(conn: sqlite3.Connection) -> None:
    """runs.shard_count and runs.shards: a run made with --shard K/N holds shard_count N and
    shards "[K]"; a release merged from shard stores holds the JSON list of the shards it has.
    Both NULL for an unsharded run."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    if "shard_count" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN shard_count INTEGER")
    if "shards" not in columns:
        conn.execute("ALTER TABLE runs ADD COLUMN shards TEXT")


SCHEMA_VERSION = len(MIGRATIONS)
_SCHEMA_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA))


class StoreError(CallgateError):
    """The store file cannot be used: one line naming it and what to do (exit 2)."""


class MergeRefused(StoreError):
    """Two stores disagree on an attempt or on how a release was run: nothing is merged."""


class StoreLocked(StoreError):
    """Another process held the write lock for longer than the busy timeout."""


def busy_timeout() -> float:
    """Seconds a write waits for other writers: CALLGATE_BUSY_TIMEOUT, else 60."""
    raw = os.environ.get(BUSY_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_BUSY_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86_400:
        raise CallgateError(
            f"{BUSY_TIMEOUT_ENV}: {raw!r} is not a number of seconds between 0 and 86400"
        )
    return value


def _writer_alive(host: str | None, pid: int | None) -> bool:
    """Whether the process that created a running run may still be writing it (one on
    another host is assumed to be)."""
    if host is None or pid is None:
        return False  # made before owners were recorded, or its owner finished
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _shards_overlap(older: str | None, newer: str | None) -> bool:
    """Whether a finished run replaces an older run of its release: an unsharded run replaces
    and is replaced by any; a shard run replaces the runs holding one of its shards, so shards
    run one after another into one store all stay."""
    if older is None or newer is None:
        return True
    return bool(set(json.loads(older)) & set(json.loads(newer)))


def _print_notice(text: str) -> None:
    print(text, file=sys.stderr)


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "database is locked" in text or "busy" in text


def _writable(path: Path) -> bool:
    """Writable, and not marked read-only by its mode bits (which root would otherwise
    ignore: a store someone made read-only is not written to)."""
    return os.access(path, os.W_OK) and bool(stat.S_IMODE(path.stat().st_mode) & 0o222)


def check_store_file(path: Path) -> None:
    """Refuse, with one line naming the path and what to do, a path that cannot be a store:
    a folder, a missing or read-only folder, a file that is not SQLite or is cut short, a
    read-only file. Reads at most the file's first 100 bytes; writes nothing."""
    folder = path.parent
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a callgate store; pass --db a file path "
                         f"(e.g. {path / 'callgate.db'})")
    if not folder.is_dir():
        raise StoreError(f"{path}: folder {folder} does not exist; create it or pass --db a "
                         "path in an existing folder")
    if not path.exists():
        if not _writable(folder):
            raise StoreError(f"{path}: folder {folder} is read-only, so the store cannot be "
                             "created; make it writable or pass --db a path in a writable "
                             "folder")
        return
    if not path.is_file():
        raise StoreError(f"{path}: not a regular file; pass --db a callgate store or a new "
                         "file")
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read ({exc.strerror}); fix its permissions or "
                         "pass --db another file") from None
    size = path.stat().st_size
    if header:
        if not (header.startswith(SQLITE_HEADER) or SQLITE_HEADER.startswith(header)):
            raise StoreError(f"{path}: not a SQLite database (it lacks the SQLite header); "
                             "callgate leaves it alone: pass --db a callgate store or a new "
                             "file")
        page_size = int.from_bytes(header[16:18], "big") if len(header) >= 18 else 0
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big") if len(header) >= 32 else 0
        counted = len(header) == 100 and header[24:28] == header[92:96]
        if size < 100 or (counted and pages and size < pages * page_size):
            expected = f", its header says {pages * page_size}" if counted and pages else ""
            raise StoreError(f"{path}: truncated SQLite file ({size} bytes{expected}); restore "
                             "it from a copy or pass --db a new file")
    if not _writable(path):
        raise StoreError(f"{path}: the store is read-only; make it writable (chmod u+w) or "
                         "pass --db another file")
    if not _writable(folder):
        raise StoreError(f"{path}: folder {folder} is read-only, and SQLite must create "
                         f"{path.name}-wal and {path.name}-shm beside the store; make the "
                         "folder writable or pass --db a path in a writable folder")


class StoreState:
    """What an open SQLite file holds, read without writing to it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        self.user_version = conn.execute("PRAGMA user_version").fetchone()[0]
        self.tables = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%'"
            )
        }
        self.applied: set[str] = set()
        if MIGRATIONS_TABLE_NAME in self.tables:
            self.applied = {
                row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE_NAME}")
            }

    @property
    def marked(self) -> bool:
        return self.application_id == APPLICATION_ID

    @property
    def new(self) -> bool:
        return not self.marked and not self.tables

    @property
    def pending(self) -> bool:
        known = {m.__name__ for m in MIGRATIONS}
        return bool(known - self.applied) or not self.tables >= _SCHEMA_TABLES

    def refusal(self, path: Path) -> str | None:
        """Why callgate must not use this file, or None."""
        if self.marked:
            unknown = self.applied - {m.__name__ for m in MIGRATIONS}
            if self.user_version > SCHEMA_VERSION or unknown:
                return (f"{path}: made by a newer callgate (store schema {self.user_version}, "
                        f"this callgate knows {SCHEMA_VERSION}); upgrade callgate or pass "
                        "--db another file")
            return None
        unmarked = self.application_id == 0 and self.user_version == 0
        if unmarked and (self.new or self.tables >= CORE_TABLES):
            return None  # new, or a store made before the marks: migrated
        tables = ", ".join(sorted(self.tables)[:5]) + (", ..." if len(self.tables) > 5 else "")
        mark = f"application_id {self.application_id:#x}, " if self.application_id else ""
        return (f"{path}: another program's SQLite database ({mark}tables: {tables or 'none'}); "
                "callgate writes only to its own stores: pass --db a new file")


def inspect_store(conn: sqlite3.Connection) -> StoreState:
    return StoreState(conn)


def lock_holders(path: Path) -> str:
    """Who holds a write lock on the store (from /proc/locks on Linux): 'pid N (name)', or
    'another process' when that cannot be told."""
    wanted = set()
    for candidate in (path, path.with_name(path.name + "-shm")):
        try:
            info = candidate.stat()
        except OSError:
            continue
        wanted.add(f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}")
    holders: list[str] = []
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        lines = []
    for text in lines:
        fields = text.split()
        if len(fields) < 6 or "->" in fields or fields[3] != "WRITE":
            continue
        pid, device = fields[4], fields[5]
        if device not in wanted or not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            name = "?"
        entry = f"pid {pid} ({name})"
        if entry not in holders:
            holders.append(entry)
    return ", ".join(holders) if holders else "another process"


RESPONSE_COLUMNS = (
    "run",
    "case_id",
    "repeat",
    "finish_reason",
    "provider",
    "cost",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "error_kind",
    "body",
)
VERDICT_COLUMNS = (
    "run",
    "case_id",
    "repeat",
    "status",
    "tool",
    "tool_reason",
    "arguments",
    "schema_kind",
    "arguments_reason",
    "calls",
    "right_tool",
    "right_arguments",
)


# What `merge` copies: tables keyed by their content, and the rows under a run.
_MERGED_TABLES = ("suites", "cases", "live_responses", "judge_cache", "calibration_items",
                  "certificates")
_MERGED_RUN_TABLES = {
    "responses": RESPONSE_COLUMNS[1:],
    "judgements": ("case_id", "repeat", "fingerprint", "tool_choice", "arguments", "reason"),
    "run_requests": ("case_id", "repeat", "cache_key", "cached"),
    "run_turns": ("case_id", "repeat", "turn", "cache_key", "cached"),
}
_MERGE_CHUNK = 5000


def _union_shards(here: str | None, there: str | None) -> str | None:
    """The shards a run holds after merging (JSON list); None for an unsharded run."""
    if here is None or there is None:
        return here if there is None else there
    return json.dumps(sorted(set(json.loads(here)) | set(json.loads(there))))


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Store:
    """A callgate database. Use as a context manager, or call `close()`.

    Opening checks the file first: a path that is neither a callgate store nor an empty or new
    file is refused with a StoreError naming it, and nothing is written to it. An older
    callgate store is upgraded by the named MIGRATIONS, with a notice. Every write transaction
    starts with BEGIN IMMEDIATE and waits up to the busy timeout (CALLGATE_BUSY_TIMEOUT
    seconds) for other writers."""

    def __init__(
        self, path: Path | str, *, notify: Callable[[str], None] | None = None
    ) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout()
        self._notify = notify or _print_notice
        check_store_file(self.path)
        if self.path.stat().st_size if self.path.exists() else 0:
            self._refuse_foreign()
        conn = self._connect()
        self.db = Database(conn)
        try:
            self._open()
        except BaseException:
            conn.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        try:
            # isolation_level=None: no implicit (deferred) transactions; every write goes
            # through atomic(), which takes the write lock up front with BEGIN IMMEDIATE.
            conn = sqlite3.connect(
                str(self.path), timeout=self.busy_timeout, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot be opened ({exc}); pass --db another file"
                             ) from None
        return conn

    def _refuse_foreign(self) -> None:
        """Look at an existing file through a read-only connection (which never writes, nor
        checkpoints on closing) and refuse it unless it is a callgate store."""
        uri = self.path.absolute().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout)
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        try:
            refusal = inspect_store(conn).refusal(self.path)
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        finally:
            conn.close()
        if refusal:
            raise StoreError(refusal)

    def _open(self) -> None:
        try:
            found = inspect_store(self.db.conn)
            refusal = found.refusal(self.path)
            if refusal:
                raise StoreError(refusal)
            if found.pending:
                self._migrate()
            self.db.execute("PRAGMA foreign_keys = ON")
            self.db.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _migrate(self) -> None:
        """Apply the migrations this store lacks, in one write transaction (another process
        may be doing the same: the one that gets the lock second finds nothing left to do)."""
        conn = self.db.conn
        deadline = time.monotonic() + self.busy_timeout
        while conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            try:
                conn.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError as exc:  # another process is switching it too
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.02)
        # A table rebuild must not cascade deletes into the tables that refer to it.
        conn.execute("PRAGMA foreign_keys = OFF")
        with self.atomic():
            found = inspect_store(conn)
            refusal = found.refusal(self.path)
            if refusal:
                raise StoreError(refusal)
            conn.execute(MIGRATIONS_TABLE)
            applied = []
            for migration in MIGRATIONS:
                if migration.__name__ not in found.applied:
                    migration(conn)
                    conn.execute(
                        f"INSERT INTO {MIGRATIONS_TABLE_NAME} (name, applied_at) VALUES (?, ?)",
                        [migration.__name__, now()],
                    )
                    applied.append(migration.__name__)
            for statement in _statements(SCHEMA):  # tables added to SCHEMA since
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("PRAGMA foreign_keys = ON")
        if applied and not found.new:
            marked = "marked as a callgate store and " if not found.marked else ""
            self._notify(
                f"callgate: {self.path}: {marked}upgraded to store schema {SCHEMA_VERSION} "
                f"(migrations: {', '.join(applied)})"
            )

    def _error(self, exc: sqlite3.Error) -> StoreError:
        """A StoreError naming the store for an error SQLite reported on it."""
        text = str(exc)
        if _is_busy(exc):
            return StoreLocked(
                f"{self.path}: locked by another writer ({lock_holders(self.path)}) for "
                f"{self.busy_timeout:g} s; wait for it to finish and run again "
                f"({BUSY_TIMEOUT_ENV} sets how many seconds to wait)"
            )
        if "readonly" in text or "read-only" in text:
            return StoreError(f"{self.path}: the store cannot be written ({text}); make it and "
                              "its folder writable, or pass --db another file")
        if isinstance(exc, sqlite3.DatabaseError) and (
            "malformed" in text or "not a database" in text
        ):
            return StoreError(f"{self.path}: damaged SQLite file ({text}); restore it from a "
                              "copy or pass --db a new file")
        return StoreError(f"{self.path}: {text}; pass --db another file")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def atomic(self) -> Iterator[Database]:
        """A write transaction: BEGIN IMMEDIATE, so the write lock is taken (waiting up to the
        busy timeout) before anything is read; a savepoint inside an open transaction."""
        conn = self.db.conn
        if conn.in_transaction:
            with self.db.atomic():
                yield self.db
            return
        self._begin_immediate()
        try:
            yield self.db
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise self._error(exc) from None

    def _begin_immediate(self) -> None:
        """BEGIN IMMEDIATE, retried while SQLite says busy until the busy timeout has passed
        (SQLite's own busy handler waits inside each try; some busy states skip it)."""
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                self.db.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise self._error(exc) from None
                time.sleep(0.02)

    # ----------------------------------------------------------------- writes

    def save_suite(self, suite: Suite) -> bool:
        """Store the suite and its cases (idempotent: keyed by fingerprint). True when they
        were not stored before."""
        with self.atomic():
            if self.db["suites"].count_where("fingerprint = ?", [suite.fingerprint]):
                return False
            self.db["suites"].insert(
                {
                    "fingerprint": suite.fingerprint,
                    "name": suite.name,
                    "path": str(suite.path),
                    "tools": canonical_json(suite.raw_tools),
                    "loaded_at": now(),
                }
            )
            expect_types, tags = case_expect_types(suite.cases), case_tags(suite.cases)
            self.db["cases"].insert_all(
                {
                    "suite": suite.fingerprint,
                    "case_id": case_id,
                    "expect_type": expect_types[case_id],
                    "tags": json.dumps(list(tags[case_id])),
                    "body": canonical_json(raw),
                }
                for case_id, raw in suite.raw_cases.items()
            )
        return True

    def discard_suite_if_unused(self, fingerprint: str) -> None:
        """Delete a suite and its cases that no run refers to (after a run that failed)."""
        with self.atomic():
            if self.db["runs"].count_where("suite = ?", [fingerprint]):
                return
            self.db.execute("DELETE FROM cases WHERE suite = ?", [fingerprint])
            self.db.execute("DELETE FROM suites WHERE fingerprint = ?", [fingerprint])

    def replace_run(
        self,
        suite: Suite,
        model: str,
        release: str,
        source: str,
        version: str,
        judge_fingerprint: str | None = None,
        shard: tuple[int, int] | None = None,
    ) -> int:
        """Create the run row for (suite, model, release), with status "running"; `shard`
        is (K, N) for a run of shard K of N.

        An earlier run of the release is not dropped here: it stays, and stays the one that
        find_run() and runs() see, until this run finishes (finish_run with status "done").
        A re-scored release keeps its original creation time, so its place in the model's
        history (and so which release is the baseline of which) does not move."""
        with self.atomic():  # read, then write: under the write lock
            run_id = self._insert_run(suite, model, release, source, version,
                                      judge_fingerprint)
            if shard is not None:
                self.db.execute("UPDATE runs SET shard_count = ?, shards = ? WHERE id = ?",
                                [shard[1], json.dumps([shard[0]]), run_id])
            return run_id

    def _insert_run(
        self,
        suite: Suite,
        model: str,
        release: str,
        source: str,
        version: str,
        judge_fingerprint: str | None,
    ) -> int:
        earlier = self.db.execute(
            "SELECT MIN(created_at) FROM runs WHERE suite_name = ? AND model = ? AND release = ?",
            [suite.name, model, release],
        ).fetchone()[0]
        cursor = self.db.execute(
            "INSERT INTO runs (suite_name, suite, model, release, source, created_at, "
            "callgate_version, judge_fingerprint, status) VALUES (?,?,?,?,?,?,?,?,?)",
            [
                suite.name,
                suite.fingerprint,
                model,
                release,
                source,
                earlier or now(),
                version,
                judge_fingerprint,
                "running",
            ],
        )
        run_id = int(cursor.lastrowid)
        self.db.execute(
            "INSERT INTO run_owners (run, host, pid) VALUES (?, ?, ?)",
            [run_id, socket.gethostname(), os.getpid()],
        )
        return run_id

    def add_attempts(self, responses: list[tuple], verdicts: list[tuple]) -> None:
        """Insert a batch of response rows and verdict rows (tuples in *_COLUMNS order).

        One transaction per batch, or a savepoint inside the caller's transaction."""
        with self.atomic():
            self._insert_attempts(responses, verdicts)

    def _insert_attempts(self, responses: list[tuple], verdicts: list[tuple]) -> None:
        conn = self.db.conn
        conn.executemany(
            f"INSERT OR REPLACE INTO responses ({', '.join(RESPONSE_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(RESPONSE_COLUMNS))})",
            responses,
        )
        conn.executemany(
            f"INSERT OR REPLACE INTO verdicts ({', '.join(VERDICT_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(VERDICT_COLUMNS))})",
            verdicts,
        )

    def finish_run(self, run_id: int, scores: dict[str, Any], status: str = "done") -> None:
        """Write a run's scores and status. A run already marked "interrupted" stays so (its
        scores are partial). A run that ends "done" replaces the release's earlier rows, in the
        same transaction."""
        with self.atomic():
            self._write_scores(run_id, scores, status)
            row = self.run(run_id)
            if row is not None and row["status"] == "done":
                self._keep_refusal(run_id)
                earlier = self.db.execute(
                    "SELECT runs.id, runs.status, run_owners.host, run_owners.pid, runs.shards "
                    "FROM runs LEFT JOIN run_owners ON run_owners.run = runs.id "
                    "WHERE suite_name = ? AND model = ? AND release = ? AND id < ?",
                    [row["suite_name"], row["model"], row["release"], run_id],
                ).fetchall()
                # A run another live process is still writing stays: deleting it would pull
                # its rows from under that process (FOREIGN KEY constraint failed).
                stale = [[rid] for rid, status, host, pid, shards in earlier
                         if (status != "running" or not _writer_alive(host, pid))
                         and _shards_overlap(shards, row.get("shards"))]
                self.db.conn.executemany("DELETE FROM runs WHERE id = ?", stale)
            self.db.execute("DELETE FROM run_owners WHERE run = ?", [run_id])

    def _keep_refusal(self, run_id: int) -> None:
        """A release re-scored after its gate refused it stays refused until gated again:
        otherwise re-scoring would silently turn a failed release into a baseline."""
        self.db.execute(
            "UPDATE runs SET gate = (SELECT older.gate FROM runs AS older "
            "WHERE older.suite_name = runs.suite_name AND older.model = runs.model "
            "AND older.release = runs.release AND older.id < runs.id AND older.gate IS NOT NULL "
            "ORDER BY older.id DESC LIMIT 1) WHERE id = ? AND gate IS NULL", [run_id])
        self.db.execute(
            "UPDATE runs SET gate = NULL WHERE id = ? AND (json_extract(gate, '$.released') "
            "OR json_extract(gate, '$.decided_by') != 'gate')", [run_id])

    def discard_run(self, run_id: int) -> None:
        """Delete a run that did not finish and every row under it."""
        with self.atomic():
            self.db.execute("DELETE FROM runs WHERE id = ?", [run_id])

    def _write_scores(self, run_id: int, scores: dict[str, Any], status: str) -> None:
        self.db.execute(
            "UPDATE runs SET scores = ?, "
            "status = CASE WHEN status = 'interrupted' THEN status ELSE ? END WHERE id = ?",
            [json.dumps(scores, sort_keys=True), status, run_id],
        )
        figures = [("all", scores["figures"])] + [
            (f"tag:{tag}", fig) for tag, fig in scores["by_tag"].items()
        ]
        self.db.execute("DELETE FROM scores WHERE run = ?", [run_id])
        self.db["scores"].insert_all(
            {
                "run": run_id,
                "scope": scope,
                "scored": fig["scored"],
                "right_tool": fig["right_tool"]["pct"],
                "right_arguments": fig["right_arguments"]["pct"],
                "calls_per_task": fig["calls_per_task"],
            }
            for scope, fig in figures
        )

    # ----------------------------------------------------------------- merging stores
    # `callgate merge` copies other stores into this one inside one transaction (the caller's
    # atomic()): the tables keyed by content (suites, cases, cached answers and judge outputs,
    # calibration items, certificates) row for row, ignoring rows already here; the finished
    # runs into the run of their release here (made if missing), attempt by attempt.

    def merge_from(self, source: Store) -> dict[int, list[dict[str, Any]]]:
        """Copy `source` into this store; the runs here that got new attempts, each with the
        source runs merged into it. Raises MergeRefused, naming the case, on a conflict."""
        for table in _MERGED_TABLES:
            self._merge_table(source, table)
        self._merge_person_labels(source)
        touched: dict[int, list[dict[str, Any]]] = {}
        for run in source.db.query(
                "SELECT * FROM runs WHERE status = 'done' ORDER BY created_at, id"):
            target, added = self._merge_run(source, run)
            if added:
                touched.setdefault(target, []).append(run)
        return touched

    def _columns(self, table: str) -> list[str]:
        return [row[1] for row in self.db.execute(f"PRAGMA table_info({table})")]

    def _merge_table(self, source: Store, table: str) -> None:
        columns = [c for c in source._columns(table) if c in set(self._columns(table))]
        names = ", ".join(columns)
        rows = source.db.execute(f"SELECT {names} FROM {table}")
        insert = (f"INSERT OR IGNORE INTO {table} ({names}) "
                  f"VALUES ({', '.join('?' * len(columns))})")
        while chunk := rows.fetchmany(_MERGE_CHUNK):
            self.db.conn.executemany(insert, chunk)

    def _merge_person_labels(self, source: Store) -> None:
        """People's labels (serve's calibration sessions), each copied once: a row is the same
        label when set, item, labeller, time and the line it wrote are."""
        if not source.db["person_labels"].exists():
            return
        self._person_labels_table()
        columns = ("set_name", "item_id", "labeller", "tool_choice", "arguments", "note",
                   "created_at", "line")
        names = ", ".join(columns)
        for row in source.db.execute(f"SELECT {names} FROM person_labels ORDER BY id"):
            key = [row[0], row[1], row[2], row[6], row[7]]
            if self.db.execute(
                    "SELECT 1 FROM person_labels WHERE set_name = ? AND item_id = ? AND "
                    "labeller = ? AND created_at = ? AND line = ?", key).fetchone():
                continue
            self.db.execute(f"INSERT INTO person_labels ({names}) VALUES "
                            f"({', '.join('?' * len(columns))})", list(row))

    def _merge_run(self, source: Store, run: dict[str, Any]) -> tuple[int, bool]:
        """Merge one finished source run into its release here: (the run here, whether it got
        attempts it lacked)."""
        where = (f"release {run['release']!r} of model {run['model']!r} on suite "
                 f"{run['suite_name']!r}")
        target = self.find_run(run["suite_name"], run["model"], run["release"])
        if target is None:
            cursor = self.db.execute(
                "INSERT INTO runs (suite_name, suite, model, release, source, created_at, "
                "callgate_version, judge_fingerprint, status, shard_count, shards) "
                "VALUES (?,?,?,?,?,?,?,?,'done',?,?)",
                [run[c] for c in ("suite_name", "suite", "model", "release", "source",
                                  "created_at", "callgate_version", "judge_fingerprint",
                                  "shard_count", "shards")])
            target = self.run(int(cursor.lastrowid))
            assert target is not None
            created = True
        else:
            created = False
            for column, what in (("suite", "suite fingerprint"),
                                 ("judge_fingerprint", "judge fingerprint"),
                                 ("callgate_version", "callgate version"),
                                 ("shard_count", "number of shards")):
                if target[column] != run[column]:
                    there, here = (("none (unsharded)" if value is None else repr(value))
                                   for value in (run[column], target[column]))
                    raise MergeRefused(
                        f"{source.path}: {where}: {what} {there} differs from "
                        f"{here} in {self.path}; shards of one release must be "
                        "run on the same suite, judge and callgate with the same N")
        target_id = int(target["id"])
        added = self._merge_verdicts(source, int(run["id"]), target_id, where)
        for table, columns in _MERGED_RUN_TABLES.items():
            names = ", ".join(columns)
            rows = source.db.execute(
                f"SELECT ?, {names} FROM {table} WHERE run = ?", [target_id, run["id"]])
            insert = (f"INSERT OR IGNORE INTO {table} (run, {names}) "
                      f"VALUES (?, {', '.join('?' * len(columns))})")
            while chunk := rows.fetchmany(_MERGE_CHUNK):
                self.db.conn.executemany(insert, chunk)
        shards = _union_shards(target["shards"], run["shards"])
        if shards != target["shards"]:
            self.db.execute("UPDATE runs SET shards = ? WHERE id = ?", [shards, target_id])
        if added and not created:
            # Its figures change: a decision taken on the old ones no longer holds.
            self.db.execute("UPDATE runs SET gate = NULL WHERE id = ?", [target_id])
        return target_id, bool(added) or created

    def _merge_verdicts(self, source: Store, run_id: int, target_id: int, where: str) -> int:
        """Stage the source run's verdicts, refuse one that differs from the verdict of the same
        attempt here, and insert those not here; how many were inserted."""
        conn = self.db.conn
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS merge_verdicts "
                     f"({', '.join(VERDICT_COLUMNS[1:])}, PRIMARY KEY (case_id, repeat))")
        conn.execute("DELETE FROM temp.merge_verdicts")
        names = ", ".join(VERDICT_COLUMNS[1:])
        rows = source.db.execute(f"SELECT {names} FROM verdicts WHERE run = ?", [run_id])
        insert = (f"INSERT INTO temp.merge_verdicts ({names}) "
                  f"VALUES ({', '.join('?' * (len(VERDICT_COLUMNS) - 1))})")
        while chunk := rows.fetchmany(_MERGE_CHUNK):
            conn.executemany(insert, chunk)
        differs = " OR ".join(f"here.{c} IS NOT there.{c}" for c in VERDICT_COLUMNS[3:])
        clash = conn.execute(
            "SELECT there.case_id, there.repeat, here.tool, here.arguments, here.status, "
            "there.tool, there.arguments, there.status FROM temp.merge_verdicts AS there "
            "JOIN verdicts AS here ON here.run = ? AND here.case_id = there.case_id "
            f"AND here.repeat = there.repeat WHERE {differs} "
            "ORDER BY there.case_id, there.repeat LIMIT 1", [target_id]).fetchone()
        if clash is not None:
            case_id, repeat, *verdicts = clash
            here = "/".join(str(v) for v in verdicts[:3])
            there = "/".join(str(v) for v in verdicts[3:])
            raise MergeRefused(
                f"{source.path}: {where}: case {case_id!r} repeat {repeat} was scored "
                f"differently ({there} there, {here} in {self.path}); nothing was merged")
        cursor = conn.execute(
            f"INSERT INTO verdicts (run, {names}) SELECT ?, {names} "
            "FROM temp.merge_verdicts AS there WHERE NOT EXISTS (SELECT 1 FROM verdicts AS here "
            "WHERE here.run = ? AND here.case_id = there.case_id AND here.repeat = there.repeat)",
            [target_id, target_id])
        conn.execute("DELETE FROM temp.merge_verdicts")
        return cursor.rowcount

    def merged_attempts(self, run_id: int) -> Iterator[dict[str, Any]]:
        """A run's verdicts with what scoring reads of their responses and judgements, in case
        and repeat order: `judged_tool_choice` is set when the judge decided the attempt."""
        return self.db.query(
            "SELECT verdicts.*, responses.cost, responses.prompt_tokens, "
            "responses.completion_tokens, responses.latency_ms, responses.provider, "
            "judgements.tool_choice AS judged_tool_choice, "
            "judgements.arguments AS judged_arguments FROM verdicts "
            "LEFT JOIN responses USING (run, case_id, repeat) "
            "LEFT JOIN judgements USING (run, case_id, repeat) "
            "WHERE verdicts.run = ? ORDER BY verdicts.case_id, verdicts.repeat", [run_id])

    def case_tags_of(self, suite_fingerprint: str) -> dict[str, list[str]]:
        return {case_id: json.loads(tags) for case_id, tags in self.db.execute(
            "SELECT case_id, tags FROM cases WHERE suite = ?", [suite_fingerprint])}

    def write_merged_scores(self, run_id: int, scores: dict[str, Any]) -> None:
        """The scores of a merged run, computed again from its verdicts."""
        with self.atomic():
            self._write_scores(run_id, scores, "done")

    # ----------------------------------------------------------------- reads

    def run(self, run_id: int) -> dict[str, Any] | None:
        rows = list(self.db.query("SELECT * FROM runs WHERE id = ?", [run_id]))
        return rows[0] if rows else None

    def find_run(self, suite_name: str, model: str, release: str) -> dict[str, Any] | None:
        """The newest finished run of a release; None when it has none."""
        rows = list(
            self.db.query(
                "SELECT * FROM runs WHERE suite_name = ? AND model = ? AND release = ? "
                "AND status = 'done' ORDER BY id DESC LIMIT 1",
                [suite_name, model, release],
            )
        )
        return rows[0] if rows else None

    def runs(self, model: str | None = None, suite_name: str | None = None) -> list[dict[str, Any]]:
        """Finished runs, oldest first: the newest finished run of each release."""
        sql = f"SELECT * FROM runs WHERE {_NEWEST_DONE}"
        params: list[Any] = []
        if model is not None:
            sql += " AND model = ?"
            params.append(model)
        if suite_name is not None:
            sql += " AND suite_name = ?"
            params.append(suite_name)
        return list(self.db.query(sql + " ORDER BY created_at, id", params))

    def verdicts(self, run_id: int) -> Iterator[dict[str, Any]]:
        return self.db.query(
            "SELECT * FROM verdicts WHERE run = ? ORDER BY case_id, repeat", [run_id]
        )

    # ----------------------------------------------------------------- live runs
    # live_responses caches what a provider answered, keyed by SHA-256 of the request and the
    # repeat index; `line` is a recorded-response line (docs/formats.md), `request` the request
    # as sent, without secrets. A row with error_kind set records a failure, not an answer.

    def live_responses(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """Stored live responses for these cache keys: key -> row."""
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            rows = self.db.query(
                "SELECT key, case_id, repeat, line, error_kind FROM live_responses "
                f"WHERE key IN ({', '.join('?' * len(chunk))})",
                chunk,
            )
            found.update((row["key"], row) for row in rows)
        return found

    def save_live_responses(self, rows: list[tuple]) -> None:
        """Upsert (key, model, case_id, repeat, request, line, error_kind, tries, created_at)
        rows in one transaction. A failure never replaces a stored answer."""
        with self.atomic():
            self.db.conn.executemany(
                "INSERT INTO live_responses (key, model, case_id, repeat, request, line, "
                "error_kind, tries, created_at) VALUES (?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(key) DO UPDATE SET model = excluded.model, "
                "case_id = excluded.case_id, repeat = excluded.repeat, "
                "request = excluded.request, line = excluded.line, "
                "error_kind = excluded.error_kind, tries = excluded.tries, "
                "created_at = excluded.created_at "
                "WHERE excluded.error_kind IS NULL OR live_responses.error_kind IS NOT NULL",
                rows,
            )

    def save_run_requests(self, rows: list[tuple]) -> None:
        """Link a run's attempts to their cache keys: (run, case_id, repeat, cache_key, cached)."""
        with self.atomic():
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO run_requests (run, case_id, repeat, cache_key, cached) "
                "VALUES (?,?,?,?,?)",
                rows,
            )

    def save_run_turns(self, rows: list[tuple]) -> None:
        """Link the turns of a run's multi-turn attempts to the cache keys of their requests
        (live_responses): (run, case_id, repeat, turn, cache_key, cached)."""
        if not rows:
            return
        with self.atomic():
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO run_turns (run, case_id, repeat, turn, cache_key, cached) "
                "VALUES (?,?,?,?,?,?)",
                rows,
            )

    def set_run_gate(self, run_id: int, decision: str) -> None:
        """Record the gate decision on a run (JSON); the newest decision replaces the last."""
        with self.atomic():
            self.db.execute("UPDATE runs SET gate = ? WHERE id = ?", [decision, run_id])

    def set_run_status(self, run_id: int, status: str) -> None:
        with self.atomic():
            self.db.execute("UPDATE runs SET status = ? WHERE id = ?", [status, run_id])

    # ----------------------------------------------------------------- the judge

    def judge_outputs(self, keys: list[str]) -> dict[str, str]:
        """Cached judge outputs (JSON text) by cache key."""
        found: dict[str, str] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            rows = self.db.execute(
                f"SELECT key, output FROM judge_cache WHERE key IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            found.update(dict(rows))
        return found

    def save_judge_outputs(self, rows: list[tuple[str, str, str]]) -> None:
        """(key, fingerprint, output JSON) rows."""
        with self.atomic():
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO judge_cache (key, fingerprint, output, created_at) "
                "VALUES (?, ?, ?, ?)", [(*row, now()) for row in rows])

    def save_judgements(self, rows: list[tuple]) -> None:
        """(run, case_id, repeat, fingerprint, tool_choice, arguments, reason) rows."""
        with self.atomic():
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO judgements (run, case_id, repeat, fingerprint, "
                "tool_choice, arguments, reason) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def save_calibration_items(self, set_name: str, rows: list[tuple]) -> None:
        """Load a calibration set idempotently: (item_id, split, tool, arguments, body) rows
        replace what the set held, so a removed item leaves the store too."""
        with self.atomic():
            self.db.execute("DELETE FROM calibration_items WHERE set_name = ?", [set_name])
            self.db.conn.executemany(
                "INSERT INTO calibration_items (set_name, item_id, split, label_tool_choice, "
                "label_arguments, body) VALUES (?, ?, ?, ?, ?, ?)",
                [(set_name, *row) for row in rows])

    def save_certificate(self, fingerprint: str, judge: str, certified: bool, body: str) -> None:
        with self.atomic():
            self.db.execute(
                "INSERT OR REPLACE INTO certificates (fingerprint, judge, created_at, certified, "
                "body) VALUES (?, ?, ?, ?, ?)", [fingerprint, judge, now(), int(certified), body])

    def certificate(self, fingerprint: str) -> str | None:
        """The certificate of a fingerprint's newest calibration (JSON text), certified or
        not: a failed re-calibration voids an earlier success."""
        row = self.db.execute(
            "SELECT body FROM certificates WHERE fingerprint = ? "
            "ORDER BY created_at DESC, rowid DESC LIMIT 1", [fingerprint]).fetchone()
        return row[0] if row else None

    def calibration_labels(self, set_name: str) -> dict[str, str]:
        """The labels last loaded for a calibration set: item id -> "split tool/arguments"."""
        rows = self.db.execute(
            "SELECT item_id, split, label_tool_choice, label_arguments FROM calibration_items "
            "WHERE set_name = ?", [set_name]).fetchall()
        return {item: f"{split} {tool}/{arguments}" for item, split, tool, arguments in rows}

    def judgements(self, run_id: int) -> list[dict[str, Any]]:
        return list(self.db.query("SELECT * FROM judgements WHERE run = ? ORDER BY case_id, "
                                  "repeat", [run_id]))


    # ----------------------------------------------------------------- the web app (serve)
    # Reads for `callgate serve` and `callgate report --html`, and the labels people give in
    # its calibration sessions. The person_labels table is created on first use.

    def release_runs(self) -> list[dict[str, Any]]:
        """(model, suite_name, releases) for every model and suite with a finished run."""
        return list(self.db.query(
            f"SELECT model, suite_name, COUNT(*) AS releases FROM runs WHERE {_NEWEST_DONE} "
            "GROUP BY model, suite_name ORDER BY model, suite_name"))

    def suite_case_ids(self, suite_fingerprint: str) -> list[str]:
        return [row[0] for row in self.db.execute(
            "SELECT case_id FROM cases WHERE suite = ? ORDER BY case_id", [suite_fingerprint])]

    def suite_tool_names(self, suite_fingerprint: str) -> list[str]:
        row = self.db.execute("SELECT tools FROM suites WHERE fingerprint = ?",
                              [suite_fingerprint]).fetchone()
        if row is None:
            return []
        return sorted({tool.get("function", {}).get("name", "") for tool in json.loads(row[0])}
                      - {""})

    def attempt_rows(self, run_id: int, *, verdict: str | None = None, tag: str | None = None,
                     tool: str | None = None, case_ids: list[str] | None = None,
                     limit: int = 100, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
        """A page of a run's attempts (verdict joined with its case's tags and expectation type)
        and how many match. `verdict` matches the status, tool or arguments verdict, or `fail`
        (scored and not fully right); `tool` matches attempts whose response or case names it."""
        where = ["v.run = ?"]
        params: list[Any] = [run_id]
        if verdict == "fail":
            where.append("v.status = 'scored' AND v.right_arguments = 0")
        elif verdict:
            where.append("(v.status = ? OR v.tool = ? OR v.arguments = ?)")
            params += [verdict] * 3
        if tag:
            where.append("EXISTS (SELECT 1 FROM json_each(c.tags) WHERE json_each.value = ?)")
            params.append(tag)
        if tool:
            quoted = json.dumps(tool)
            where.append("(instr(r.body, ?) > 0 OR instr(c.body, ?) > 0)")
            params += [quoted, quoted]
        if case_ids is not None:
            where.append(f"v.case_id IN ({', '.join('?' * len(case_ids))})")
            params += case_ids
        joins = ("FROM verdicts AS v JOIN runs ON runs.id = v.run "
                 "LEFT JOIN cases AS c ON c.suite = runs.suite AND c.case_id = v.case_id "
                 + ("LEFT JOIN responses AS r ON r.run = v.run AND r.case_id = v.case_id "
                    "AND r.repeat = v.repeat " if tool else "")
                 + "WHERE " + " AND ".join(where))
        total = self.db.execute(f"SELECT COUNT(*) {joins}", params).fetchone()[0]
        rows = list(self.db.query(
            f"SELECT v.*, c.tags AS tags, c.expect_type AS expect_type {joins} "
            "ORDER BY v.case_id, v.repeat LIMIT ? OFFSET ?", [*params, limit, offset]))
        return total, rows

    def attempt(self, run_id: int, case_id: str, repeat: int) -> dict[str, Any] | None:
        """One attempt: its verdict, response row, case row and judgement (when judged)."""
        verdict = list(self.db.query(
            "SELECT * FROM verdicts WHERE run = ? AND case_id = ? AND repeat = ?",
            [run_id, case_id, repeat]))
        if not verdict:
            return None
        run = self.run(run_id)
        response = list(self.db.query(
            "SELECT * FROM responses WHERE run = ? AND case_id = ? AND repeat = ?",
            [run_id, case_id, repeat]))
        case = list(self.db.query("SELECT * FROM cases WHERE suite = ? AND case_id = ?",
                                  [run["suite"] if run else "", case_id]))
        judgement = list(self.db.query(
            "SELECT * FROM judgements WHERE run = ? AND case_id = ? AND repeat = ?",
            [run_id, case_id, repeat]))
        return {"verdict": verdict[0], "response": response[0] if response else None,
                "case": case[0] if case else None,
                "judgement": judgement[0] if judgement else None}

    def suite_tools(self, suite_fingerprint: str) -> list[dict[str, Any]]:
        row = self.db.execute("SELECT tools FROM suites WHERE fingerprint = ?",
                              [suite_fingerprint]).fetchone()
        return json.loads(row[0]) if row else []

    def calibration_sets(self) -> list[dict[str, Any]]:
        return list(self.db.query(
            "SELECT set_name, COUNT(*) AS items FROM calibration_items GROUP BY set_name "
            "ORDER BY set_name"))

    def calibration_item_rows(self, set_name: str) -> list[dict[str, Any]]:
        return list(self.db.query(
            "SELECT * FROM calibration_items WHERE set_name = ? ORDER BY item_id", [set_name]))

    def certificate_rows(self) -> list[dict[str, Any]]:
        """Every stored certificate (certified or not), newest first."""
        return list(self.db.query("SELECT * FROM certificates ORDER BY created_at DESC"))

    def _person_labels_table(self) -> None:
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS person_labels (id INTEGER PRIMARY KEY, "
            "set_name TEXT NOT NULL, item_id TEXT NOT NULL, labeller TEXT NOT NULL, "
            "tool_choice TEXT NOT NULL, arguments TEXT NOT NULL, note TEXT NOT NULL, "
            "created_at TEXT NOT NULL, line TEXT NOT NULL)")
        self.db.execute("CREATE INDEX IF NOT EXISTS person_labels_by_item "
                        "ON person_labels (set_name, item_id)")

    def add_person_label(self, set_name: str, item_id: str, labeller: str, tool_choice: str,
                         arguments: str, note: str, line: str) -> dict[str, Any]:
        """Store a person's label (with the set-file line it wrote); returns the row."""
        self._person_labels_table()
        with self.db.atomic():
            cursor = self.db.execute(
                "INSERT INTO person_labels (set_name, item_id, labeller, tool_choice, "
                "arguments, note, created_at, line) VALUES (?,?,?,?,?,?,?,?)",
                [set_name, item_id, labeller, tool_choice, arguments, note, now(), line])
        return next(self.db.query("SELECT * FROM person_labels WHERE id = ?",
                                  [cursor.lastrowid]))

    def person_labels(self, set_name: str) -> list[dict[str, Any]]:
        """Every person's label on a set, oldest first."""
        self._person_labels_table()
        return list(self.db.query(
            "SELECT * FROM person_labels WHERE set_name = ? ORDER BY id", [set_name]))

    def last_person_label(self, set_name: str, labeller: str) -> dict[str, Any] | None:
        self._person_labels_table()
        rows = list(self.db.query(
            "SELECT * FROM person_labels WHERE set_name = ? AND labeller = ? "
            "ORDER BY id DESC LIMIT 1", [set_name, labeller]))
        return rows[0] if rows else None

    def delete_person_label(self, label_id: int) -> None:
        with self.db.atomic():
            self.db.execute("DELETE FROM person_labels WHERE id = ?", [label_id])


    # ----------------------------------------------------------------- audits (issue 16)
    # A per-release audit: a seeded uniform sample of a run's judged attempts, labelled by a
    # person (tables: migration m005_audits).

    def audit(self, run_id: int) -> dict[str, Any] | None:
        """The audit of a run (seed, population, created_at), or None."""
        rows = list(self.db.query("SELECT * FROM audits WHERE run = ?", [run_id]))
        return rows[0] if rows else None

    def save_audit(self, run_id: int, seed: int, population: int,
                   items: list[tuple[int, str, int]]) -> None:
        """Record an audit and its sample, (position, case_id, repeat) rows; positions already
        stored keep their labels (an audit grows by taking more of the same permutation)."""
        with self.atomic():
            self.db.execute(
                "INSERT OR IGNORE INTO audits (run, seed, population, created_at) "
                "VALUES (?, ?, ?, ?)", [run_id, seed, population, now()])
            self.db.conn.executemany(
                "INSERT OR IGNORE INTO audit_items (run, position, case_id, repeat) "
                "VALUES (?, ?, ?, ?)", [(run_id, *item) for item in items])

    def audit_items(self, run_id: int) -> list[dict[str, Any]]:
        return list(self.db.query(
            "SELECT * FROM audit_items WHERE run = ? ORDER BY position", [run_id]))

    def save_audit_label(self, run_id: int, case_id: str, repeat: int, tool_choice: str,
                         arguments: str, labeller: str) -> None:
        with self.atomic():
            self.db.execute(
                "UPDATE audit_items SET label_tool_choice = ?, label_arguments = ?, "
                "labeller = ?, labelled_at = ? WHERE run = ? AND case_id = ? AND repeat = ?",
                [tool_choice, arguments, labeller, now(), run_id, case_id, repeat])
