"""What `callgate merge` checks in a store before it copies anything from it.

A store handed to merge may come from anywhere (a CI artifact, a hand edit, another tool), and
merge counts its verdicts in the figures: every row merge copies is checked against the
schema's rules and against the input's own suite first, and the first bad row refuses the
input, naming the store, the table, the row and the field (exit 2, nothing written).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from callgate.checks.verdict import ArgsVerdict, SchemaKind, Status, ToolVerdict, Verdict
from callgate.errors import InputError, from_validation_error
from callgate.judging.judge import Label
from callgate.reading import canonical_json, loads
from callgate.store.db import Store
from callgate.suites.faults import FaultPlanFile
from callgate.suites.responses import INT64_MAX

_TOOL_CHOICES = ("pass", "fail")
_SPLITS = ("dev", "test")


class _Row:
    """One row of an input store, for naming it in a refusal."""

    def __init__(self, path: Path, table: str, row: dict[str, Any], key: str) -> None:
        self.path, self.table, self.row, self.key = path, table, row, key

    def refuse(self, field: str, message: str) -> InputError:
        return InputError(self.path, message, field=f"table {self.table}, {self.key}: {field}")

    def json(self, field: str, want: type | tuple[type, ...] = object, *,
             nullable: bool = False) -> Any:
        """The column `field` read as JSON of type `want` (a dict, a list, ...)."""
        text = self.row[field]
        if text is None and nullable:
            return None
        if not isinstance(text, str):
            raise self.refuse(field, "must be JSON text")
        try:
            value = loads(text)
        except ValueError as exc:
            raise self.refuse(field, f"not JSON ({exc})") from None
        if not isinstance(value, want):
            raise self.refuse(field, f"must be a JSON {_kind(want)}")
        return value

    def one_of(self, field: str, allowed: tuple[str, ...]) -> None:
        if self.row[field] not in allowed:
            raise self.refuse(field, f"{_shown(self.row[field])} is not one of "
                                     f"{', '.join(allowed)}")

    def text(self, *fields: str) -> None:
        for field in fields:
            if not isinstance(self.row[field], str) or not self.row[field]:
                raise self.refuse(field, "must be a non-empty text")

    def count(self, field: str, *, lowest: int = 0, highest: int = INT64_MAX,
              nullable: bool = True) -> None:
        value = self.row[field]
        if value is None and nullable:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not lowest <= value <= highest:
            raise self.refuse(field, f"{_shown(value)} is not an integer from {lowest} to "
                                     f"{'2^63-1' if highest == INT64_MAX else highest}")

    def amount(self, field: str) -> None:
        value = self.row[field]
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and value >= 0):
            raise self.refuse(field, f"{_shown(value)} is not a number at least 0")


def _kind(want: type | tuple[type, ...]) -> str:
    names: dict[type, str] = {dict: "object", list: "array", str: "string"}
    wanted = want if isinstance(want, tuple) else (want,)
    return " or ".join(names.get(w, w.__name__) for w in wanted)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# The text values an enum column may take, by table: checked here, and handed to the store,
# whose cheap SQL filter (store/merge_rows.py) flags the rows to check.
_ALLOWED: dict[str, dict[str, tuple[str, ...]]] = {
    "calibration_items": {"split": _SPLITS, "label_tool_choice": _TOOL_CHOICES,
                          "label_arguments": get_args(Label)},
    "verdicts": {"status": get_args(Status), "tool": get_args(ToolVerdict),
                 "arguments": get_args(ArgsVerdict), "schema_kind": get_args(SchemaKind)},
    "judgements": {"tool_choice": _TOOL_CHOICES, "arguments": get_args(Label)},
}


def _suspects(source: Store, table: str, run: dict[str, Any] | None = None
              ) -> Iterator[dict[str, Any]]:
    """The rows of `table` the store flags as possibly unsound (of `run`, when given)."""
    for row in source.merge_input_suspects(
            table, _ALLOWED.get(table), run=None if run is None else run["id"],
            suite=None if run is None else run["suite"]):
        yield row.columns


def check_merge_input(source: Store) -> None:
    """Refuse `source` (InputError naming it, the table, the row and the field) unless every
    row merge would copy from it is sound."""
    path = source.path
    suites = {}
    for row in _suspects(source, "suites"):
        at = _Row(path, "suites", row, f"suite {_shown(row['fingerprint'])}")
        at.text("fingerprint", "name")
        at.json("tools", list)
        suites[row["fingerprint"]] = row["name"]
    for row in _suspects(source, "cases"):
        at = _Row(path, "cases", row, f"case {_shown(row['case_id'])}")
        if row["suite"] not in suites:
            raise at.refuse("suite", f"{_shown(row['suite'])} has no row in table suites")
        at.text("case_id", "expect_type")
        tags = at.json("tags", list)
        if not all(isinstance(tag, str) for tag in tags):
            raise at.refuse("tags", "must be a JSON array of strings")
        at.json("body", dict)
    for row in _suspects(source, "calibration_items"):
        at = _Row(path, "calibration_items", row,
                  f"set {_shown(row['set_name'])} item {_shown(row['item_id'])}")
        for column, allowed in _ALLOWED["calibration_items"].items():
            at.one_of(column, allowed)
        at.json("body", dict)
    for table, key, columns in (("certificates", "fingerprint", ("body",)),
                                ("judge_cache", "key", ("output",)),
                                ("live_responses", "key", ("request", "line"))):
        for row in _suspects(source, table):
            at = _Row(path, table, row, f"{key} {_shown(row[key])}")
            for column in columns:
                at.json(column, dict)
    for run in source.merge_input_runs():
        _check_run(path, source, run.columns, suites)


def _shard_numbers(shards: list[Any], count: int) -> bool:
    numbers = [k for k in shards if isinstance(k, int) and not isinstance(k, bool)]
    return bool(shards) and len(numbers) == len(set(numbers)) == len(shards) and all(
        1 <= k <= count for k in numbers)


def _check_fault_plan(at: _Row) -> None:
    """runs.fault_plan (a store made before it has no such column): the plan a run was made
    with, {"fingerprint", "plan"}, the print the plan's own (merge reads its after_fault)."""
    kept = at.json("fault_plan", dict, nullable=True) if "fault_plan" in at.row else None
    if kept is None:
        return
    try:
        plan = FaultPlanFile.model_validate(kept.get("plan"))
    except ValidationError as exc:
        raise at.refuse("fault_plan", f"not a fault plan ({exc.errors()[0]['msg']})") from None
    text = canonical_json(plan.model_dump(mode="json"))
    if kept.get("fingerprint") != hashlib.sha256(text.encode()).hexdigest():
        raise at.refuse("fault_plan", "its fingerprint is not its plan's")


