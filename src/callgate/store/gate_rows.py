"""The store's reads for the gate: a run's verdicts, only the columns the gate pairs, and
each finished run's per-case tallies of them."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from typing import Any

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

MARK_SEPARATOR = "\x1f"  # between a case's slice marks in case_tallies.marks

# The baseline's scored cases whose tally differs now, or that have none (no row, or no scored
# attempt): one lookup a case in the primary key, and only those cases read out.
_DIFFERING = (
    "SELECT o.case_id, o.trials, o.right_tool, o.right_arguments, o.excluded, o.reason, "
    "n.trials, n.right_tool, n.right_arguments, n.excluded, n.reason "
    "FROM case_tallies AS o LEFT JOIN case_tallies AS n ON n.run = ?2 AND n.case_id = o.case_id "
    "WHERE o.run = ?1 AND o.trials > 0 AND (n.trials IS NULL OR n.trials != o.trials "
    "OR n.right_tool != o.right_tool OR n.right_arguments != o.right_arguments) "
    "ORDER BY o.case_id")


# The slices of the gate (gating/slices.py): the marks of a suite's cases that name one
# (store/web_rows.py: `expect:TOOL`, `tag:TAG`), read by a range of the primary key.
_SLICE_MARKS = ("m.suite = ?3 AND ((m.mark >= 'expect:' AND m.mark < 'expect;') "
                "OR (m.mark >= 'tag:' AND m.mark < 'tag;'))")
# Per slice, the cases both runs scored, counted by (tally then, tally now). case_marks is read
# first (CROSS JOIN): each of its rows is two lookups in case_tallies' primary key.
_SLICE_PAIRS = (
    "SELECT m.mark, o.trials, o.right_tool, o.right_arguments, n.trials, n.right_tool, "
    "n.right_arguments, COUNT(*) FROM case_marks AS m "
    "CROSS JOIN case_tallies AS o ON o.run = ?1 AND o.case_id = m.case_id "
    "CROSS JOIN case_tallies AS n ON n.run = ?2 AND n.case_id = m.case_id "
    f"WHERE {_SLICE_MARKS} AND o.trials > 0 AND n.trials > 0 GROUP BY 1, 2, 3, 4, 5, 6, 7")
# Per slice and first-called tool, a run's scored attempts and their calls.
_SLICE_ATTEMPTS = (
    "SELECT m.mark, v.first_tool, COUNT(*), SUM(v.calls) FROM case_marks AS m "
    "CROSS JOIN verdicts AS v ON v.run = ?1 AND v.case_id = m.case_id "
    f"WHERE {_SLICE_MARKS.replace('?3', '?2')} AND v.status = 'scored' GROUP BY 1, 2")
_ARGUMENT_FAILURES = (
    "SELECT arguments, schema_kind, arguments_reason, COUNT(*) FROM verdicts "
    f"WHERE {_ONE_RUN} AND status = 'scored' AND right_tool AND NOT right_arguments "
    "GROUP BY arguments, schema_kind, arguments_reason")  # by name: the write puts ?1 first

# Kept when a run's scores are written (write_slice_tallies), so the gate reads a few rows:
# per slice mark, the run's cases counted by tally, and its attempts by first-called tool.
_SUITE_OF = "(SELECT suite FROM runs WHERE id = ?1)"
_SAVE_SLICE_TALLIES = (
    "INSERT INTO slice_tallies (run, mark, trials, right_tool, right_arguments, cases) "
    "SELECT ?1, m.mark, t.trials, t.right_tool, t.right_arguments, COUNT(*) "
    "FROM case_marks AS m CROSS JOIN case_tallies AS t ON t.run = ?1 AND t.case_id = m.case_id "
    f"WHERE {_SLICE_MARKS.replace('?3', _SUITE_OF)} AND t.trials > 0 GROUP BY 2, 3, 4, 5")
# Counted per case first, in one pass over the run's rows in table order: joining each mark to
# the verdicts of its case would fetch every row through the index, once per mark of its case.
_SAVE_SLICE_CALLS = (
    "INSERT INTO slice_calls (run, mark, first_tool, attempts, calls) "
    "SELECT ?1, m.mark, v.first_tool, SUM(v.attempts), SUM(v.calls) FROM case_marks AS m "
    "CROSS JOIN (SELECT case_id, first_tool, COUNT(*) AS attempts, SUM(calls) AS calls "
    f"FROM verdicts WHERE {_ONE_RUN} AND status = 'scored' GROUP BY 1, 2) AS v "
    f"ON v.case_id = m.case_id WHERE {_SLICE_MARKS.replace('?3', _SUITE_OF)} GROUP BY 2, 3")


_SAVE_CASE_MARKS = (
    "UPDATE case_tallies SET marks = (SELECT group_concat(m.mark, char(31)) FROM case_marks "
    "AS m INDEXED BY case_marks_by_case WHERE m.suite = " + _SUITE_OF + " AND m.case_id = "
    "case_tallies.case_id AND ((m.mark >= 'expect:' AND m.mark < 'expect;') OR "
    "(m.mark >= 'tag:' AND m.mark < 'tag;'))) WHERE run = ?1")


def write_slice_tallies(conn: sqlite3.Connection, run_id: int) -> None:
    """Keep the run's slice counts, each case's marks and its argument failures (replacing
    earlier ones), in the caller's transaction: after its case tallies and its suite's marks."""
    for table in ("slice_tallies", "slice_calls", "argument_failures"):
        conn.execute(f"DELETE FROM {table} WHERE run = ?", [run_id])
    conn.execute(_SAVE_SLICE_TALLIES, [run_id])
    conn.execute(_SAVE_SLICE_CALLS, [run_id])
    conn.execute(_SAVE_CASE_MARKS, [run_id])
    conn.execute(_SAVE_ARGUMENT_FAILURES, [run_id])


_SAVE_ARGUMENT_FAILURES = ("INSERT INTO argument_failures (run, arguments, schema_kind, reason, "
                           f"attempts) SELECT ?1, {_ARGUMENT_FAILURES[len('SELECT '):]}")


def recount_argument_failures(conn: sqlite3.Connection) -> None:
    """Count every kept run's argument failures again, per reason (migration m017)."""
    runs = conn.execute("SELECT DISTINCT run FROM argument_failures").fetchall()
    conn.execute("DELETE FROM argument_failures")
    for (run_id,) in runs:
        conn.execute(_SAVE_ARGUMENT_FAILURES, [run_id])




