"""Opening a store's SQLite connection: read-only for a merge's inputs, a look at an existing
file before it is opened for writing, the named migrations applied to an older store, and
SQLite's errors said as what the user can do about them. `Store` calls these when it opens."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, cast

from callgate.store.opening import (
    StoreError,
    StoreLocked,
    _is_busy,
    check_input_store,
    inspect_store,
    lock_holders,
)
from callgate.store.schema import (
    APPLICATION_ID,
    BUSY_TIMEOUT_ENV,
    MIGRATIONS,
    MIGRATIONS_TABLE,
    MIGRATIONS_TABLE_NAME,
    SCHEMA,
    SCHEMA_VERSION,
    _statements,
    now,
)

# sqlite3 binds only exact int, float, str and bytes without asking its adapter protocol; a
# None or a bool (half the columns of a response or verdict row) goes through the protocol's
# two failed attribute lookups first, about 3,300 instructions a value: a quarter of storing
# an attempt. Adapters for the two take the lookup's first, cheap branch and bind what sqlite3
# binds anyway (NULL; the integer 0 or 1). `{}.get` returns None for None, without Python code.
# Process-wide: a program that registered its own adapters for them keeps them.
if (type(None), sqlite3.PrepareProtocol) not in sqlite3.adapters:
    sqlite3.register_adapter(type(None), cast("Callable[[None], None]", {}.get))
if (bool, sqlite3.PrepareProtocol) not in sqlite3.adapters:
    sqlite3.register_adapter(bool, int)


def store_error(path: Path, busy_timeout: float, exc: sqlite3.Error) -> StoreError:
    """A StoreError naming the store for an error SQLite reported on it."""
    text = str(exc)
    if _is_busy(exc):
        return StoreLocked(
            f"{path}: locked by another writer ({lock_holders(path)}) for "
            f"{busy_timeout:g} s; wait for it to finish and run again "
            f"({BUSY_TIMEOUT_ENV} sets how many seconds to wait)"
        )
    if "readonly" in text or "read-only" in text:
        return StoreError(f"{path}: the store cannot be written ({text}); make it and "
                          "its folder writable, or pass --db another file")
    if "disk is full" in text:
        return StoreError(f"{path}: the disk is full ({text}); free some space, or "
                          "pass --db a file on another disk")
    if isinstance(exc, sqlite3.DatabaseError) and (
        "malformed" in text or "not a database" in text
    ):
        return StoreError(f"{path}: damaged SQLite file ({text}); restore it from a "
                          "copy or pass --db a new file")
    return StoreError(f"{path}: {text}; pass --db another file")


def open_read_only(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """Open an existing callgate store through a read-only connection (`merge` reads its
    inputs so): an empty file, another program's database, a store this callgate would
    have to upgrade first, is refused, and none is ever written to."""
    check_input_store(path)
    uri = path.absolute().as_uri() + "?mode=ro"
    if not path.with_name(path.name + "-wal").exists():
        # Nothing waits to be checkpointed: read the file as it is, without the -wal and
        # -shm files a read-only connection would otherwise create and leave beside it.
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout, isolation_level=None)
    except sqlite3.Error as exc:
        raise store_error(path, busy_timeout, exc) from None
    try:
        found = inspect_store(conn)
        refusal = found.refusal(path)
        if refusal is None and found.new:
            refusal = f"{path}: a SQLite file without tables, not a callgate store"
        elif refusal is None and found.pending:
            refusal = (f"{path}: made by an older callgate, and read-only here; open "
                       "it once with this callgate (e.g. `callgate history --db "
                       f"{path} -m MODEL`) to upgrade it, then merge it")
    except sqlite3.Error as exc:
        conn.close()
        raise store_error(path, busy_timeout, exc) from None
    if refusal:
        conn.close()
        raise StoreError(refusal)
    return conn


def refuse_foreign(path: Path, busy_timeout: float) -> None:
    """Look at an existing file through a read-only connection (which never writes, nor
    checkpoints on closing) and refuse it unless it is a callgate store."""
    uri = path.absolute().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout)
    except sqlite3.Error as exc:
        raise store_error(path, busy_timeout, exc) from None
    try:
        refusal = inspect_store(conn).refusal(path)
    except sqlite3.Error as exc:
        raise store_error(path, busy_timeout, exc) from None
    finally:
        conn.close()
    if refusal:
        raise StoreError(refusal)


def migrate(conn: sqlite3.Connection, path: Path, busy_timeout: float,
            atomic: Callable[[], AbstractContextManager[Any]],
            notify: Callable[[str], None]) -> None:
    """Apply the migrations this store lacks, in one write transaction (`atomic`; another
    process may be doing the same: the one that gets the lock second finds nothing left)."""
    deadline = time.monotonic() + busy_timeout
    while conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as exc:  # another process is switching it too
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)
    # A table rebuild must not cascade deletes into the tables that refer to it.
    conn.execute("PRAGMA foreign_keys = OFF")
    with atomic():
        found = inspect_store(conn)
        refusal = found.refusal(path)
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
        notify(
            f"callgate: {path}: {marked}upgraded to store schema {SCHEMA_VERSION} "
            f"(migrations: {', '.join(applied)})"
        )
