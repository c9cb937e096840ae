"""The store's reads for checking a store before `callgate merge` copies from it
(merging/merge_input.py): its finished runs and, per table, the rows that might break a rule.

A store of a million attempts is checked at SQLite's speed: a cheap condition in SQL holds for
every row the checks would refuse (and for few others), and only the rows it flags are read and
checked, and named, in Python. The values a column may take (a verdict's status, a label) are
the checks' rules, handed in as `allowed`; the columns' shapes (JSON objects, counts) are the
schema's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from callgate.store.base import StoreBase

Allowed = Mapping[str, tuple[str, ...]]  # a column's allowed text values, by column


class InputRow(NamedTuple):
    """A row of an input store, its columns as stored: unchecked, so JSON columns stay text
    (a StoredRun would parse them, and the check must name the column that is not JSON)."""

    table: str
    columns: dict[str, Any]


def _json_suspect(column: str, kind: str | None = None) -> str:
    """Not JSON (of `kind`, when given). (JSON nested too deep to read is not looked for: the
    store holds what callgate read, within its limits, and counting brackets in every body
    would double the merge's time.)"""
    shape = (f"CASE WHEN json_valid({column}) THEN json_type({column}) END IS NOT '{kind}'"
             if kind else f"NOT coalesce(json_valid({column}), 0)")
    return f"(typeof({column}) != 'text' OR {shape})"


def _not_in(column: str, allowed: tuple[str, ...], nullable: bool = False) -> str:
    values = ", ".join("'{}'".format(value.replace("'", "''")) for value in allowed)
    test = f"coalesce({column}, '') NOT IN ({values}) OR typeof({column}) != 'text'"
    return f"({column} IS NOT NULL AND ({test}))" if nullable else f"({test})"


def _not_count(column: str) -> str:
    return f"({column} IS NOT NULL AND (typeof({column}) != 'integer' OR {column} < 0))"


def _not_amount(column: str) -> str:
    return (f"({column} IS NOT NULL AND (typeof({column}) NOT IN ('integer', 'real') "
            f"OR {column} < 0))")


def _not_text(column: str) -> str:
    return f"(typeof({column}) != 'text' OR {column} = '')"


def _or(*conditions: str) -> str:
    return " OR ".join(conditions)


_ATTEMPT = _or("typeof(case_id) != 'text'",
               "case_id NOT IN (SELECT case_id FROM cases WHERE suite = :suite)",
               "typeof(repeat) != 'integer'", "repeat < 0")
_NOT_TEXT_TAG = ("(CASE WHEN json_valid(tags) AND json_type(tags) = 'array' THEN (SELECT "
                 "count(*) FROM json_each(row.tags) WHERE type != 'text') ELSE 1 END) > 0")


def _verdicts_suspect(allowed: Allowed) -> str:
    return _or(
        _ATTEMPT, _not_in("status", allowed["status"]),
        _not_in("tool", allowed["tool"], nullable=True),
        _not_in("arguments", allowed["arguments"], nullable=True),
        _not_in("schema_kind", allowed["schema_kind"], nullable=True),
        "typeof(tool_reason) != 'text'", "typeof(arguments_reason) != 'text'",
        "typeof(calls) != 'integer'", "calls < 0",
        "typeof(right_tool) != 'integer'", "right_tool NOT IN (0, 1)",
        "typeof(right_arguments) != 'integer'", "right_arguments NOT IN (0, 1)",
        "violations IS NOT NULL AND (typeof(violations) != 'text' OR NOT json_valid(violations) "
        "OR json_type(violations) != 'array')",
        "right_tool = 1 AND (status IS NOT 'scored' OR tool IS NOT 'right')",
        "right_arguments = 1 AND (right_tool IS NOT 1 OR arguments IS NULL OR arguments NOT "
        "IN ('right', 'not_applicable'))",
        "NOT EXISTS (SELECT 1 FROM responses AS r WHERE r.run = row.run AND "
        "r.case_id = row.case_id AND r.repeat = row.repeat)")


def _suspect(table: str, allowed: Allowed) -> str:
    """The SQL condition that holds for every row of `table` the checks would refuse."""
    if table == "suites":
        return "1"  # few rows, all checked
    if table == "cases":
        return _or("suite NOT IN (SELECT fingerprint FROM suites)", _not_text("case_id"),
                   _not_text("expect_type"), _json_suspect("tags", "array"), _NOT_TEXT_TAG,
                   _json_suspect("body", "object"))
    if table == "calibration_items":
        return _or(*(_not_in(column, allowed[column])
                     for column in ("split", "label_tool_choice", "label_arguments")),
                   _json_suspect("body", "object"))
    if table in ("certificates", "judge_cache", "live_responses"):
        columns = {"certificates": ("body",), "judge_cache": ("output",),
                   "live_responses": ("request", "line")}[table]
        return _or(*(_json_suspect(column, "object") for column in columns))
    if table == "responses":
        return _or(_ATTEMPT, _not_amount("cost"), _not_amount("latency_ms"),
                   _not_count("prompt_tokens"), _not_count("completion_tokens"),
                   _json_suspect("body"))
    if table == "verdicts":
        return _verdicts_suspect(allowed)
    if table == "judgements":
        return _or(_ATTEMPT, _not_in("tool_choice", allowed["tool_choice"]),
                   _not_in("arguments", allowed["arguments"]))
    if table in ("run_requests", "run_turns"):
        return _ATTEMPT
    raise ValueError(f"merge copies no table {table}")


class MergeInputRows(StoreBase):
    """Store methods for checking a store before merging it (a mixin of Store)."""

    def merge_input_runs(self) -> list[InputRow]:
        """The finished runs `merge` copies from this store, for checking them first."""
        return [InputRow("runs", row) for row in self.db.query(
            "SELECT * FROM runs WHERE status = 'done' ORDER BY created_at, id")]

    def merge_input_suspects(self, table: str, allowed: Allowed | None = None, *,
                             run: int | None = None, suite: str | None = None
                             ) -> Iterator[InputRow]:
        """The rows of `table` that `merge` would copy from this store and that might break a
        rule, to be checked one by one: of one run (of suite `suite`), for a table under runs;
        `allowed` names the text values the table's enum columns may take."""
        where = f"({_suspect(table, allowed or {})})"
        params: dict[str, Any] = {}
        if run is not None:
            where += " AND run = :run"
            params = {"run": run, "suite": suite}
        for row in self.db.query(f"SELECT * FROM {table} AS row WHERE {where}", params):
            yield InputRow(table, row)

    def merge_input_has_case(self, suite: Any, case_id: Any) -> bool:
        return self.db.execute("SELECT 1 FROM cases WHERE suite = ? AND case_id = ?",
                               [suite, case_id]).fetchone() is not None

    def merge_input_has_response(self, run_id: int, case_id: Any, repeat: Any) -> bool:
        return self.db.execute(
            "SELECT 1 FROM responses WHERE run = ? AND case_id = ? AND repeat = ?",
            [run_id, case_id, repeat]).fetchone() is not None