# The same counts over a few named cases only (a JSON array of case ids, a quarantine's): read
# from the cases named, each a lookup in case_marks_by_case and in verdicts' primary key.
_NAMED = "json_each(?{}) AS q CROSS JOIN "
_SLICE_MARKS_OF = (
    "SELECT m.mark, m.case_id FROM " + _NAMED.format(2) + "case_marks AS m INDEXED BY "
    "case_marks_by_case ON m.suite = ?1 AND m.case_id = q.value WHERE "
    + _SLICE_MARKS.replace("?3", "?1"))
_SLICE_ATTEMPTS_OF = (
    "SELECT m.mark, v.first_tool, COUNT(*), SUM(v.calls) FROM " + _NAMED.format(3)
    + "case_marks AS m INDEXED BY case_marks_by_case ON m.suite = ?2 AND m.case_id = q.value "
    "CROSS JOIN verdicts AS v ON v.run = ?1 AND v.case_id = m.case_id "
    f"WHERE {_SLICE_MARKS.replace('?3', '?2')} AND v.status = 'scored' GROUP BY 1, 2")
_ARGUMENT_FAILURES_OF = (
    "SELECT v.arguments, v.schema_kind, v.arguments_reason, COUNT(*) FROM " + _NAMED.format(2)
    + "verdicts AS v ON v.run = ?1 AND v.case_id = q.value WHERE v.status = 'scored' AND "
    "v.right_tool AND NOT v.right_arguments GROUP BY 1, 2, 3")


