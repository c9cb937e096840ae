"""Why callgate compiles tool schemas with jsonschema-rs: time three validators on real calls.

Usage: uv run python benchmarks/validator_choice.py   (fastjsonschema is a dev dependency)

The calls are every tool call in the bundled examples' recorded responses and the answers to
every imported BFCL fixture case (tests/fixtures/bfcl). Each is validated against its tool's
schema by jsonschema's `iter_errors` (the explaining path), jsonschema's `is_valid`, a
fastjsonschema function and a jsonschema-rs validator, all built once per tool, with
jsonschema's own format checkers plugged into the compiled ones. It prints calls per second
and how often each compiled validator disagrees with jsonschema, measured in the same run.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema_rs
from jsonschema import Draft7Validator

from callgate.checks.validation import surely_valid
from callgate.cli.demo import example_path
from callgate.importers.bfcl import CATEGORIES, answer_lines, import_category
from callgate.suites.suite import Suite, load_suite

BFCL_DATA = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "bfcl" / "data"


def calls_of(suite: Suite, lines: list[str]) -> list[tuple[Draft7Validator, dict[str, Any]]]:
    found = []
    for line in lines:
        item = json.loads(line)
        messages = item.get("turns") or [item.get("response") or {}]
        for message in messages:
            for call in message.get("tool_calls") or []:
                name = call["function"]["name"]
                try:
                    args = json.loads(call["function"]["arguments"] or "{}")
                except json.JSONDecodeError:
                    continue
                if name in suite.validators and isinstance(args, dict):
                    found.append((suite.validators[name], args))
    return found


def workload(tmp: Path) -> list[tuple[Draft7Validator, dict[str, Any]]]:
    calls = []
    for name in ("order_store", "order_support"):
        root = example_path(f"examples/{name}")
        suite = load_suite(root)
        for responses in sorted(root.glob("responses-*.jsonl")):
            calls += calls_of(suite, [t for t in responses.read_text().splitlines() if t.strip()])
    for category in CATEGORIES:
        suite = load_suite(import_category(BFCL_DATA, category, tmp / category).out)
        calls += calls_of(suite, list(answer_lines(suite)))
    return calls


def format_functions(validator: Draft7Validator) -> dict[str, Callable[[str], bool]]:
    checker = validator.format_checker
    if checker is None:
        return {}
    return {fmt: (lambda value, fmt=fmt: checker.conforms(value, fmt)) for fmt in checker.checkers}


def rate(calls: list[Any], check: Callable[[int, dict[str, Any]], Any]) -> float:
    start = time.perf_counter()
    for index, (_, args) in enumerate(calls):
        check(index, args)
    return len(calls) / (time.perf_counter() - start)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        calls = workload(Path(tmp))
    calls = calls * max(1, 20_000 // len(calls))
    fast: dict[int, Any] = {}
    rust: dict[int, Any] = {}
    for validator, _ in calls:
        if id(validator) not in fast:
            formats = format_functions(validator)
            fast[id(validator)] = fastjsonschema.compile(validator.schema, formats=formats)
            rust[id(validator)] = jsonschema_rs.Draft7Validator(
                validator.schema, formats=formats, validate_formats=bool(formats)
            )

    def fjs_ok(index: int, args: dict[str, Any]) -> bool:
        try:
            fast[id(calls[index][0])](args)
            return True
        except fastjsonschema.JsonSchemaValueException:
            return False

    def rs_ok(index: int, args: dict[str, Any]) -> bool:
        return rust[id(calls[index][0])].is_valid(args)

    def js_ok(index: int, args: dict[str, Any]) -> bool:
        return calls[index][0].is_valid(args)

    def js_errors(index: int, args: dict[str, Any]) -> list[Any]:
        return list(calls[index][0].iter_errors(args))

    def callgate_ok(index: int, args: dict[str, Any]) -> bool:
        return surely_valid(calls[index][0], args)

    truth = [js_ok(i, a) for i, (_, a) in enumerate(calls)]
    print(f"{len(calls):,} calls over {len(fast)} tool schemas; {truth.count(False)} invalid")
    for label, check in (
        ("jsonschema iter_errors (today)", js_errors),
        ("jsonschema is_valid", js_ok),
        ("fastjsonschema", fjs_ok),
        ("jsonschema-rs", rs_ok),
        ("callgate fast path (rs + guards)", callgate_ok),
    ):
        per_second = rate(calls, check)
        if check in (fjs_ok, rs_ok, callgate_ok):
            differ = sum(check(i, a) != truth[i] for i, (_, a) in enumerate(calls))
            note = f"  {differ} verdicts differ from jsonschema"
        else:
            note = ""
        print(f"{label:<32}{per_second:>12,.0f} calls/s{note}")


if __name__ == "__main__":
    main()