def _check_run(path: Path, source: Store, run: dict[str, Any], suites: dict[str, str]) -> None:
    run_id = run["id"]
    at = _Row(path, "runs", run, f"run {run_id}")
    at.text("suite_name", "model", "release", "source", "callgate_version")
    if run["suite"] not in suites:
        raise at.refuse("suite", f"{_shown(run['suite'])} has no row in table suites of this "
                                 "store")
    at.count("shard_count", lowest=1, highest=1_000_000)
    shards = at.json("shards", list, nullable=True)
    if (shards is None) != (run["shard_count"] is None):
        raise at.refuse("shards", "shards and shard_count must be both set or both empty")
    if shards is not None and not _shard_numbers(shards, run["shard_count"]):
        raise at.refuse("shards", f"{_shown(run['shards'])} is not a list of distinct shard "
                                  f"numbers from 1 to {run['shard_count']}")
    at.json("gate", dict, nullable=True)
    at.json("scores", dict, nullable=True)
    _check_fault_plan(at)

    def attempt(table: str, row: dict[str, Any]) -> _Row:
        found = _Row(path, table, row, f"run {run_id} case {_shown(row['case_id'])} repeat "
                                       f"{_shown(row['repeat'])}")
        if not source.merge_input_has_case(run["suite"], row["case_id"]):
            raise found.refuse("case_id", f"not a case of suite {run['suite_name']} in this "
                                          "store")
        found.count("repeat", nullable=False)
        return found

    for row in _suspects(source, "responses", run):
        found = attempt("responses", row)
        for column in ("cost", "latency_ms"):
            found.amount(column)
        for column in ("prompt_tokens", "completion_tokens"):
            found.count(column)
        found.json("body")
    for row in _suspects(source, "verdicts", run):
        found = attempt("verdicts", row)
        _check_verdict(found, row)
        if not source.merge_input_has_response(run_id, row["case_id"], row["repeat"]):
            raise found.refuse("case_id", "a verdict without a response (no row in table "
                                          "responses)")
    for row in _suspects(source, "judgements", run):
        found = attempt("judgements", row)
        for column, allowed in _ALLOWED["judgements"].items():
            found.one_of(column, allowed)
    for table in ("run_requests", "run_turns"):
        for row in _suspects(source, table, run):
            attempt(table, row)


_FLAG_RULES: tuple[tuple[str, Callable[[Verdict], bool], str], ...] = (
    ("right_tool", lambda v: not v.right_tool or (v.status == "scored" and v.tool == "right"),
     "is true, but the verdict is {status}/{tool}"),
    ("right_arguments", lambda v: not v.right_arguments or (
        v.right_tool and v.arguments in ("right", "not_applicable")),
     "is true, but the verdict is {status}/{tool}/{arguments}"),
)


def _check_verdict(at: _Row, row: dict[str, Any]) -> None:
    """The verdict's enums and types (the Verdict model's), and flags that agree with them."""
    fields = {k: v for k, v in row.items() if k != "run"}
    try:
        verdict = Verdict.model_validate(fields)
    except ValidationError as exc:
        raise from_validation_error(at.path, None, exc,
                                    prefix=f"table {at.table}, {at.key}: ") from None
    for field, holds, message in _FLAG_RULES:
        if not holds(verdict):
            raise at.refuse(field, message.format(status=verdict.status, tool=verdict.tool,
                                                  arguments=verdict.arguments))
