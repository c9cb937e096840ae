"""BFCL's multi-turn categories: the import, the environment adapter and the check kind, against
BFCL's own multi_turn_checker and environment classes copied under tests/fixtures/bfcl/wheel
(a wheel-shaped zip of them is built here, as the real wheel would be given)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from callgate.checks.check import check_response
from callgate.errors import InputError
from callgate.importers.bfcl import import_category
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite, load_suite

FIXTURES = Path(__file__).parent / "fixtures" / "bfcl"
WHEEL_TREE = FIXTURES / "wheel"
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
              "multi_turn_long_context")


def _harness() -> Any:
    if "bfcl_multi_turn_harness" in sys.modules:
        return sys.modules["bfcl_multi_turn_harness"]
    spec = importlib.util.spec_from_file_location("bfcl_multi_turn_harness",
                                                  FIXTURES / "multi_turn_harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bfcl_multi_turn_harness"] = module
    spec.loader.exec_module(module)
    return module


def build_wheel(target: Path) -> Path:
    """A zip shaped as the bfcl-eval wheel, of the files copied from it."""
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(WHEEL_TREE.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, path.relative_to(WHEEL_TREE).as_posix())
        archive.writestr("bfcl_eval-2026.3.23.dist-info/METADATA", "Version: 2026.3.23\n")
    return target


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel") / "bfcl_eval-2026.3.23-py3-none-any.whl")


@pytest.fixture(scope="module")
def suite(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Suite:
    out = tmp_path_factory.mktemp("suite") / "bfcl"
    import_category(wheel, list(MULTI_TURN), out)
    return load_suite(out)


def _entries(wheel: Path, category: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with zipfile.ZipFile(wheel) as archive:
        entries = [json.loads(line) for line in archive.read(
            f"bfcl_eval/data/BFCL_v4_{category}.json").decode().splitlines()]
        ground = {(d := json.loads(line))["id"]: d["ground_truth"] for line in archive.read(
            f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json").decode().splitlines()}
    return entries, ground


def _right(suite: Suite, case_id: str, line: dict[str, Any]) -> bool:
    case = suite.cases[case_id]
    verdict = check_response(case, parse_response(line), suite.parameter_schemas,
                             suite.validators, rules=suite.match, environment=suite.environment)
    assert verdict.status == "scored", verdict
    return bool(verdict.right_arguments)


def test_a_multi_turn_entry_becomes_a_case_with_user_turns(suite: Suite, wheel: Path) -> None:
    raw = suite.raw_cases["multi_turn_base_0"]
    entries, ground = _entries(wheel, "multi_turn_base")
    entry = entries[0]
    assert raw["messages"] == entry["question"][0]
    assert [turn["messages"] for turn in raw["user_turns"]] == entry["question"][1:]
    assert raw["tags"] == ["multi_turn_base", "multi_turn"]
    assert raw["state"] == {"involved_classes": entry["involved_classes"],
                            "initial_config": entry["initial_config"], "long_context": False}
    assert raw["expect"] == {"type": "bfcl_multi_turn", "ground_truth": ground[entry["id"]]}
    assert suite.raw_cases["multi_turn_long_context_0"]["state"]["long_context"] is True
    # The model is sent the involved classes' docs under BFCL's names, and nothing else.
    with zipfile.ZipFile(wheel) as archive:
        docs = [json.loads(line)["name"] for name in ("gorilla_file_system", "posting_api")
                for line in archive.read(f"bfcl_eval/data/multi_turn_func_doc/{name}.json")
                .decode().splitlines()]
    sent = [tool["function"]["name"] for tool in suite.offered_tools(suite.cases[entry["id"]])]
    assert sorted(sent) == sorted(docs)
    meta = json.loads((suite.path / "suite.json").read_text())
    assert meta["environment"]["bfcl"] == str(wheel.resolve())


def test_results_are_bfcls_own(suite: Suite, wheel: Path) -> None:
    """The adapter's answers equal BFCL's execute_multi_turn_func_call's, errors included."""
    harness = _harness()
    harness.load_bfcl_checker(wheel)
    utils = sys.modules["bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"]
    entries, ground = _entries(wheel, "multi_turn_base")
    entry = entries[0]
    env = suite.environment(suite.cases[entry["id"]].state)
    calls = [harness.as_keywords(env, text) for turn in ground[entry["id"]] for text in turn]
    calls += [("cd", {"folder": "nowhere"}), ("cd", {"wrong": 1}), ("no_such_function", {}),
              ("remove", {}), ("post_tweet", {"content": "x", "tags": ["#a"]})]
    ours = env.run_all(calls)
    theirs, _ = utils.execute_multi_turn_func_call(
        [harness.bfcl_text(call) for call in calls], entry["initial_config"],
        entry["involved_classes"], "callgate_results_test", entry["id"])
    assert ours == theirs
    assert any(text.startswith("Error during execution: ") for text in ours)


