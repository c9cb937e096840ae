"""The store's reads for the gate: a run's verdicts, only the columns the gate pairs, and
each finished run's per-case tallies of them."""

from __future__ import annotations

from callgate.store.base import StoreBase

# Rows of one run: its rowid range, found in the index, read in table order. Reading through
# the index instead makes every row a lookup (some 3 times as long at 100,000 rows). The run
# test stays on each row, so rows of other runs inside the range (two runs written at once)
# are read and dropped, never counted.
_ONE_RUN = ("rowid BETWEEN (SELECT MIN(rowid) FROM verdicts WHERE run = ?1) "
            "AND (SELECT MAX(rowid) FROM verdicts WHERE run = ?1) AND +run = ?1")

_FAILED = "status = 'scored' AND NOT right_arguments"
# A failed attempt's reason: its tool reason and arguments reason, the empty ones left out,
# joined by "; " (as gating.cases.tally joins them).
_REASON = ("CASE WHEN COALESCE(tool_reason, '') != '' AND COALESCE(arguments_reason, '') != '' "
           "THEN tool_reason || '; ' || arguments_reason "
           "ELSE COALESCE(NULLIF(tool_reason, ''), NULLIF(arguments_reason, ''), '') END")
# gating.cases.tally's rule in SQL (tests/gating/test_gate.py holds the two equal): per case, its
# scored attempts, their right tools and right arguments, its excluded attempts, and the
# reason of its lowest-numbered scored repeat without right arguments.
_TALLY = (
    "INSERT INTO case_tallies (run, case_id, trials, right_tool, right_arguments, excluded, "
    "reason) SELECT ?1, case_id, SUM(status = 'scored'), "
    "SUM(CASE WHEN status = 'scored' THEN right_tool ELSE 0 END), "
    "SUM(CASE WHEN status = 'scored' THEN right_arguments ELSE 0 END), "
    "SUM(status != 'scored'), "
    f"COALESCE((SELECT {_REASON} FROM verdicts AS first WHERE first.run = ?1 "
    "AND first.case_id = v.case_id AND first.status = 'scored' AND NOT first.right_arguments "
    "ORDER BY first.repeat LIMIT 1), '') "
    "FROM verdicts AS v WHERE run = ?1 GROUP BY case_id")

CaseTally = tuple[str, int, int, int, int, str]


class GateRows(StoreBase):
    """Store methods for the gate (a mixin of Store)."""

    def gate_rows(self, run_id: int) -> list[tuple[str, int, int, int, int, str | None,
                                                   str | None]]:
        """A run's verdicts as (case id, repeat, scored (1) or excluded (0), right tool, right
        arguments, tool reason, arguments reason), in no particular order; the reasons only
        where a scored attempt's arguments were not right (None elsewhere)."""
        return self.db.execute(
            "SELECT case_id, repeat, status = 'scored', right_tool, right_arguments, "
            f"CASE WHEN {_FAILED} THEN tool_reason END, "
            f"CASE WHEN {_FAILED} THEN arguments_reason END "
            f"FROM verdicts WHERE {_ONE_RUN}", [run_id]).fetchall()

    def save_case_tallies(self, run_id: int) -> None:
        """Tally the run's verdicts per case into case_tallies, replacing its earlier tallies:
        called where the run's scores are written (finishing it, or a merge adding to it), in
        that transaction."""
        self.db.execute("DELETE FROM case_tallies WHERE run = ?", [run_id])
        self.db.execute(_TALLY, [run_id])

    def case_tallies(self, run_id: int) -> list[CaseTally]:
        """The run's stored per-case tallies as (case id, scored attempts, right tool, right
        arguments, excluded attempts, first failure's reason), by case id; empty for a run
        finished before they were kept (or without verdicts)."""
        return self.db.execute(
            "SELECT case_id, trials, right_tool, right_arguments, excluded, reason "
            "FROM case_tallies WHERE run = ?", [run_id]).fetchall()
