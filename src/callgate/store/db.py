"""The SQLite store (sqlite-utils): suites, cases, runs, responses, verdicts and scores.

Every prompt, response, verdict and score is a row, so any figure can be recomputed and browsed
later (e.g. with Datasette). WAL mode; writes are batched inside transactions.
"""

from __future__ import annotations

import json
import operator
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from callgate.reading import canonical_json
from callgate.store.columns import RESPONSE_COLUMNS, VERDICT_COLUMNS
from callgate.store.connection import migrate, open_read_only, refuse_foreign, store_error
from callgate.store.gate_rows import GateRows
from callgate.store.judging import JudgeRecords
from callgate.store.live_rows import LiveRows
from callgate.store.merge_rows import MergeInputRows
from callgate.store.merging import MergeRecords
from callgate.store.opening import (
    StoreError,
    _is_busy,
    _print_notice,
    _writer_alive,
    busy_timeout,
    check_store_file,
    inspect_store,
)
from callgate.store.production_rows import ProductionRows
from callgate.store.rows import StoredRun
from callgate.store.schema import _NEWEST_DONE, now
from callgate.store.serving import ServeRecords
from callgate.store.suite_rows import StoredSuite, SuiteRows
from callgate.store.web_rows import WebRows, insert_attempt_marks


def _shards_overlap(older: str | None, newer: str | None) -> bool:
    """Whether a finished run replaces an older run of its release: an unsharded run replaces
    and is replaced by any; a shard run replaces the runs holding one of its shards, so shards
    run one after another into one store all stay."""
    if older is None or newer is None:
        return True
    return bool(set(json.loads(older)) & set(json.loads(newer)))


_VERDICT_FIELDS = operator.itemgetter(*VERDICT_COLUMNS[1:-1])  # all but violations


def verdict_row(run_id: int, verdict: Any) -> tuple[Any, ...]:
    """A verdict (`callgate.checks.verdict.Verdict`, or any object with its fields as
    attributes) as a row of table `verdicts`, in VERDICT_COLUMNS order. sqlite3 stores a bool
    as the integer 0 or 1; the violations are a JSON list, NULL when there are none."""
    found = getattr(verdict, "violations", ())
    kept = json.dumps([{"policy": v.policy, "reason": v.reason} for v in found],
                      ensure_ascii=False) if found else None
    return (run_id, *_VERDICT_FIELDS(vars(verdict)), kept)


def _refuse_missing_runs(conn: sqlite3.Connection, run_ids: set[Any]) -> None:
    """The foreign-key check of rows naming these runs, once for them all."""
    ids = sorted(run_ids)
    found = conn.execute(f"SELECT COUNT(*) FROM runs WHERE id IN ({', '.join('?' * len(ids))})",
                         ids).fetchone()[0] if ids else 0
    if found != len(ids):
        raise sqlite3.IntegrityError("FOREIGN KEY constraint failed")


