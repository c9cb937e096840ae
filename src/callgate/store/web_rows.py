"""What serve's attempt filters read at 100,000 attempts instead of every case and response
(tables of migration m011), written once with a finished run's scores:

- case_marks: per suite, the cases each tag and each catalogue tool marks: `tag:T` for each
  tag of a case, `tool:T` for each tool of the suite's catalogue whose name, JSON-quoted, is in
  the case's line; a row (suite, '', '') says the suite's cases are marked;
- attempt_tools: per finished run, the attempts each catalogue tool is named by in the response
  line (the tool filter's rule: the same JSON-quoted name; those named by their case's line
  are read through case_marks);
- attempt_tool_runs: the runs marked, with the tools marked for each. A run not marked (not
  finished) or a tool outside its catalogue is filtered by reading the lines.

A scored run's attempt_tools rows are written with its attempts (`AttemptMarks`, from the line
in hand), so finishing it reads no line back; a merged or migrated run's are found by reading
its stored lines (write_attempt_marks)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from callgate.store.base import StoreBase

# A run's rows in table order (its rowid range), not through the index: see store/gate_rows.py.
_RUN_RANGE = ("{alias}.rowid BETWEEN (SELECT MIN(rowid) FROM {table} WHERE run = ?1) "
              "AND (SELECT MAX(rowid) FROM {table} WHERE run = ?1) AND +{alias}.run = ?1")
_SUITE_MARKED = "SELECT 1 FROM case_marks WHERE suite = ? AND mark = '' AND case_id = ''"
_CASE_TAGS = ("INSERT OR IGNORE INTO case_marks (suite, mark, case_id) "
              "SELECT ?1, 'tag:' || tag.value, c.case_id FROM cases AS c, json_each(c.tags) "
              "AS tag WHERE c.suite = ?1")
# The tool a case expects first, as mark `expect:TOOL` (`expect:` for no call; `expect:*KIND`
# for an expectation that names no single tool first: judge, any_call, BFCL multi-turn, or one
# given by the suite's defaults). Slices and the confusion table of the gate read it.
_EXPECTS = (
    "CASE json_extract(c.body, '$.expect.type') WHEN 'no_call' THEN '' "
    "WHEN 'calls' THEN json_extract(c.body, '$.expect.calls[0].tool') "
    "WHEN 'alternatives' THEN json_extract(c.body, '$.expect.alternatives[0][0].tool') "
    "WHEN 'trajectory' THEN json_extract(c.body, '$.expect.calls[0].tool') "
    "WHEN 'final_state' THEN COALESCE(json_extract(c.body, '$.expect.calls[0].tool'), "
    "json_extract(c.body, '$.expect.per_turn[0][0].tool'), '') END")
_CASE_EXPECTS = ("INSERT OR IGNORE INTO case_marks (suite, mark, case_id) "
                 f"SELECT ?1, 'expect:' || COALESCE({_EXPECTS}, '*' || c.expect_type), "
                 "c.case_id FROM cases AS c WHERE c.suite = ?1")
_CASE_MARK = "INSERT OR IGNORE INTO case_marks (suite, mark, case_id) VALUES (?, ?, ?)"
_ATTEMPT_TOOL = ("INSERT OR IGNORE INTO attempt_tools (run, tool, case_id, repeat) "
                 "VALUES (?, ?, ?, ?)")
# The attempts a tool names: through their response lines (attempt_tools) or their case's
# line (case_marks); ?1 the run, ?2 the tool, ?3 the suite. CROSS JOIN keeps SQLite reading
# the few marked rows first (it would scan every verdict of the run for them).
_TOOL_HITS = (
    "WITH hit(case_id, repeat) AS (SELECT case_id, repeat FROM attempt_tools "
    "WHERE run = ?1 AND tool = ?2 UNION SELECT v.case_id, v.repeat FROM case_marks AS m "
    "CROSS JOIN verdicts AS v ON v.run = ?1 AND v.case_id = m.case_id "
    "WHERE m.suite = ?3 AND m.mark = 'tool:' || ?2) ")


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """The names a tool catalogue (OpenAI function tools) declares, sorted; anything not
    shaped as one (a store written by another program) names nothing."""
    names = {tool["function"].get("name") for tool in tools
             if isinstance(tool, dict) and isinstance(tool.get("function"), dict)}
    return sorted(name for name in names if isinstance(name, str) and name)


def tool_needle(tool: str) -> str:
    """What the tool filter looks for in a response or case line: the name as JSON."""
    return json.dumps(tool)


# From this many tools on, a line's quoted pieces are collected once (a BFCL multi-turn suite
# offers 192 tools: 192 searches of every response line cost more than its check).
_PIECES_FROM = 16


class ToolNeedles:
    """The tool filter's rule: the tools of a catalogue whose needle (the name as JSON,
    `"name"`) is in a line."""

    def __init__(self, tools: list[str]) -> None:
        self._needles = [(tool, tool_needle(tool)) for tool in tools]

    def named(self, body: str | None) -> list[str]:
        """The tools named in `body`, in catalogue order. A needle without a quote inside is
        in the text exactly when its inside is the text between two quotes of it that follow
        one another, so many needles are looked up in those pieces. (A few substring searches
        cost fewer instructions than one regular expression's pass over the line.)"""
        if not body:
            return []
        needles = self._needles
        if len(needles) < _PIECES_FROM:
            return [tool for tool, needle in needles if needle in body]
        pieces = set(body.split('"')[1:-1])
        return [tool for tool, needle in needles
                if (needle in body if '"' in needle[1:-1] else needle[1:-1] in pieces)]


def mark_cases(conn: sqlite3.Connection, suite: str, tools: list[str]) -> None:
    """Mark a suite's cases, unless they are marked already (a suite's cases never change
    under its fingerprint)."""
    if conn.execute(_SUITE_MARKED, [suite]).fetchone():
        return
    conn.execute(_CASE_TAGS, [suite])
    mark_expected(conn, suite)
    needles = ToolNeedles(tools)
    conn.executemany(_CASE_MARK, (
        (suite, f"tool:{tool}", case_id)
        for case_id, body in conn.execute("SELECT case_id, body FROM cases WHERE suite = ?",
                                          [suite])
        for tool in needles.named(body)))
    conn.execute(_CASE_MARK, [suite, "", ""])


def mark_expected(conn: sqlite3.Connection, suite: str) -> None:
    """Mark each of the suite's cases with the tool it expects first (`expect:` marks)."""
    conn.execute(_CASE_EXPECTS, [suite])


class AttemptMarks:
    """The attempt_tools rows of a run's attempts, found in each response line as it is
    stored (the rule write_attempt_marks applies to the stored lines)."""

    def __init__(self, run_id: int, tools: list[dict[str, Any]]) -> None:
        self._run_id = run_id
        self._needles = ToolNeedles(tool_names(tools))

    def of(self, case_id: str, repeat: int, body: str) -> list[tuple[str | int, ...]]:
        run_id = self._run_id
        return [(run_id, tool, case_id, repeat) for tool in self._needles.named(body)]


def insert_attempt_marks(conn: sqlite3.Connection, rows: list[tuple[str | int, ...]]) -> None:
    """Insert attempt_tools rows (AttemptMarks.of), in the caller's transaction."""
    conn.executemany(_ATTEMPT_TOOL, rows)


def write_attempt_marks(conn: sqlite3.Connection, run_id: int, *,
                        attempts_marked: bool = False) -> None:
    """Mark a run's attempts (and its suite's cases, when they are not), replacing the run's
    earlier marks, in the caller's transaction. `attempts_marked`: the run's attempt_tools
    rows were written with its attempts (AttemptMarks); only the run is marked."""
    if not attempts_marked:
        conn.execute("DELETE FROM attempt_tools WHERE run = ?", [run_id])
    conn.execute("DELETE FROM attempt_tool_runs WHERE run = ?", [run_id])
    found = conn.execute("SELECT runs.suite, suites.tools FROM runs LEFT JOIN suites "
                         "ON suites.fingerprint = runs.suite WHERE runs.id = ?",
                         [run_id]).fetchone()
    if found is None:
        return
    suite, tools_json = found
    tools = tool_names(json.loads(tools_json)) if tools_json else []
    mark_cases(conn, suite, tools)
    if attempts_marked:
        conn.execute("INSERT INTO attempt_tool_runs (run, tools) VALUES (?, ?)",
                     [run_id, json.dumps(tools)])
        return
    needles = ToolNeedles(tools)
    # a response without a verdict is no attempt of the filters: it is dropped when read
    conn.executemany(_ATTEMPT_TOOL, (
        (run_id, tool, case_id, repeat)
        for case_id, repeat, body in conn.execute(
            "SELECT case_id, repeat, body FROM responses WHERE "
            + _RUN_RANGE.format(alias="responses", table="responses"), [run_id])
        for tool in needles.named(body)))
    conn.execute("INSERT INTO attempt_tool_runs (run, tools) VALUES (?, ?)",
                 [run_id, json.dumps(tools)])


def verdict_condition(verdict: str | None) -> tuple[str, list[Any]]:
    """The verdict filter on verdicts AS v: its status, tool or arguments verdict, or `fail`
    (scored and not fully right)."""
    if verdict == "fail":
        return "v.status = 'scored' AND v.right_arguments = 0", []
    if verdict:
        return "(v.status = ? OR v.tool = ? OR v.arguments = ?)", [verdict] * 3
    return "", []


class WebRows(StoreBase):
    """Store methods for serve's attempt filters (a mixin of Store)."""

    def save_attempt_marks(self, run_id: int, *, attempts_marked: bool = False) -> None:
        """Mark the run's attempts: called where its scores are written (finishing it, or a
        merge adding to it), in that transaction (`attempts_marked`: write_attempt_marks)."""
        write_attempt_marks(self.db.conn, run_id, attempts_marked=attempts_marked)

    def marked_tools(self, run_id: int) -> list[str] | None:
        """The tools a finished run's attempts are marked for; None when they are not marked."""
        row = self.db.execute(
            "SELECT attempt_tool_runs.tools FROM attempt_tool_runs JOIN runs "
            "ON runs.id = attempt_tool_runs.run WHERE run = ? AND runs.status = 'done'",
            [run_id]).fetchone()
        return json.loads(row[0]) if row else None

    def marked_attempt_rows(self, run_id: int, suite: str, *, verdict: str | None,
                            tag: str | None, tool: str | None, case_ids: list[str] | None,
                            limit: int, offset: int) -> tuple[int, list[dict[str, Any]]]:
        """attempt_rows read through the marks: the run's verdicts in table order (or the
        attempts the tool marks), a tag's cases from case_marks."""
        where: list[str] = []
        params: list[Any] = []
        condition, values = verdict_condition(verdict)
        if condition:
            where.append(condition)
            params += values
        if tag:
            where.append("v.case_id IN (SELECT case_id FROM case_marks WHERE suite = ? "
                         "AND mark = ?)")
            params += [suite, f"tag:{tag}"]
        if case_ids is not None:
            where.append(f"v.case_id IN ({', '.join('?' * len(case_ids))})")
            params += case_ids
        if tool:
            hits = _TOOL_HITS
            source = ("FROM hit CROSS JOIN verdicts AS v ON v.run = ?1 AND v.case_id = hit.case_id "
                      "AND v.repeat = hit.repeat WHERE 1")
            head = [run_id, tool, suite]
        else:
            hits = ""
            source = "FROM verdicts AS v WHERE " + _RUN_RANGE.format(alias="v", table="verdicts")
            head = [run_id]
        # SQLite numbers a bare ? one past the highest number before it: ?1 (?2, ?3) are the
        # run (the tool, the suite), the filters' values follow in order
        extra = "".join(f" AND {w}" for w in where)
        total = self.db.execute(f"{hits}SELECT COUNT(*) {source}{extra}",
                                [*head, *params]).fetchone()[0]
        page_source = source if tool else "FROM verdicts AS v WHERE v.run = ?1"
        rows = list(self.db.query(
            f"{hits}SELECT v.*, c.tags AS tags, c.expect_type AS expect_type FROM "
            f"(SELECT v.rowid AS id {page_source}{extra} ORDER BY v.case_id, v.repeat "
            "LIMIT ? OFFSET ?) AS page JOIN verdicts AS v ON v.rowid = page.id "
            "LEFT JOIN cases AS c ON c.suite = ? AND c.case_id = v.case_id "
            "ORDER BY v.case_id, v.repeat",
            [*head, *params, limit, offset, suite]))
        return total, rows

