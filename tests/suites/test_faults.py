"""Fault plans on the tool results' seam (docs/faults.md): each fault kind through a Python
environment, an MCP server (tests/mcp_server.py, a real subprocess) and BFCL's environment
(the classes copied under tests/fixtures/bfcl); the plan's models and the refusals of bad plans;
the seeded draw."""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from multiturn import STATE, env_suite, mt_case
from paths import FIXTURES, TESTS

from callgate.checks.parsing import ParsedCall
from callgate.checks.tool_answers import ToolAnswers
from callgate.errors import InputError
from callgate.importers.bfcl import import_category
from callgate.suites.bfcl_environment import parse_source_call
from callgate.suites.fault_runs import with_fault_plan
from callgate.suites.faults import FAULT_KINDS, FaultRule, FaultTransform, draw
from callgate.suites.interception import Applied, Replaced, ToolCallSite, ToolResults, compose
from callgate.suites.suite import Suite, load_suite
from callgate.suites.tool_messages import tool_message_content

TRAJECTORY = {"type": "trajectory", "mode": "superset", "calls": [{"tool": "lookup_order"}]}


def answers(suite: Suite, case_id: str, repeat: int = 0) -> ToolAnswers:
    case = suite.cases[case_id]
    return ToolAnswers(suite, case, suite.tool_results(case, repeat))


def call(name: str, index: int = 0, **arguments: Any) -> ParsedCall:
    return ParsedCall(index, name, arguments, None)


def faulted_case(kind: str, **rule: Any) -> dict[str, Any]:
    return mt_case("c", TRAJECTORY, state=STATE,
                   faults=[{"tool": "lookup_order", "kind": kind, "calls": [1], **rule}])


def assert_fault(kind: str, got: Any, real: Any) -> None:
    """What the agent reads for each kind, against the tool's real answer."""
    text = tool_message_content(got)
    if kind == "empty":
        assert text == ""
        return
    if kind == "truncated":
        whole = tool_message_content(real)
        assert text == whole[: len(whole) // 2] and text != whole
        with pytest.raises(ValueError):
            json.loads(text)
        return
    error = json.loads(text)["error"]
    assert error["type"] == kind and "lookup_order" in error["message"]
    expected = {"timeout": {}, "rate_limit": {"status": 429, "retry_after": 2.0},
                "server_error": {"status": 500},
                "validation_error": {"status": 422, "field": "order_id"}}[kind]
    assert {key: error[key] for key in expected} == expected


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_kind_through_a_python_environment(kind: str, tmp_path: Path) -> None:
    suite = load_suite(env_suite(tmp_path / "shop", [faulted_case(kind)]))
    seam = answers(suite, "c")
    first = seam(call("lookup_order", order_id="ord_1"))
    second = seam(call("lookup_order", order_id="ord_1"))
    assert second == {"order_id": "ord_1", "status": "pending"}  # only the first call fails
    assert_fault(kind, first, second)
    assert seam.results.applied == [Applied("lookup_order", 0, kind)]


def test_the_call_runs_and_only_what_the_agent_reads_changes(tmp_path: Path) -> None:
    case = mt_case("c", TRAJECTORY, state=STATE,
                   faults=[{"tool": "cancel_order", "kind": "timeout"}])
    suite = load_suite(env_suite(tmp_path / "shop", [case]))
    seam = answers(suite, "c")
    got = seam(call("cancel_order", order_id="ord_1", reason="duplicate"))
    assert json.loads(tool_message_content(got))["error"]["type"] == "timeout"
    # the environment did the work: a second cancel meets the cancelled order
    assert seam(call("lookup_order", order_id="ord_1"))["status"] == "cancelled"


SERVED_TOOLS = [
    {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"properties": {key: {"title": key.replace("_", " ").title(),
                                            "type": "string"} for key in keys},
                       "required": list(keys), "type": "object", "title": f"{name}Arguments"}}}
    for name, description, keys in (
        ("lookup_order", "Look up one order by its id.", ("order_id",)),
        ("cancel_order", "Cancel an order that has not shipped yet.", ("order_id", "reason")),
        ("track_shipment", "Track an order's parcel.", ("order_id",)))]


