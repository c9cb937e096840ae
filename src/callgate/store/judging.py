"""The store's rows for the judge: cached outputs, judgements, calibration items and
certificates, and the per-release audits."""

from __future__ import annotations

from typing import Any, TypedDict, cast

from callgate.store.base import StoreBase
from callgate.store.columns import (
    CALIBRATION_ITEM_COLUMNS,
    JUDGE_OUTPUT_COLUMNS,
    JUDGEMENT_COLUMNS,
    columns_sql,
)
from callgate.store.schema import now


class AuditRow(TypedDict):
    """A row of table `audits`: the run audited, the sample's seed, the judged attempts it was
    drawn from, and when."""

    run: int
    seed: int
    population: int
    created_at: str


class JudgeRecords(StoreBase):
    """Store methods for the judge (a mixin of Store)."""

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

    def save_judge_outputs(self, rows: list[tuple[Any, ...]]) -> None:
        """Cached verdicts (`judge_output_row`: key, fingerprint, output JSON)."""
        columns = columns_sql((*JUDGE_OUTPUT_COLUMNS, "created_at"))
        with self.atomic():
            self.db.conn.executemany(f"INSERT OR REPLACE INTO judge_cache {columns}",
                                     [(*row, now()) for row in rows])

    def save_judgements(self, rows: list[tuple[Any, ...]]) -> None:
        """The judge's verdicts on a run's attempts (`judgement_row`)."""
        with self.atomic():
            self.db.conn.executemany(
                f"INSERT OR REPLACE INTO judgements {columns_sql(JUDGEMENT_COLUMNS)}", rows)

    def save_calibration_items(self, set_name: str, rows: list[tuple[Any, ...]]) -> None:
        """Load a calibration set idempotently: its items (`calibration_item_row`) replace
        what the set held, so a removed item leaves the store too."""
        columns = columns_sql(("set_name", *CALIBRATION_ITEM_COLUMNS))
        with self.atomic():
            self.db.execute("DELETE FROM calibration_items WHERE set_name = ?", [set_name])
            self.db.conn.executemany(f"INSERT INTO calibration_items {columns}",
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


    # ----------------------------------------------------------------- audits (issue 16)
    # A per-release audit: a seeded uniform sample of a run's judged attempts, labelled by a
    # person (tables: migration m005_audits).

    def audit(self, run_id: int) -> AuditRow | None:
        """The audit of a run (seed, population, created_at), or None."""
        rows = list(self.db.query("SELECT * FROM audits WHERE run = ?", [run_id]))
        # The row as read (every column: the gate's kept-decision key hashes it), typed.
        return cast(AuditRow, rows[0]) if rows else None

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
                "labeller = ?, labelled_at = ?, skip_reason = NULL "
                "WHERE run = ? AND case_id = ? AND repeat = ?",
                [tool_choice, arguments, labeller, now(), run_id, case_id, repeat])

    def save_audit_skip(self, run_id: int, case_id: str, repeat: int, reason: str,
                        labeller: str) -> None:
        """A person skipped an audit item: why, who and when (no label)."""
        with self.atomic():
            self.db.execute(
                "UPDATE audit_items SET label_tool_choice = NULL, label_arguments = NULL, "
                "labeller = ?, labelled_at = ?, skip_reason = ? "
                "WHERE run = ? AND case_id = ? AND repeat = ?",
                [labeller, now(), reason, run_id, case_id, repeat])
