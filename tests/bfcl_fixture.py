"""BFCL's vendored checker and the harness around it (tests/fixtures/bfcl), loaded once under
the name `bfcl_harness`, for the tests and for the benchmarks that compare with BFCL."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from typing import Any

import paths

FIXTURES = paths.FIXTURES / "bfcl"
DATA = FIXTURES / "data"


def load_harness() -> Any:
    """tests/fixtures/bfcl/harness.py as a module (registered before it runs: its dataclasses
    look themselves up in sys.modules)."""
    if "bfcl_harness" in sys.modules:
        return sys.modules["bfcl_harness"]
    spec = importlib.util.spec_from_file_location("bfcl_harness", FIXTURES / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bfcl_harness"] = module
    spec.loader.exec_module(module)
    return module


def callgate_verdict(suite_dir: Path, case_id: str, calls: list[tuple[str, Any]]) -> Any:
    """callgate's verdict on a response making these calls (name, arguments) to a case."""
    from callgate.checks.check import check_response
    from callgate.importers import bfcl
    from callgate.suites.responses import parse_response
    from callgate.suites.suite import load_suite

    suite = load_suite(suite_dir)
    case = suite.cases[case_id]
    response = parse_response({"case_id": case_id, "response": bfcl.message(calls)})
    schemas = suite.parameter_schemas
    return check_response(case, response, schemas, suite.validators, rules=suite.match)


def bfcl_valid(category: str, case_id: str, calls: list[tuple[str, Any]]) -> bool:
    """BFCL's own checker on the same response, for a case of the committed sample."""
    from callgate.importers import bfcl

    data = bfcl.read_category(DATA, category)
    entry = next(e for e in data.entries if e.id == case_id)
    names = {bfcl.openai_name(f.name): bfcl.openai_name(f.name) for f in entry.function}
    return bool(reference().valid(category, entry, data.answers.get(case_id),
                                  bfcl.message(calls), names))


@functools.cache
def reference() -> Any:
    """BFCL's verdicts (harness.Reference) from the copied checker, loaded once."""
    harness = load_harness()
    return harness.Reference(harness.load_ast_checker())
