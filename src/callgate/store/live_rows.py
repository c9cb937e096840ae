"""The store's cache of a live run's model and target calls, and the links from a run's
attempts and turns to it."""

from __future__ import annotations

from typing import Any

from callgate.store.base import StoreBase
from callgate.store.columns import (
    LIVE_RESPONSE_COLUMNS,
    RUN_REQUEST_COLUMNS,
    RUN_TURN_COLUMNS,
    columns_sql,
)


class LiveRows(StoreBase):
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

    def completion_tokens_of(self, agent: str) -> tuple[int, int]:
        """The completion tokens the agent's stored answers reported: (sum, answers)."""
        row = self.db.execute(
            "SELECT COALESCE(SUM(responses.completion_tokens), 0), COUNT(*) FROM responses "
            "JOIN runs ON runs.id = responses.run WHERE runs.agent = ? "
            "AND responses.completion_tokens IS NOT NULL AND responses.error_kind IS NULL",
            [agent]).fetchone()
        return int(row[0]), int(row[1])

    def live_request(self, key: str) -> str | None:
        """The request stored with one cached answer (a target's conversation keeps there the
        transcript the next user turn's request is built from)."""
        rows = self.db.query("SELECT request FROM live_responses WHERE key = ?", [key])
        return next((row["request"] for row in rows), None)

    def save_live_responses(self, rows: list[tuple[Any, ...]]) -> None:
        """Upsert provider answers and failures (`live_response_row`) in one transaction. A
        failure never replaces a stored answer."""
        updates = ", ".join(f"{name} = excluded.{name}" for name in LIVE_RESPONSE_COLUMNS[1:])
        with self.atomic():
            self.db.conn.executemany(
                f"INSERT INTO live_responses {columns_sql(LIVE_RESPONSE_COLUMNS)} "
                f"ON CONFLICT(key) DO UPDATE SET {updates} "
                "WHERE excluded.error_kind IS NULL OR live_responses.error_kind IS NOT NULL",
                rows,
            )

    def save_run_requests(self, rows: list[tuple[Any, ...]]) -> None:
        """Link a run's attempts to their cache keys (`run_request_row`)."""
        with self.atomic():
            self.db.conn.executemany(
                f"INSERT OR REPLACE INTO run_requests {columns_sql(RUN_REQUEST_COLUMNS)}", rows)

    def save_run_turns(self, rows: list[tuple[Any, ...]]) -> None:
        """Link the turns of a run's multi-turn attempts to the cache keys of their requests
        in live_responses (`run_turn_row`)."""
        if not rows:
            return
        with self.atomic():
            self.db.conn.executemany(
                f"INSERT OR REPLACE INTO run_turns {columns_sql(RUN_TURN_COLUMNS)}", rows)