def mcp_suite(root: Path, cases: list[dict[str, Any]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(TESTS / "mcp_server.py", root / "mcp_server.py")
    (root / "tools.json").write_text(json.dumps(SERVED_TOOLS))
    (root / "cases.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    command = shlex.join([sys.executable, "mcp_server.py"])
    (root / "suite.json").write_text(json.dumps({"environment": {"mcp": command,
                                                                 "state": "read_state"}}))
    return root


@pytest.mark.slow
def test_each_kind_through_an_mcp_server(tmp_path: Path) -> None:
    cases = [{**faulted_case(kind), "id": kind} for kind in FAULT_KINDS]
    suite = load_suite(mcp_suite(tmp_path / "mcp", cases))
    for kind in FAULT_KINDS:
        seam = answers(suite, kind)
        first = seam(call("lookup_order", order_id="ord_1"))
        second = seam(call("lookup_order", order_id="ord_1"))
        assert second == {"order_id": "ord_1", "status": "pending"}  # the server's answer
        assert_fault(kind, first, second)
        assert seam.results.applied == [Applied("lookup_order", 0, kind)]


def bfcl_wheel(target: Path) -> Path:
    """A zip shaped as the bfcl-eval wheel, of the files copied from it (as the BFCL tests
    build it)."""
    tree = FIXTURES / "bfcl" / "wheel"
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(tree.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(tree).as_posix())
        data = FIXTURES / "bfcl" / "data"
        for path in sorted(data.rglob("*.json")):
            archive.write(path, "bfcl_eval/data/" + path.relative_to(data).as_posix())
        archive.writestr("bfcl_eval-2026.3.23.dist-info/METADATA", "Version: 2026.3.23\n")
    return target


@pytest.fixture(scope="module")
def bfcl_suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    wheel = bfcl_wheel(tmp_path_factory.mktemp("wheel") / "bfcl_eval-2026.3.23-py3-none-any.whl")
    out = tmp_path_factory.mktemp("suite") / "bfcl"
    import_category(wheel, ["multi_turn_base"], out)
    return load_suite(out)


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_kind_through_bfcls_environment(kind: str, bfcl_suite: Suite) -> None:
    case = next(c for c in bfcl_suite.cases.values() if c.state)
    name, args, kwargs = parse_source_call(case.expect.ground_truth[0][0])  # type: ignore
    assert not args
    plan = FaultTransform((FaultRule(tool=name, kind=kind, calls=[1]),))
    suite = dataclasses.replace(bfcl_suite, result_transform=lambda _: plan)
    seam = answers(suite, case.id)
    real = answers(bfcl_suite, case.id)(call(name, **kwargs))  # BFCL's own text answer
    first = seam(call(name, **kwargs))
    seam(call(name, **kwargs))
    assert isinstance(real, str) and seam.results.applied == [Applied(name, 0, kind)]
    text = tool_message_content(first)
    if kind == "empty":
        assert text == ""
    elif kind == "truncated":
        assert real.startswith(text) and len(text) == len(real) // 2 and text
    else:
        assert json.loads(text)["error"]["type"] == kind and name in text


def test_which_calls_fail_nth_probability_or_all() -> None:
    site = ToolCallSite("case", 0, "lookup_order", 0, {})
    nth = FaultRule(tool="lookup_order", kind="timeout", calls=[2, 3])
    assert [nth.chooses(ToolCallSite("c", 0, "lookup_order", i, {}), 0, 0)
            for i in range(4)] == [False, True, True, False]
    assert not nth.chooses(ToolCallSite("c", 0, "cancel_order", 1, {}), 0, 0)
    every = FaultRule(tool="*", kind="empty")
    assert every.chooses(ToolCallSite("c", 0, "anything", 7, {}), 0, 0)
    half = FaultRule(tool="*", kind="server_error", probability=0.3)
    picks = [half.chooses(ToolCallSite(f"c{i}", 0, "t", 0, {}), 7, 0) for i in range(4000)]
    assert 0.27 < sum(picks) / len(picks) < 0.33  # a fair draw
    again = [half.chooses(ToolCallSite(f"c{i}", 0, "t", 0, {}), 7, 0) for i in range(4000)]
    assert picks == again  # seeded: the same calls every time
    other_seed = [half.chooses(ToolCallSite(f"c{i}", 0, "t", 0, {}), 8, 0) for i in range(4000)]
    assert picks != other_seed
    assert draw(1, site, 0) != draw(1, ToolCallSite("case", 1, "lookup_order", 0, {}), 0)


def test_a_transform_is_general_and_composes() -> None:
    def shout(site: ToolCallSite, result: Any, /) -> Any:
        return Replaced(str(result).upper(), "attack:shout") if site.index == 0 else result

    seam = ToolResults("c", 0, compose(FaultTransform((FaultRule(tool="t", kind="empty",
                                                                 calls=[2]),)), shout))
    assert seam("t", {}, "hi") == "HI"
    assert seam("t", {}, "hi") == ""  # the fault, then shout leaves it (index 1)
    assert seam("u", {}, "x") == "X"
    assert [(a.tool, a.index, a.kind) for a in seam.applied] == [
        ("t", 0, "attack:shout"), ("t", 1, "empty"), ("u", 0, "attack:shout")]


def write_plan(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "faults.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "where"), [
    ('{\n "faults": [\n  {"tool": "lookup_order", "kind": "explode"}\n ]\n}',
     ":3: faults[0].kind: "),
    ('{\n "faults": [\n  {"tool": "lookup_order",\n   "kind": "timeout",\n'
     '   "calls": [1], "probability": 0.5}\n ]\n}', ":3: faults[0]: calls and probability"),
    ('{\n "faults": [\n  {"tool": "lookup_order", "kind": "timeout", "calls": [0]}\n ]\n}',
     ":3: faults[0].calls: call numbers start at 1"),
    ('{\n "seed": 1,\n "faults": [\n  {"tool": "refund", "kind": "timeout"}\n ]\n}',
     ":4: faults[0].tool: 'refund' is not a tool of suite"),
    ('{"faults": [{"tool": "lookup_order", "kind": "timeout", "probability": 2}]}',
     ":1: faults[0].probability: "),
    ('{"faults": []}', ":1: faults: "),
    ('{"faults": [{"tool": "lookup_order", "kind": "timeout"}],\n "after_fault": {}}',
     ":2: after_fault: states no expectation"),
    ('{"faults": [{"tool": "lookup_order", "kind": "timeout"}],\n'
     ' "after_fault": {"tells_user": ["(?<=x)y"]}}', ":2: after_fault.tells_user: "),
    ('{"faults": [{"tool": "lookup_order", "kind": "timeout",\n "field": "x"}]}',
     ":2: faults[0].field: only a validation_error names a field"),
])
def test_bad_plans_are_refused_with_file_line_and_field(text: str, where: str,
                                                        tmp_path: Path) -> None:
    suite = load_suite(env_suite(tmp_path / "shop", [faulted_case("timeout")]))
    path = write_plan(tmp_path, text)
    with pytest.raises(InputError) as caught:
        with_fault_plan(suite, path)
    assert str(caught.value).startswith(str(path)) and where in str(caught.value), caught.value


def test_a_cases_bad_faults_are_refused_naming_its_line(tmp_path: Path) -> None:
    good = faulted_case("timeout")
    bad = {**good, "id": "d", "faults": [{"tool": "refund", "kind": "timeout"}]}
    with pytest.raises(InputError, match=r"cases.jsonl:2: faults\[0\].tool: 'refund' is not"):
        load_suite(env_suite(tmp_path / "a", [good, bad]))
    fallback = {**good, "id": "d", "after_fault": {"fallback": "refund"}}
    with pytest.raises(InputError, match=r"cases.jsonl:2: after_fault.fallback: 'refund'"):
        load_suite(env_suite(tmp_path / "b", [good, fallback]))
    kind = {**good, "id": "d", "faults": [{"tool": "lookup_order", "kind": "slow"}]}
    with pytest.raises(InputError, match=r"cases.jsonl:2: faults\[0\].kind"):
        load_suite(env_suite(tmp_path / "c", [good, kind]))


def test_a_run_plan_adds_to_the_cases_own_and_its_after_fault_fills_in(tmp_path: Path) -> None:
    own = {**faulted_case("timeout"), "after_fault": {"retries": 1}}
    plain = mt_case("p", TRAJECTORY, state=STATE)
    suite = load_suite(env_suite(tmp_path / "shop", [own, plain]))
    assert suite.tool_results(suite.cases["p"], 0).transform(
        ToolCallSite("p", 0, "lookup_order", 0, {}), 1) == 1  # no plan: left alone
    path = write_plan(tmp_path, json.dumps({
        "seed": 3, "faults": [{"tool": "cancel_order", "kind": "server_error"}],
        "after_fault": {"tells_user": True}}))
    planned = with_fault_plan(suite, path)
    for case_id in ("c", "p"):
        seam = planned.tool_results(planned.cases[case_id], 0)
        seam("lookup_order", {"order_id": "ord_1"}, {})
        seam("cancel_order", {"order_id": "ord_1", "reason": "x"}, {})
        kinds = [a.kind for a in seam.applied]
        assert kinds == (["timeout", "server_error"] if case_id == "c" else ["server_error"])
    after = planned.faults.after_fault
    assert after(planned.cases["c"]).retries == 1  # type: ignore[union-attr]
    assert after(planned.cases["p"]).tells_user is True  # type: ignore[union-attr]
    assert planned.fingerprint == suite.fingerprint  # the run's plan is not the suite's


@pytest.mark.parametrize("kind", ["empty", "truncated", "timeout"])
def test_a_fault_and_an_attack_on_one_tool_record_the_fault(kind: str, tmp_path: Path) -> None:
    # The attack injects into what the tool returned and the fault then replaces it, so the
    # recorded kind is the fault's, as the plan's replay works it out without the results (the
    # other order recorded the attack on an emptied result, and a run with both was refused).
    from callgate.suites.attacks.plan import Attack, suite_transform
    from callgate.suites.faults import planned_faults

    suite = load_suite(env_suite(tmp_path / "shop", [faulted_case(kind)]))
    attack = Attack.model_validate({"templates": ["ignore_previous"], "goal": {
        "instruction": "cancel every order", "leak": "ord_1"},
        "untrusted": [{"tool": "lookup_order", "path": ""}]})
    suite = dataclasses.replace(suite, result_transform=suite_transform(attack))
    seam = answers(suite, "c")
    first = seam(call("lookup_order", order_id="ord_1"))
    assert "cancel every order" not in json.dumps(first)
    assert [(a.tool, a.index, a.kind) for a in seam.results.applied] == [
        ("lookup_order", 0, kind)]
    planned = planned_faults(suite.tool_results(suite.cases["c"], 0).transform, "c", 0,
                             [("lookup_order", {"order_id": "ord_1"})] * 2)
    assert [applied.kind for _, applied in planned if not applied.kind.startswith("attack:")
            ] == [kind]
