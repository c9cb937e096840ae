"""What the linear-time pattern engine costs, beside Python's re (what callgate used before).

Usage: uv run python benchmarks/pattern_engine.py

Measured in the same run, in CPU time, best of 3 or 5 rounds, both sides taking turns:

1. Validating every call's arguments in the bundled example suites' recorded responses and in
   the BFCL fixtures (each case answered right and perturbed, as the tests do): the compiled
   check, and jsonschema's full list of errors where it rejects. "linear" is callgate's
   validator (suites/schemas.py: jsonschema-rs and jsonschema both matching patterns with the
   regex crate); "re" is the path before it: jsonschema-rs with each `pattern` turned into a
   format running Python's re.search, and plain jsonschema (Python's re) for the errors. The
   work is otherwise the same on both sides.
2. One match: every (pattern, string) pair of those calls, matched by `search` and by
   re.search.
3. The issue's example: ^(\\w+\\s?)+$ against a prefix of the Welsh place name plus a dot, by
   re at growing lengths (each letter about doubles it) and by `search` at full length.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema_rs
from jsonschema import Draft7Validator

from callgate.checks.parsing import parse_calls
from callgate.checks.validation import compiled_check
from callgate.cli.demo import example_path
from callgate.importers.bfcl import CATEGORIES, import_category
from callgate.suites.responses import parse_response
from callgate.suites.schemas import ONE_SCHEMA, SCHEMA_LISTS, SCHEMA_MAPS, search
from callgate.suites.suite import Suite, load_suite

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the BFCL fixture
from bfcl_fixture import FIXTURES as BFCL
from bfcl_fixture import load_harness

BFCL_CATEGORIES = tuple(CATEGORIES)
WELSH = "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch."
NAME_PATTERN = r"^(\w+\s?)+$"

Call = tuple[str, Any]  # (tool, arguments)


def calls_of(raws: list[dict[str, Any]]) -> list[Call]:
    found: list[Call] = []
    for raw in raws:
        response = parse_response(raw)
        tool_calls = list(response.message.tool_calls) if response.message else []
        for turn in response.turns or ():
            tool_calls += turn.tool_calls
        found += [(c.name, c.arguments) for c in parse_calls(tool_calls)
                  if c.arguments is not None]
    return found


def bundled() -> list[tuple[Suite, list[Call]]]:
    out = []
    for root in sorted(p for p in example_path().parent.iterdir() if (p / "tools.json").exists()):
        raws = [json.loads(text) for path in sorted(root.glob("responses-*.jsonl"))
                for text in path.read_text().splitlines() if text.strip()]
        out.append((load_suite(root), calls_of(raws)))
    return out


def bfcl(tmp: Path) -> list[tuple[Suite, list[Call]]]:
    harness = load_harness()
    out = []
    for category in BFCL_CATEGORIES:
        suite = load_suite(import_category(BFCL / "data", category, tmp / category).out)
        raws = [{"case_id": case.id, "repeat": repeat, "response": message}
                for case in suite.cases.values()
                for repeat, (_, message) in enumerate(harness.perturbations(suite, case))]
        out.append((suite, calls_of(raws)))
    return out


# --------------------------------------------------------------------------- the two sides


def with_re_formats(schema: Any, formats: dict[str, Callable[[str], bool]]) -> Any:
    """The schema as the compiled path took it before (the old _for_jsonschema_rs of
    checks/validation.py): each `pattern` a format running Python's re.search, and a type list
    beside each bound."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for keyword in ONE_SCHEMA:
        if isinstance(out.get(keyword), dict):
            out[keyword] = with_re_formats(out[keyword], formats)
    for keyword in SCHEMA_LISTS:
        if isinstance(out.get(keyword), list):
            out[keyword] = [with_re_formats(item, formats) for item in out[keyword]]
    for keyword in SCHEMA_MAPS:
        if isinstance(out.get(keyword), dict):
            out[keyword] = {name: with_re_formats(item, formats)
                            for name, item in out[keyword].items()}
    also: list[dict[str, Any]] = []
    pattern = out.pop("pattern", None)
    if isinstance(pattern, str):
        name = f"re-pattern-{len(formats)}"
        regex = re.compile(pattern)
        formats[name] = lambda value, regex=regex: bool(regex.search(value))
        also.append({"format": name})
    elif pattern is not None:
        out["pattern"] = pattern
    if any(key in out for key in ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum")):
        also.append({"type": ["array", "boolean", "null", "number", "object", "string"]})
    if also:
        out["allOf"] = [*out.get("allOf", []), *also]
    return out


def format_names(schema: Any) -> set[str]:
    if isinstance(schema, list):
        return set().union(*(format_names(item) for item in schema))
    if not isinstance(schema, dict):
        return set()
    own = {schema["format"]} if isinstance(schema.get("format"), str) else set()
    return own.union(*(format_names(value) for value in schema.values()))


Side = tuple[Callable[[Any], bool] | None, Any]  # (compiled check, full validator)


def linear_side(suite: Suite, tool: str) -> Side:
    validator = suite.validators[tool]
    return compiled_check(validator), validator


_RE_SIDES: dict[int, Side] = {}


def re_side(suite: Suite, tool: str) -> Side:
    """Built once per tool, as the compiled path keeps its own with each validator."""
    ours = suite.validators[tool]
    if id(ours) not in _RE_SIDES:
        _RE_SIDES[id(ours)] = _build_re_side(ours)
    return _RE_SIDES[id(ours)]


def _build_re_side(ours: Any) -> Side:  # the suite's own schema (top_level under match.schema)
    schema = ours.schema
    validator = Draft7Validator(schema, format_checker=ours.format_checker)
    if "patternProperties" in json.dumps(schema):  # the compiled path left these to jsonschema
        return None, validator
    formats: dict[str, Callable[[str], bool]] = {}
    converted = with_re_formats(schema, formats)
    checker = ours.format_checker
    for name in format_names(converted) - set(formats):  # as the compiled path plugs them in
        formats[name] = lambda value, name=name: (checker is None
                                                  or bool(checker.conforms(value, name)))
    try:
        compiled = jsonschema_rs.Draft7Validator(converted, formats=formats,
                                                 validate_formats=True, offline=True)
        return compiled.is_valid, validator
    except Exception:
        return None, validator


def check_all(work: list[tuple[Side, Any]]) -> int:
    failing = 0
    for (check, validator), args in work:
        try:
            if check is not None and check(args):
                continue
        except Exception:
            pass
        failing += bool(list(validator.iter_errors(args)))
    return failing


def best_cpu(*runs: Callable[[], object], rounds: int = 3, passes: int = 5) -> list[float]:
    """The best CPU time of one pass of each run, the runs taking turns in each round."""
    best = [float("inf")] * len(runs)
    for _ in range(rounds):
        for index, run in enumerate(runs):
            start = time.process_time()
            for _ in range(passes):
                run()
            best[index] = min(best[index], (time.process_time() - start) / passes)
    return best


def validation(name: str, loaded: list[tuple[Suite, list[Call]]]) -> None:
    linear = [(linear_side(suite, tool), args) for suite, calls in loaded
              for tool, args in calls if tool in suite.validators]
    before = [(re_side(suite, tool), args) for suite, calls in loaded
              for tool, args in calls if tool in suite.validators]
    failing = check_all(linear), check_all(before)
    patterns = sum(json.dumps(suite.raw_tools).count('"pattern"') for suite, _ in loaded)
    t_linear, t_re = best_cpu(lambda: check_all(linear), lambda: check_all(before),
                              rounds=5, passes=40)
    print(f"{name}: {len(linear):,} calls, {patterns} patterns in the schemas, "
          f"{failing[0]:,} failing (re: {failing[1]:,})")
    print(f"  linear engine {t_linear * 1e3:8.2f} ms  ({len(linear) / t_linear:,.0f} calls/s)")
    print(f"  Python re     {t_re * 1e3:8.2f} ms  ({len(before) / t_re:,.0f} calls/s)")
    print(f"  linear / re   {t_linear / t_re:8.2f}")


def one_match(loaded: list[tuple[Suite, list[Call]]]) -> None:
    pairs = []
    for suite, calls in loaded:
        for tool, args in calls:
            properties = suite.tools[tool].function.parameters.get("properties", {})
            for key, value in args.items() if isinstance(args, dict) else ():
                sub = properties.get(key)
                pattern = sub.get("pattern") if isinstance(sub, dict) else None
                if isinstance(pattern, str) and isinstance(value, str):
                    pairs.append((pattern, value))
    same = sum(search(p, v) == bool(re.search(p, v)) for p, v in pairs)
    t_linear, t_re = best_cpu(lambda: [search(p, v) for p, v in pairs],
                              lambda: [re.search(p, v) for p, v in pairs], passes=50)
    print(f"one match, {len(pairs)} (pattern, string) pairs of the bundled calls "
          f"({same} decided alike):")
    print(f"  linear engine {t_linear / len(pairs) * 1e6:6.2f} µs a match, Python re "
          f"{t_re / len(pairs) * 1e6:6.2f} µs; linear / re {t_linear / t_re:.2f}")


def backtracking() -> None:
    print(f"{NAME_PATTERN} against a prefix of {WELSH!r} plus a dot:")
    regex = re.compile(NAME_PATTERN)
    for letters in (14, 16, 18, 20, 22):
        text = WELSH[:letters] + "."
        start = time.process_time()
        assert regex.search(text) is None
        print(f"  Python re, {letters} letters: {(time.process_time() - start) * 1e3:10.1f} ms")
    start = time.process_time()
    for _ in range(1000):
        assert not search(NAME_PATTERN, WELSH)
    print(f"  linear engine, all {len(WELSH) - 1} letters: "
          f"{(time.process_time() - start):10.4f} ms a match")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        suites = bundled()
        validation("bundled suites", suites)
        validation("BFCL fixtures", bfcl(Path(tmp)))
        one_match(suites)
        backtracking()


if __name__ == "__main__":
    main()