@pytest.mark.parametrize("category", MULTI_TURN)
def test_verdicts_equal_bfcls_on_generated_answers(suite: Suite, wheel: Path,
                                                    category: str) -> None:
    """The ground truth and its perturbations: right exactly where BFCL's checker says valid,
    so the category's share is BFCL's accuracy."""
    harness = _harness()
    checker = harness.load_bfcl_checker(wheel)
    entries, ground = _entries(wheel, category)
    ours, theirs, labels = [], [], []
    for entry in entries:
        env = suite.environment(suite.cases[entry["id"]].state)
        for label, answer in harness.perturbations(harness.ground_truth_answer(
                env, ground[entry["id"]])):
            ours.append(_right(suite, entry["id"], harness.recorded_line(entry["id"], answer)))
            theirs.append(harness.bfcl_valid(checker, entry, ground[entry["id"]], answer))
            labels.append(f"{entry['id']}: {label}")
    assert [label for label, a, b in zip(labels, ours, theirs, strict=True) if a != b] == []
    assert sum(ours) / len(ours) == sum(theirs) / len(theirs)
    assert 0 < sum(theirs) < len(theirs)  # both kinds of answer were generated


def test_ground_truth_is_right_and_an_empty_turn_is_not(suite: Suite, wheel: Path) -> None:
    harness = _harness()
    entries, ground = _entries(wheel, "multi_turn_base")
    entry = entries[1]
    env = suite.environment(suite.cases[entry["id"]].state)
    answer = harness.ground_truth_answer(env, ground[entry["id"]])
    assert _right(suite, entry["id"], harness.recorded_line(entry["id"], answer))
    answer[0] = []
    case = suite.cases[entry["id"]]
    verdict = check_response(case, parse_response(harness.recorded_line(entry["id"], answer)),
                             suite.parameter_schemas, suite.validators, rules=suite.match,
                             environment=suite.environment)
    assert verdict.tool == "missing_call"
    assert "user turn 1" in verdict.tool_reason


def test_the_suite_refuses_a_missing_or_other_wheel(wheel: Path, tmp_path: Path) -> None:
    copy = shutil.copy(wheel, tmp_path / "bfcl_eval-2026.3.23-py3-none-any.whl")
    out = tmp_path / "suite"
    import_category(copy, "multi_turn_base", out)
    load_suite(out)
    with zipfile.ZipFile(copy, "a") as archive:
        archive.writestr("extra.txt", "changed")
    with pytest.raises(InputError, match="not the wheel the suite was imported from"):
        load_suite(out)
    Path(copy).unlink()
    with pytest.raises(InputError, match=r"wheel .* is missing"):
        load_suite(out)


def test_multi_turn_is_read_from_the_wheel_only(wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "tree")
    with pytest.raises(InputError, match="from the bfcl-eval wheel only"):
        import_category(tmp_path / "tree", "multi_turn_base", tmp_path / "out")


def test_held_back_functions_are_added_at_their_turn_under_bfcls_name(suite: Suite,
                                                                     wheel: Path) -> None:
    from callgate.running.plan import later_turns

    entries, _ = _entries(wheel, "multi_turn_miss_func")
    entry = entries[0]
    ((at, names),) = entry["missed_function"].items()
    case = suite.cases[entry["id"]]
    sent_first = {tool["function"]["name"] for tool in suite.offered_tools(case)}
    assert not set(names) & sent_first
    later = later_turns(suite, entry["id"])
    added = later[int(at) - 1]
    assert [tool["function"]["name"] for tool in added.tools] == names
    # BFCL adds the held-back doc after the language hint was given to the others: none here.
    assert not added.tools[0]["function"]["description"].endswith("Python 3 syntax.")
    assert added.messages[0]["content"].startswith("I have updated some more functions")
    assert all(turn.tools == [] for index, turn in enumerate(later) if index != int(at) - 1)
