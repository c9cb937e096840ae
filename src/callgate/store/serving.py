"""The store's reads by suite, run and attempt (for `callgate serve`, `report --html`, the gate
and labelling), and the labels people give in serve's calibration sessions."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from callgate.store.base import StoreBase
from callgate.store.schema import _NEWEST_DONE, now
from callgate.store.web_rows import tool_names, tool_needle, verdict_condition

Row = dict[str, Any]  # a row as the table holds it, by column


class AttemptRows(TypedDict):
    """One attempt's rows (`attempt`): its verdict, and its response, case and judgement when
    stored (None otherwise)."""

    verdict: Row
    response: Row | None
    case: Row | None
    judgement: Row | None


class ServeRecords(StoreBase):
    """Store methods for the web app (a mixin of Store)."""

    # The attempt filters' marks (store/web_rows.py's WebRows, another mixin of Store)
    def marked_tools(self, run_id: int) -> list[str] | None:
        raise NotImplementedError

    def marked_attempt_rows(self, run_id: int, suite: str, *, verdict: str | None,
                            tag: str | None, tool: str | None, case_ids: list[str] | None,
                            limit: int, offset: int) -> tuple[int, list[dict[str, Any]]]:
        raise NotImplementedError

    # ----------------------------------------------------------------- the web app (serve)
    # Reads for `callgate serve` and `callgate report --html`, and the labels people give in
    # its calibration sessions. The person_labels table is created on first use.

    def release_runs(self) -> list[dict[str, Any]]:
        """(agent, models, suite_name, releases) for every agent and suite with a finished
        run; `models`: the model ids its releases ran with, comma-separated."""
        return list(self.db.query(
            "SELECT agent, GROUP_CONCAT(DISTINCT model) AS models, suite_name, "
            f"COUNT(*) AS releases FROM runs WHERE {_NEWEST_DONE} "
            "GROUP BY agent, suite_name ORDER BY agent, suite_name"))

    def suite_case_ids(self, suite_fingerprint: str) -> list[str]:
        return [row[0] for row in self.db.execute(
            "SELECT case_id FROM cases WHERE suite = ? ORDER BY case_id", [suite_fingerprint])]

    def suite_tool_names(self, suite_fingerprint: str) -> list[str]:
        row = self.db.execute("SELECT tools FROM suites WHERE fingerprint = ?",
                              [suite_fingerprint]).fetchone()
        return tool_names(json.loads(row[0])) if row else []

    def attempt_rows(self, run_id: int, *, verdict: str | None = None, tag: str | None = None,
                     tool: str | None = None, case_ids: list[str] | None = None,
                     limit: int = 100, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
        """A page of a run's attempts (verdict joined with its case's tags and expectation type)
        and how many match. `verdict` matches the status, tool or arguments verdict, or `fail`
        (scored and not fully right); `tool` matches attempts whose response or case names it.
        A finished run is filtered through its attempt marks (store/web_rows.py), which hold
        these rules applied once; otherwise the count joins nothing it does not filter on, and
        a tag is matched once a case (the suite's cases holding it), not once an attempt."""
        run = self.db.execute("SELECT suite FROM runs WHERE id = ?", [run_id]).fetchone()
        suite = run[0] if run else ""
        marked = self.marked_tools(run_id)
        if (verdict or tag or tool) and marked is not None and (not tool or tool in marked):
            return self.marked_attempt_rows(run_id, suite, verdict=verdict, tag=tag, tool=tool,
                                            case_ids=case_ids, limit=limit, offset=offset)
        where = ["v.run = ?"]
        params: list[Any] = [run_id]
        condition, values = verdict_condition(verdict)
        if condition:
            where.append(condition)
            params += values
        if tag:
            where.append("v.case_id IN (SELECT c2.case_id FROM cases AS c2, json_each(c2.tags) "
                         "WHERE c2.suite = ? AND json_each.value = ?)")
            params += [suite, tag]
        if tool:
            quoted = tool_needle(tool)
            where.append("(instr(r.body, ?) > 0 OR instr(c.body, ?) > 0)")
            params += [quoted, quoted]
        if case_ids is not None:
            where.append(f"v.case_id IN ({', '.join('?' * len(case_ids))})")
            params += case_ids
        cases = "LEFT JOIN cases AS c ON c.suite = ? AND c.case_id = v.case_id "
        responses = ("LEFT JOIN responses AS r ON r.run = v.run AND r.case_id = v.case_id "
                     "AND r.repeat = v.repeat " if tool else "")
        condition = "WHERE " + " AND ".join(where)
        if tool:  # the filter reads the response and the case
            total = self.db.execute(f"SELECT COUNT(*) FROM verdicts AS v {cases}{responses}"
                                    f"{condition}", [suite, *params]).fetchone()[0]
        else:
            total = self.db.execute(f"SELECT COUNT(*) FROM verdicts AS v {condition}",
                                    params).fetchone()[0]
        rows = list(self.db.query(
            f"SELECT v.*, c.tags AS tags, c.expect_type AS expect_type FROM verdicts AS v "
            f"{cases}{responses}{condition} ORDER BY v.case_id, v.repeat LIMIT ? OFFSET ?",
            [suite, *params, limit, offset]))
        return total, rows

    def first_responses(self, run_id: int, case_ids: list[str]) -> dict[str, str]:
        """The response line of each case's first attempt in a run, by case id."""
        if not case_ids:
            return {}
        return {case_id: body for case_id, _, body in self.db.execute(
            # SQLite takes the bare column from the row holding MIN(repeat)
            f"SELECT case_id, MIN(repeat), body FROM responses WHERE run = ? AND case_id IN "
            f"({', '.join('?' * len(case_ids))}) GROUP BY case_id", [run_id, *case_ids])}

    def judgement_count(self, run_id: int) -> int:
        count: int = self.db.execute("SELECT COUNT(*) FROM judgements WHERE run = ?",
                                     [run_id]).fetchone()[0]
        return count

    # The gate's decision on a run, kept so that pages read it instead of deciding again: one
    # row per run and key (a digest of everything the decision depends on, gating.release).
    # A cache, rebuilt from the runs' rows when missing: created on first use.

    def _gate_decisions_table(self) -> None:
        self.db.execute("CREATE TABLE IF NOT EXISTS gate_decisions (run INTEGER NOT NULL "
                        "REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL, "
                        "body TEXT NOT NULL, PRIMARY KEY (run, key))")

    def gate_decision(self, run_id: int, key: str) -> str | None:
        self._gate_decisions_table()
        row = self.db.execute("SELECT body FROM gate_decisions WHERE run = ? AND key = ?",
                              [run_id, key]).fetchone()
        return row[0] if row else None

    def save_gate_decision(self, run_id: int, key: str, body: str) -> None:
        """Keep a run's decision under its key, in place of the ones under older keys."""
        self._gate_decisions_table()
        with self.atomic():
            self.db.execute("DELETE FROM gate_decisions WHERE run = ?", [run_id])
            self.db.execute("INSERT INTO gate_decisions (run, key, body) VALUES (?, ?, ?)",
                            [run_id, key, body])

    # The decision `callgate gate` last took on a run, with the inputs it took it with (its
    # rule, quarantine, slice rule: gating.gated) and the key of the store it was taken on, so
    # that pages show that decision, not the default rule's. One row a run (m020).

    def gated_decision(self, run_id: int) -> tuple[str, str, str] | None:
        """The run's kept gate decision: (key, inputs, body), None when never gated."""
        row = self.db.execute("SELECT key, inputs, body FROM gated_decisions WHERE run = ?",
                              [run_id]).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def replace_gated_decision(self, run_id: int, was: tuple[str, str], key: str,
                               body: str) -> bool:
        """Replace the run's kept decision by one taken with the same inputs under a new key,
        only if the kept row is still (key, inputs) `was`; False when another writer kept
        another one since."""
        with self.atomic():
            changed = self.db.execute(
                "UPDATE gated_decisions SET key = ?, body = ? WHERE run = ? AND key = ? "
                "AND inputs = ?", [key, body, run_id, *was]).rowcount
        return bool(changed)

    def save_gated_decision(self, run_id: int, key: str, inputs: str, body: str) -> None:
        with self.atomic():
            self.db.execute("INSERT OR REPLACE INTO gated_decisions (run, key, inputs, body) "
                            "VALUES (?, ?, ?, ?)", [run_id, key, inputs, body])

    def attempt(self, run_id: int, case_id: str, repeat: int) -> AttemptRows | None:
        """One attempt: its verdict, response row, case row and judgement (when judged)."""
        verdict = list(self.db.query(
            "SELECT * FROM verdicts WHERE run = ? AND case_id = ? AND repeat = ?",
            [run_id, case_id, repeat]))
        if not verdict:
            return None
        run = self.run(run_id)
        response = list(self.db.query(
            "SELECT * FROM responses WHERE run = ? AND case_id = ? AND repeat = ?",
            [run_id, case_id, repeat]))
        case = list(self.db.query("SELECT * FROM cases WHERE suite = ? AND case_id = ?",
                                  [run["suite"] if run else "", case_id]))
        judgement = list(self.db.query(
            "SELECT * FROM judgements WHERE run = ? AND case_id = ? AND repeat = ?",
            [run_id, case_id, repeat]))
        return {"verdict": verdict[0], "response": response[0] if response else None,
                "case": case[0] if case else None,
                "judgement": judgement[0] if judgement else None}

    def suite_path(self, suite_fingerprint: str) -> str:
        """Where the suite was loaded from when it was stored."""
        path: str = self.db.table("suites").get(suite_fingerprint)["path"]
        return path

    def case_body(self, suite_fingerprint: str, case_id: str) -> str:
        """A stored case's JSON line."""
        body: str = self.db.table("cases").get((suite_fingerprint, case_id))["body"]
        return body

    def response_body(self, run_id: int, case_id: str, repeat: int) -> str:
        """A stored attempt's response line."""
        body: str = self.db.table("responses").get((run_id, case_id, repeat))["body"]
        return body

    def suite_tools(self, suite_fingerprint: str) -> list[dict[str, Any]]:
        row = self.db.execute("SELECT tools FROM suites WHERE fingerprint = ?",
                              [suite_fingerprint]).fetchone()
        return json.loads(row[0]) if row else []

    def calibration_sets(self) -> list[dict[str, Any]]:
        return list(self.db.query(
            "SELECT set_name, COUNT(*) AS items FROM calibration_items GROUP BY set_name "
            "ORDER BY set_name"))

    def calibration_item_rows(self, set_name: str) -> list[dict[str, Any]]:
        return list(self.db.query(
            "SELECT * FROM calibration_items WHERE set_name = ? ORDER BY item_id", [set_name]))

    def certificate_rows(self) -> list[dict[str, Any]]:
        """Every stored certificate (certified or not), newest first."""
        return list(self.db.query("SELECT * FROM certificates ORDER BY created_at DESC"))

    def _person_labels_table(self) -> None:
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS person_labels (id INTEGER PRIMARY KEY, "
            "set_name TEXT NOT NULL, item_id TEXT NOT NULL, labeller TEXT NOT NULL, "
            "tool_choice TEXT NOT NULL, arguments TEXT NOT NULL, note TEXT NOT NULL, "
            "created_at TEXT NOT NULL, line TEXT NOT NULL)")
        self.db.execute("CREATE INDEX IF NOT EXISTS person_labels_by_item "
                        "ON person_labels (set_name, item_id)")

    def _adjudications_table(self) -> None:
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS adjudications (id INTEGER PRIMARY KEY, "
            "set_name TEXT NOT NULL, item_id TEXT NOT NULL, labeller TEXT NOT NULL, "
            "tool_choice TEXT NOT NULL, arguments TEXT NOT NULL, why TEXT NOT NULL, "
            "created_at TEXT NOT NULL, line TEXT NOT NULL)")

    def replace_set_labels(self, set_name: str, labels: list[tuple[Any, ...]],
                           adjudications: list[tuple[Any, ...]]) -> None:
        """Make a set's people's labels and adjudications those a set file holds, in one
        transaction: (item_id, labeller, tool_choice, arguments, note, created_at, line) and
        (item_id, labeller, tool_choice, arguments, why, created_at, line) rows, file order."""
        self._person_labels_table()
        self._adjudications_table()
        with self.atomic():
            for table, text in (("person_labels", "note"), ("adjudications", "why")):
                self.db.execute(f"DELETE FROM {table} WHERE set_name = ?", [set_name])
                self.db.conn.executemany(
                    f"INSERT INTO {table} (set_name, item_id, labeller, tool_choice, arguments, "
                    f"{text}, created_at, line) VALUES (?,?,?,?,?,?,?,?)",
                    [(set_name, *row) for row in (labels if table == "person_labels"
                                                  else adjudications)])

    def adjudications(self, set_name: str) -> list[dict[str, Any]]:
        """The standing adjudication of each settled item of a set, oldest first."""
        self._adjudications_table()
        return list(self.db.query(
            "SELECT * FROM adjudications WHERE set_name = ? ORDER BY id", [set_name]))

    def add_person_label(self, set_name: str, item_id: str, labeller: str, tool_choice: str,
                         arguments: str, note: str, line: str) -> dict[str, Any]:
        """Store a person's label (with the set-file line it wrote); returns the row."""
        self._person_labels_table()
        with self.db.atomic():
            cursor = self.db.execute(
                "INSERT INTO person_labels (set_name, item_id, labeller, tool_choice, "
                "arguments, note, created_at, line) VALUES (?,?,?,?,?,?,?,?)",
                [set_name, item_id, labeller, tool_choice, arguments, note, now(), line])
        return next(self.db.query("SELECT * FROM person_labels WHERE id = ?",
                                  [cursor.lastrowid]))

    def person_labels(self, set_name: str) -> list[dict[str, Any]]:
        """Every person's label on a set, oldest first."""
        self._person_labels_table()
        return list(self.db.query(
            "SELECT * FROM person_labels WHERE set_name = ? ORDER BY id", [set_name]))
