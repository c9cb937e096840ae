"""The probe with its quick pass/fail path (checks/probe_fast.py) finds exactly what it found
when it asked check_response for every made-up answer (tests/checks/probe_reference.py, a copy
of the probe before the change): the same findings, reasons, order and answer count, on the
bundled example, the 1,350-case suite of tests/gating/test_what_to_fix.py and a generated
300-case suite of every expectation kind."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import probe_reference
import pytest
from multiturn import mt_case, plain_suite

from callgate.checks import probe
from callgate.suites.suite import load_suite

EXAMPLE = Path(probe.__file__).parents[1] / "examples" / "order_support"


def _plain(report: Any) -> tuple[Any, ...]:
    return (report.suite, report.cases, report.answers,
            [dataclasses.astuple(f) for f in report.weak],
            [dataclasses.astuple(f) for f in report.not_probed])


def _kinds(i: int) -> dict[str, Any]:
    order = {"order_id": f"ord_{i}"}
    one = [{"tool": "lookup_order", "args": order}]
    two = [*one, {"tool": "track_shipment", "args": order}]
    kinds: list[dict[str, Any]] = [
        mt_case(f"c{i}", {"type": "calls", "calls": one}),
        mt_case(f"c{i}", {"type": "calls", "mode": "unordered", "calls": two}),
        mt_case(f"c{i}", {"type": "calls", "mode": "subset", "calls": two}),
        mt_case(f"c{i}", {"type": "calls", "mode": "superset", "calls": one}),
        mt_case(f"c{i}", {"type": "calls", "calls": [{"tool": "cancel_order", "args": {
            "order_id": f"ord_{i}", "reason": "duplicate"}}]}),
        mt_case(f"c{i}", {"type": "calls", "calls": [{"tool": "lookup_order", "args": {
            "order_id": {"regex": "." if i % 2 else f"^ord_{i}$"}}}]}),
        mt_case(f"c{i}", {"type": "alternatives", "alternatives": [one, two[1:]]}),
        mt_case(f"c{i}", {"type": "trajectory", "calls": two}),
        mt_case(f"c{i}", {"type": "no_call"}),
        mt_case(f"c{i}", {"type": "any_call"}),
        mt_case(f"c{i}", {"type": "calls", "calls": one}, never_right="no such order"),
        mt_case(f"c{i}", {"type": "no_call"}, never_right="no answer is right"),
        mt_case(f"c{i}", {"type": "judge", "rubric": "helpful"}),
    ]
    case = kinds[i % len(kinds)]
    case["id"] = f"case-{i:03d}"
    return case


def _what_to_fix(root: Path) -> Path:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "gating"))
    try:
        import test_what_to_fix
    finally:
        sys.path.pop(0)
    return test_what_to_fix.project(root)[0]


@pytest.mark.parametrize("which", ["example", "generated", "what_to_fix"])
def test_the_probe_finds_what_it_found_before(which: str, tmp_path: Path) -> None:
    if which == "example":
        path = EXAMPLE
    elif which == "generated":
        path = plain_suite(tmp_path / "s", [_kinds(i) for i in range(300)])
    else:
        path = _what_to_fix(tmp_path)
    suite = load_suite(path)
    before = probe_reference.probe_suite(suite)
    after = probe.probe_suite(suite)
    assert _plain(after) == _plain(before)
    assert before.answers > 5 * len(suite.cases) // 2
    assert bool(before.weak) == (which != "what_to_fix")


def test_the_generated_suite_has_every_kind_of_finding(tmp_path: Path) -> None:
    """The generated suite exercises the quick path's passes and failures both."""
    report = probe.probe_suite(load_suite(plain_suite(tmp_path / "s",
                                                      [_kinds(i) for i in range(300)])))
    kinds = {f.probe for f in report.weak}
    assert kinds == {"do-nothing", "oracle", "perturbation"}
    assert {f.reason for f in report.not_probed} == {"decided by a judge"}


def test_the_probe_finds_what_it_found_before_on_imported_bfcl_suites(tmp_path: Path) -> None:
    """Every BFCL category of tests/fixtures/bfcl, imported, with BFCL's oracle arguments as
    scoring/probing.py passes them."""
    from bfcl_fixture import DATA

    from callgate.importers.bfcl import CATEGORIES, import_category
    from callgate.importers.bfcl.answers import answer_arguments

    weak = 0
    for category in CATEGORIES:
        suite = load_suite(import_category(DATA, category, tmp_path / category).out)
        arguments = answer_arguments if suite.match.values == "bfcl" else None
        before = probe_reference.probe_suite(suite, arguments=arguments)
        assert _plain(probe.probe_suite(suite, arguments=arguments)) == _plain(before), category
        weak += len(before.weak)
    assert weak > 0
