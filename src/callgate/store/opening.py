"""Opening a store file safely: refusing files that are not callgate stores, the busy timeout,
and who holds the write lock."""

from __future__ import annotations

import os
import socket
import sqlite3
import stat
import sys
from pathlib import Path

from callgate.errors import CallgateError
from callgate.store.schema import (
    _SCHEMA_TABLES,
    APPLICATION_ID,
    BUSY_TIMEOUT_ENV,
    CORE_TABLES,
    DEFAULT_BUSY_TIMEOUT,
    MIGRATIONS,
    MIGRATIONS_TABLE_NAME,
    SCHEMA_VERSION,
    SQLITE_HEADER,
)


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


def check_input_store(path: Path) -> None:
    """Refuse, naming it, a path that cannot be a store to read: missing, a folder, empty, or
    not a SQLite file. Reads at most the file's first 100 bytes."""
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a callgate store")
    if not path.is_file():
        raise StoreError(f"{path}: " + ("file not found" if not path.exists() else
                                        "not a regular file, not a callgate store"))
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read ({exc.strerror})") from None
    if not header:
        raise StoreError(f"{path}: an empty file, not a callgate store")
    if not header.startswith(SQLITE_HEADER):
        raise StoreError(f"{path}: not a SQLite database (it lacks the SQLite header), not "
                         "a callgate store")


class StoreState:
    """What an open SQLite file holds, read without writing to it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        # One read transaction, so every figure comes from the same snapshot: read one by one,
        # a migration another process commits in between would show its tables but not yet
        # its marks, and the store would be taken for another program's database.
        if conn.in_transaction:
            self._read(conn)
            return
        conn.execute("BEGIN")
        try:
            self._read(conn)
        finally:
            conn.execute("COMMIT")

    def _read(self, conn: sqlite3.Connection) -> None:
        self.application_id: int = conn.execute("PRAGMA application_id").fetchone()[0]
        self.user_version: int = conn.execute("PRAGMA user_version").fetchone()[0]
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
