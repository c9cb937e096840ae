"""The store's reads for the gate: a run's verdicts, only the columns the gate pairs."""

from __future__ import annotations

from callgate.store.base import StoreBase

# Rows of one run: its rowid range, found in the index, read in table order. Reading through
# the index instead makes every row a lookup (some 3 times as long at 100,000 rows). The run
# test stays on each row, so rows of other runs inside the range (two runs written at once)
# are read and dropped, never counted.
_ONE_RUN = ("rowid BETWEEN (SELECT MIN(rowid) FROM verdicts WHERE run = ?1) "
            "AND (SELECT MAX(rowid) FROM verdicts WHERE run = ?1) AND +run = ?1")


class GateRows(StoreBase):
    """Store methods for the gate (a mixin of Store)."""

    def gate_rows(self, run_id: int) -> list[tuple[str, int, int, int, int, str | None,
                                                   str | None]]:
        """A run's verdicts as (case id, repeat, scored (1) or excluded (0), right tool, right
        arguments, tool reason, arguments reason), in no particular order; the reasons only
        where a scored attempt's arguments were not right (None elsewhere)."""
        failed = "status = 'scored' AND NOT right_arguments"
        return self.db.execute(
            "SELECT case_id, repeat, status = 'scored', right_tool, right_arguments, "
            f"CASE WHEN {failed} THEN tool_reason END, "
            f"CASE WHEN {failed} THEN arguments_reason END "
            f"FROM verdicts WHERE {_ONE_RUN}", [run_id]).fetchall()
