"""The SQLite store (sqlite-utils): suites, cases, runs, responses, verdicts and scores.

Every prompt, response, verdict and score is a row, so any figure can be recomputed and browsed
later (e.g. with Datasette). WAL mode; writes are batched inside transactions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from callgate.suite import Suite, canonical_json

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


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Store:
    """A callgate database. Use as a context manager, or call `close()`."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.db = Database(self.path)
        self.db.enable_wal()
        self.db.execute("PRAGMA foreign_keys = ON")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self._drop_old_unique_runs()
        self.db.conn.executescript(SCHEMA)
        self._add_gate_column()

    def _drop_old_unique_runs(self) -> None:
        """Rebuild a `runs` table made with UNIQUE (suite_name, model, release), keeping every
        row and id (the tables that refer to runs keep pointing at the same rows)."""
        row = self.db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
        ).fetchone()
        if row is None or not _OLD_UNIQUE.search(row[0]):
            return
        self.db.conn.executescript(
            "PRAGMA foreign_keys = OFF;"
            "BEGIN;"
            + RUNS_TABLE.replace("IF NOT EXISTS runs", "runs_rebuilt")
            + "INSERT INTO runs_rebuilt SELECT id, suite_name, suite, model, release, source, "
            "created_at, callgate_version, judge_fingerprint, status, scores FROM runs;"
            "DROP TABLE runs;"
            "ALTER TABLE runs_rebuilt RENAME TO runs;"
            "COMMIT;"
            "PRAGMA foreign_keys = ON;"
        )

    def _add_gate_column(self) -> None:
        """runs.gate: the gate decision on the run (JSON, callgate.gate.GateRecord), NULL
        until one is taken. Added to stores made before it existed."""
        if "gate" not in self.db["runs"].columns_dict:
            self.db["runs"].add_column("gate", str)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def atomic(self):
        return self.db.atomic()

    # ----------------------------------------------------------------- writes

    def save_suite(self, suite: Suite) -> None:
        """Store the suite and its cases (idempotent: keyed by fingerprint)."""
        with self.db.atomic():
            if self.db["suites"].count_where("fingerprint = ?", [suite.fingerprint]):
                return
            self.db["suites"].insert(
                {
                    "fingerprint": suite.fingerprint,
                    "name": suite.name,
                    "path": str(suite.path),
                    "tools": canonical_json(suite.raw_tools),
                    "loaded_at": now(),
                }
            )
            self.db["cases"].insert_all(
                {
                    "suite": suite.fingerprint,
                    "case_id": case_id,
                    "expect_type": suite.cases[case_id].expect.type,
                    "tags": json.dumps(suite.cases[case_id].tags),
                    "body": canonical_json(raw),
                }
                for case_id, raw in suite.raw_cases.items()
            )

    def replace_run(
        self,
        suite: Suite,
        model: str,
        release: str,
        source: str,
        version: str,
        judge_fingerprint: str | None = None,
    ) -> int:
        """Create the run row for (suite, model, release), with status "running".

        An earlier run of the release is not dropped here: it stays, and stays the one that
        find_run() and runs() see, until this run finishes (finish_run with status "done").
        A re-scored release keeps its original creation time, so its place in the model's
        history (and so which release is the baseline of which) does not move."""
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
        return int(cursor.lastrowid)

    def add_attempts(self, responses: list[tuple], verdicts: list[tuple]) -> None:
        """Insert a batch of response rows and verdict rows (tuples in *_COLUMNS order).

        One transaction per batch, or a savepoint inside the caller's transaction."""
        with self.db.atomic():
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
        with self.db.atomic():
            self._write_scores(run_id, scores, status)
            row = self.run(run_id)
            if row is not None and row["status"] == "done":
                self._keep_refusal(run_id)
                self.db.execute(
                    "DELETE FROM runs WHERE suite_name = ? AND model = ? AND release = ? "
                    "AND id < ?",
                    [row["suite_name"], row["model"], row["release"], run_id],
                )

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
        with self.db.atomic():
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
        with self.db.atomic():
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
        with self.db.atomic():
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO run_turns (run, case_id, repeat, turn, cache_key, cached) "
                "VALUES (?,?,?,?,?,?)",
                rows,
            )

    def set_run_gate(self, run_id: int, decision: str) -> None:
        """Record the gate decision on a run (JSON); the newest decision replaces the last."""
        with self.db.atomic():
            self.db.execute("UPDATE runs SET gate = ? WHERE id = ?", [decision, run_id])

    def set_run_status(self, run_id: int, status: str) -> None:
        with self.db.atomic():
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
        with self.db.atomic():
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO judge_cache (key, fingerprint, output, created_at) "
                "VALUES (?, ?, ?, ?)", [(*row, now()) for row in rows])

    def save_judgements(self, rows: list[tuple]) -> None:
        """(run, case_id, repeat, fingerprint, tool_choice, arguments, reason) rows."""
        with self.db.atomic():
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO judgements (run, case_id, repeat, fingerprint, "
                "tool_choice, arguments, reason) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def save_calibration_items(self, set_name: str, rows: list[tuple]) -> None:
        """Load a calibration set idempotently: (item_id, split, tool, arguments, body) rows
        replace what the set held, so a removed item leaves the store too."""
        with self.db.atomic():
            self.db.execute("DELETE FROM calibration_items WHERE set_name = ?", [set_name])
            self.db.conn.executemany(
                "INSERT INTO calibration_items (set_name, item_id, split, label_tool_choice, "
                "label_arguments, body) VALUES (?, ?, ?, ?, ?, ?)",
                [(set_name, *row) for row in rows])

    def save_certificate(self, fingerprint: str, judge: str, certified: bool, body: str) -> None:
        with self.db.atomic():
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