def _ids(case_ids: Collection[str]) -> str:
    return json.dumps(sorted(case_ids))


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

    def mixed_tallies(self, run_id: int) -> list[tuple[str, int, int, int]]:
        """The run's cases whose repeats disagree on a figure (flaky within the run): case id,
        scored attempts, right tool, right arguments; by case id."""
        return self.db.execute(
            "SELECT case_id, trials, right_tool, right_arguments FROM case_tallies "
            "WHERE run = ? AND trials > 1 AND ((right_tool > 0 AND right_tool < trials) "
            "OR (right_arguments > 0 AND right_arguments < trials)) ORDER BY case_id",
            [run_id]).fetchall()

    def has_case_tallies(self, run_id: int) -> bool:
        return self.db.execute("SELECT 1 FROM case_tallies WHERE run = ? LIMIT 1",
                               [run_id]).fetchone() is not None

    def paired_tallies(self, before: int, after: int, marks: tuple[str, str] | None = None
                       ) -> tuple[list[tuple[int, int, int, int]], list[tuple[Any, ...]]]:
        """Two runs' kept tallies side by side, for the gate, without reading every case out:
        the first run's scored cases counted by (trials, right tool, right arguments), as
        those three and the count; and, by case id, each of its scored cases whose tally
        differs in the second run or that the second has no scored attempt of: the case id,
        then its five tally fields (as case_tallies) in the first run and in the second
        (None when the second has no tally of it). `marks`: two suites (the first run's and
        the second's), whose slice marks of each differing case end its row, each joined by
        MARK_SEPARATOR (the second None when the suites are one)."""
        counted = self.db.execute(
            "SELECT trials, right_tool, right_arguments, COUNT(*) FROM case_tallies "
            "WHERE run = ? AND trials > 0 GROUP BY 1, 2, 3", [before]).fetchall()
        if marks is None:
            return counted, self.db.execute(_DIFFERING, [before, after]).fetchall()
        then_suite, now_suite = marks
        query = _DIFFERING.replace(" FROM case_tallies AS o", ", o.marks, "
                                   + ("n.marks" if now_suite != then_suite else "NULL")
                                   + " FROM case_tallies AS o", 1)
        return counted, self.db.execute(query, [before, after]).fetchall()


    def slice_marks(self, suite: str) -> list[tuple[str, str]]:
        """The suite's (mark, case id) rows that name a slice; empty when it is not marked."""
        return self.db.execute("SELECT m.mark, m.case_id FROM case_marks AS m WHERE "
                               + _SLICE_MARKS.replace("?3", "?1"), [suite]).fetchall()

    def slice_pairs(self, before: int, after: int, suite: str) -> list[tuple[Any, ...]]:
        """Per slice mark of `suite` (the second run's), the cases both runs' kept tallies
        scored, counted by tally: (mark, trials, right tool, right arguments then, the same
        now, cases)."""
        return self.db.execute(_SLICE_PAIRS, [before, after, suite]).fetchall()

    def slice_attempts(self, run_id: int, suite: str) -> list[tuple[str, str | None, int, int]]:
        """Per slice mark of `suite` and first-called tool ('' none, None not kept), the run's
        scored attempts and their calls."""
        return self.db.execute(_SLICE_ATTEMPTS, [run_id, suite]).fetchall()

    def slice_marks_of(self, suite: str, case_ids: Collection[str]) -> list[tuple[str, str]]:
        """As slice_marks, the rows of the cases `case_ids` only."""
        return self.db.execute(_SLICE_MARKS_OF, [suite, _ids(case_ids)]).fetchall()

    def slice_attempts_of(self, run_id: int, suite: str, case_ids: Collection[str]
                          ) -> list[tuple[str, str | None, int, int]]:
        """As slice_attempts, over the cases `case_ids` only (what a quarantine takes out of
        the run's counts: gating.what_to_fix)."""
        return self.db.execute(_SLICE_ATTEMPTS_OF, [run_id, suite, _ids(case_ids)]).fetchall()

    def argument_failures_of(self, run_id: int, case_ids: Collection[str]
                             ) -> list[tuple[str | None, str | None, str, int]]:
        """As argument_failures, counted from the verdicts of the cases `case_ids` only."""
        return self.db.execute(_ARGUMENT_FAILURES_OF, [run_id, _ids(case_ids)]).fetchall()

    def argument_failures(self, run_id: int) -> list[tuple[str | None, str | None, str, int]]:
        """The run's scored attempts with the right tool and wrong arguments, counted by
        (arguments verdict, schema kind, arguments reason): kept with its scores, else
        counted from its verdicts."""
        if self.has_slice_tallies(run_id):
            return self.db.execute("SELECT arguments, schema_kind, reason, attempts FROM "
                                   "argument_failures WHERE run = ?", [run_id]).fetchall()
        return self.db.execute(_ARGUMENT_FAILURES, [run_id]).fetchall()

    def save_slice_tallies(self, run_id: int) -> None:
        write_slice_tallies(self.db.conn, run_id)

    def kept_slice_tallies(self, run_id: int) -> list[tuple[str, int, int, int, int]]:
        """The run's kept slice counts: (mark, trials, right tool, right arguments, cases)."""
        return self.db.execute("SELECT mark, trials, right_tool, right_arguments, cases "
                               "FROM slice_tallies WHERE run = ?", [run_id]).fetchall()

    def kept_slice_calls(self, run_id: int) -> list[tuple[str, str | None, int, int]]:
        """The run's kept (mark, first-called tool, scored attempts, their calls)."""
        return self.db.execute("SELECT mark, first_tool, attempts, calls FROM slice_calls "
                               "WHERE run = ?", [run_id]).fetchall()

    def has_slice_tallies(self, run_id: int) -> bool:
        return self.db.execute("SELECT 1 FROM slice_calls WHERE run = ? LIMIT 1",
                               [run_id]).fetchone() is not None