class Store(WebRows, JudgeRecords, ServeRecords, MergeRecords, MergeInputRows, GateRows,
            LiveRows, SuiteRows, ProductionRows):
    """A callgate database. Use as a context manager, or call `close()`.

    Opening checks the file first: a path that is neither a callgate store nor an empty or new
    file is refused with a StoreError naming it, and nothing is written to it. An older
    callgate store is upgraded by the named MIGRATIONS, with a notice. Every write transaction
    starts with BEGIN IMMEDIATE and waits up to the busy timeout (CALLGATE_BUSY_TIMEOUT
    seconds) for other writers."""

    def __init__(
        self, path: Path | str, *, notify: Callable[[str], None] | None = None,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout()
        self._notify = notify or _print_notice
        if read_only:
            self.db = Database(open_read_only(self.path, self.busy_timeout))
            return
        check_store_file(self.path)
        if self.path.stat().st_size if self.path.exists() else 0:
            refuse_foreign(self.path, self.busy_timeout)
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

    def _open(self) -> None:
        try:
            found = inspect_store(self.db.conn)
            refusal = found.refusal(self.path)
            if refusal:
                raise StoreError(refusal)
            if found.pending:
                migrate(self.db.conn, self.path, self.busy_timeout, self.atomic, self._notify)
            self.db.execute("PRAGMA foreign_keys = ON")
            self.db.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _error(self, exc: sqlite3.Error) -> StoreError:
        return store_error(self.path, self.busy_timeout, exc)

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
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):  # a full disk, an I/O error: the store's trouble
                raise self._error(exc) from None
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

    def replace_run(
        self,
        suite: StoredSuite,
        agent: str,
        release: str,
        source: str,
        version: str,
        judge_fingerprint: str | None = None,
        shard: tuple[int, int] | None = None,
        *,
        model: str | None = None,
        model_params: Mapping[str, Any] | None = None,
        tool_surface: str | None = None,
        perturbation: str | None = None,
    ) -> int:
        """Create the run row for (suite, agent, release), with status "running"; `model` is
        the model id it runs with (default: the agent's name), `model_params` the parameters
        it is called with; `shard` is (K, N) for a run of shard K of N; `tool_surface` the
        suite's tool surface as JSON (callgate.suites.surface.surface_json); `perturbation`
        marks a run made with the surface worded another way (JSON, suites/perturb.py): it
        replaces only a run of the same perturbation, and no read of releases sees it.

        An earlier run of the release is not dropped here: it stays, and stays the one that
        find_run() and runs() see, until this run finishes (finish_run with status "done").
        A re-scored release keeps its original creation time, so its place in the agent's
        history (and so which release is the baseline of which) does not move."""
        with self.atomic():  # read, then write: under the write lock
            run_id = self._insert_run(suite, agent, release, source, version,
                                      judge_fingerprint, model or agent, model_params)
            if shard is not None:
                self.db.execute("UPDATE runs SET shard_count = ?, shards = ? WHERE id = ?",
                                [shard[1], json.dumps([shard[0]]), run_id])
            if tool_surface is not None:
                self.db.execute("UPDATE runs SET tool_surface = ? WHERE id = ?",
                                [tool_surface, run_id])
            if perturbation is not None:
                self.db.execute("UPDATE runs SET perturbation = ? WHERE id = ?",
                                [perturbation, run_id])
            return run_id

    def _insert_run(
        self,
        suite: StoredSuite,
        agent: str,
        release: str,
        source: str,
        version: str,
        judge_fingerprint: str | None,
        model: str,
        model_params: Mapping[str, Any] | None,
    ) -> int:
        earlier = self.db.execute(
            "SELECT MIN(created_at) FROM runs WHERE suite_name = ? AND agent = ? AND release = ?",
            [suite.name, agent, release],
        ).fetchone()[0]
        cursor = self.db.execute(
            "INSERT INTO runs (suite_name, suite, agent, model, model_params, release, source, "
            "created_at, callgate_version, judge_fingerprint, status) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [
                suite.name,
                suite.fingerprint,
                agent,
                model,
                None if model_params is None else canonical_json(model_params),
                release,
                source,
                earlier or now(),
                version,
                judge_fingerprint,
                "running",
            ],
        )
        assert cursor.lastrowid is not None  # an INSERT just ran
        run_id = int(cursor.lastrowid)
        self.db.execute(
            "INSERT INTO run_owners (run, host, pid) VALUES (?, ?, ?)",
            [run_id, socket.gethostname(), os.getpid()],
        )
        return run_id

    def add_attempts(self, responses: list[tuple[Any, ...]], verdicts: list[tuple[Any, ...]],
                     marks: list[tuple[str | int, ...]] | None = None) -> None:
        """Insert a batch of response rows and verdict rows (tuples in *_COLUMNS order), and
        the attempts' attempt_tools rows (`marks`, web_rows.AttemptMarks).

        One transaction per batch, or a savepoint inside the caller's transaction. In a
        transaction of its own, the runs the rows name are checked to exist once, inside it,
        instead of SQLite's foreign-key check of each row (a tenth of storing an attempt): the
        same refusal when another process has deleted the run meanwhile."""
        conn = self.db.conn
        once = not conn.in_transaction  # (the pragma is a no-op inside a transaction)
        if once:
            conn.execute("PRAGMA foreign_keys = OFF")
        try:
            with self.atomic():
                if once:
                    _refuse_missing_runs(conn, {row[0] for rows in (responses, verdicts,
                                                                    marks or ())
                                                for row in rows})
                self._insert_attempts(responses, verdicts)
                if marks:
                    insert_attempt_marks(conn, marks)
        finally:
            if once:
                conn.execute("PRAGMA foreign_keys = ON")

    def _insert_attempts(self, responses: list[tuple[Any, ...]],
                         verdicts: list[tuple[Any, ...]]) -> None:
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

    def finish_run(self, run_id: int, scores: dict[str, Any], status: str = "done",
                   not_a_result: str | None = None, *, attempts_marked: bool = False
                   ) -> str | None:
        """Write a run's scores and status; the status the run ends with. A run already marked
        "interrupted" stays so (its scores are partial). A run that ends "done" replaces the
        release's earlier rows and takes its `not_a_result` gate record (JSON, when scoring
        found it mostly excluded attempts), in the same transaction. `attempts_marked`: every
        attempt was added with its marks (add_attempts), so no stored line is read back."""
        with self.atomic():
            self._write_scores(run_id, scores, status, attempts_marked=attempts_marked)
            row = self.run(run_id)
            if row is not None and row["status"] == "done":
                self._keep_refusal(run_id)
                if not_a_result is not None:
                    self.set_run_gate(run_id, not_a_result)
                earlier = self.db.execute(
                    "SELECT runs.id, runs.status, run_owners.host, run_owners.pid, runs.shards "
                    "FROM runs LEFT JOIN run_owners ON run_owners.run = runs.id "
                    "WHERE suite_name = ? AND agent = ? AND release = ? AND id < ? "
                    "AND perturbation IS ?",
                    [row["suite_name"], row["agent"], row["release"], run_id,
                     row.get("perturbation")],
                ).fetchall()
                # A run another live process is still writing stays: deleting it would pull
                # its rows from under that process (FOREIGN KEY constraint failed).
                stale = [[rid] for rid, status, host, pid, shards in earlier
                         if (status != "running" or not _writer_alive(host, pid))
                         and _shards_overlap(shards, row.get("shards"))]
                self.db.conn.executemany("DELETE FROM runs WHERE id = ?", stale)
            self.db.execute("DELETE FROM run_owners WHERE run = ?", [run_id])
        return None if row is None else str(row["status"])

    def _keep_refusal(self, run_id: int) -> None:
        """A release re-scored after its gate refused it stays refused until gated again:
        otherwise re-scoring would silently turn a failed release into a baseline."""
        self.db.execute(
            "UPDATE runs SET gate = (SELECT older.gate FROM runs AS older "
            "WHERE older.suite_name = runs.suite_name AND older.agent = runs.agent "
            "AND older.release = runs.release AND older.id < runs.id AND older.gate IS NOT NULL "
            "AND older.perturbation IS runs.perturbation "
            "ORDER BY older.id DESC LIMIT 1) WHERE id = ? AND gate IS NULL", [run_id])
        self.db.execute(
            "UPDATE runs SET gate = NULL WHERE id = ? AND (json_extract(gate, '$.released') "
            "OR json_extract(gate, '$.decided_by') != 'gate')", [run_id])

    def discard_run(self, run_id: int) -> None:
        """Delete a run that did not finish and every row under it."""
        with self.atomic():
            self.db.execute("DELETE FROM runs WHERE id = ?", [run_id])

    def _write_scores(self, run_id: int, scores: dict[str, Any], status: str, *,
                      attempts_marked: bool = False) -> None:
        self.db.execute(
            "UPDATE runs SET scores = ?, "
            "status = CASE WHEN status = 'interrupted' THEN status ELSE ? END WHERE id = ?",
            [json.dumps(scores, sort_keys=True), status, run_id],
        )
        figures = [("all", scores["figures"])] + [
            (f"tag:{tag}", fig) for tag, fig in scores["by_tag"].items()
        ]
        self.db.execute("DELETE FROM scores WHERE run = ?", [run_id])
        self.db.table("scores").insert_all(
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
        self.save_case_tallies(run_id)  # with the scores: finishing and merging both write them
        self.save_attempt_marks(run_id, attempts_marked=attempts_marked)
        self.save_slice_tallies(run_id)  # after the marks: the slices are counted by them

    # ----------------------------------------------------------------- reads

    def run(self, run_id: int) -> dict[str, Any] | None:
        """The row of a run, as stored (`stored_run` parses its JSON columns)."""
        rows = list(self.db.query("SELECT * FROM runs WHERE id = ?", [run_id]))
        return rows[0] if rows else None

    def stored_run(self, run_id: int) -> StoredRun | None:
        row = self.run(run_id)
        return StoredRun(row) if row is not None else None

    def find_run(self, suite_name: str, agent: str, release: str) -> dict[str, Any] | None:
        """The newest finished run of an agent's release; None when it has none."""
        rows = list(
            self.db.query(
                "SELECT * FROM runs WHERE suite_name = ? AND agent = ? AND release = ? "
                "AND status = 'done' AND perturbation IS NULL ORDER BY id DESC LIMIT 1",
                [suite_name, agent, release],
            )
        )
        return rows[0] if rows else None

    def find_stored_run(self, suite_name: str, agent: str, release: str) -> StoredRun | None:
        row = self.find_run(suite_name, agent, release)
        return StoredRun(row) if row is not None else None

    def runs(self, agent: str | None = None, suite_name: str | None = None) -> list[dict[str, Any]]:
        """Finished runs, oldest first: the newest finished run of each release (of an
        agent, when named)."""
        sql = f"SELECT * FROM runs WHERE {_NEWEST_DONE}"
        params: list[Any] = []
        if agent is not None:
            sql += " AND agent = ?"
            params.append(agent)
        if suite_name is not None:
            sql += " AND suite_name = ?"
            params.append(suite_name)
        return list(self.db.query(sql + " ORDER BY created_at, id", params))

    # Typed: only the store's own merge reads the dict rows above (issue 25 item 3).
    def stored_runs(self, agent: str | None = None, suite_name: str | None = None
                    ) -> list[StoredRun]:
        """`runs`, each with its JSON columns parsed once."""
        return [StoredRun(row) for row in self.runs(agent, suite_name)]

    def perturbed_runs(self, suite_name: str, agent: str, release: str
                       ) -> list[dict[str, Any]]:
        """The newest finished run of each perturbation of a release (`run --perturb`), oldest
        first."""
        return list(self.db.query(
            "SELECT * FROM runs WHERE suite_name = ? AND agent = ? AND release = ? "
            "AND status = 'done' AND perturbation IS NOT NULL AND id = (SELECT MAX(newer.id) "
            "FROM runs AS newer WHERE newer.suite_name = runs.suite_name "
            "AND newer.agent = runs.agent AND newer.release = runs.release "
            "AND newer.status = 'done' AND newer.perturbation = runs.perturbation) "
            "ORDER BY id", [suite_name, agent, release]))

    def verdicts(self, run_id: int) -> Iterator[dict[str, Any]]:
        return self.db.query(
            "SELECT * FROM verdicts WHERE run = ? ORDER BY case_id, repeat", [run_id]
        )

    def set_run_gate(self, run_id: int, decision: str) -> None:
        """Record the gate decision on a run (JSON); the newest decision replaces the last."""
        with self.atomic():
            self.db.execute("UPDATE runs SET gate = ? WHERE id = ?", [decision, run_id])

    def set_run_pacing(self, run_id: int, pacing: Mapping[str, Any]) -> None:
        """Record what limited a live run's calls (models.pacing.Pacer.figures)."""
        with self.atomic():
            self.db.execute("UPDATE runs SET pacing = ? WHERE id = ?",
                            [json.dumps(dict(pacing), sort_keys=True), run_id])

    def set_run_user_simulator(self, run_id: int, record: str) -> None:
        """Record the simulated user a live run played with (JSON: name, model, fingerprint)."""
        with self.atomic():
            self.db.execute("UPDATE runs SET user_simulator = ? WHERE id = ?", [record, run_id])

    def set_run_attack(self, run_id: int, figures: Mapping[str, Any]) -> None:
        """Keep a run's attack figures (run --attack) in its scores, for its release."""
        with self.atomic():
            self.db.execute("UPDATE runs SET scores = json_set(scores, '$.attack', json(?)) "
                            "WHERE id = ? AND scores IS NOT NULL",
                            [json.dumps(dict(figures), sort_keys=True), run_id])

    def set_run_status(self, run_id: int, status: str) -> None:
        with self.atomic():
            self.db.execute("UPDATE runs SET status = ? WHERE id = ?", [status, run_id])
