"""BFCL's multi-turn categories: the import, the environment adapter and the check kind, against
BFCL's own multi_turn_checker and environment classes copied under tests/fixtures/bfcl/wheel
(a wheel-shaped zip of them is built here, as the real wheel would be given)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from paths import FIXTURES as TESTS_FIXTURES

from callgate.checks.check import check_response
from callgate.errors import InputError
from callgate.importers.bfcl import import_category
from callgate.suites.responses import parse_response
from callgate.suites.suite import Suite, load_suite

FIXTURES = TESTS_FIXTURES / "bfcl"
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
        for path in sorted((FIXTURES / "data").rglob("*.json")):  # the single-turn sample
            archive.write(path, "bfcl_eval/data/" + path.relative_to(FIXTURES / "data").as_posix())
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


def _bfcl_record(case_id: str, answer: Any) -> dict[str, Any]:
    """A multi-turn line as BFCL's FC handler writes it: per turn, each step's calls
    ({name: arguments JSON}), then the text reply that ended the turn."""
    result = [[[{name: json.dumps(args)} for name, args in step] for step in turn] + ["Done."]
              for turn in answer]
    steps = [[1 for _ in turn] for turn in result]
    return {"id": case_id, "result": result, "input_token_count": steps,
            "output_token_count": steps, "latency": steps}


def test_multi_turn_results_become_turns_lines(suite: Suite, wheel: Path, tmp_path: Path) -> None:
    from callgate.importers.bfcl.results import convert_results

    harness = _harness()
    entries, ground = _entries(wheel, "multi_turn_base")
    checker = harness.load_bfcl_checker(wheel)
    folder = tmp_path / "model" / "multi_turn"
    folder.mkdir(parents=True)
    lines, valid = [], []
    for index, entry in enumerate(entries):
        env = suite.environment(suite.cases[entry["id"]].state)
        answers = list(harness.perturbations(harness.ground_truth_answer(env, ground[entry["id"]])))
        answer = answers[index % 3][1]
        lines.append(json.dumps(_bfcl_record(entry["id"], answer)))
        valid.append(harness.bfcl_valid(checker, entry, ground[entry["id"]], answer))
    (folder / "BFCL_v4_multi_turn_base_result.json").write_text("\n".join(lines) + "\n")
    out = tmp_path / "responses.jsonl"
    converted = convert_results(tmp_path / "model", suite, out)
    assert converted.categories == ["multi_turn_base"]
    recorded = [json.loads(line) for line in out.read_text().splitlines()]
    assert [len(line["user_turn_ends"]) for line in recorded] == [
        len(ground[e["id"]]) for e in entries]
    assert recorded[0]["usage"]["prompt_tokens"] == sum(
        len(turn) + 1 for turn in harness.ground_truth_answer(
            suite.environment(suite.cases[entries[0]["id"]].state), ground[entries[0]["id"]]))
    assert [_right(suite, line["case_id"], line) for line in recorded] == valid
    assert 0 < sum(valid) < len(valid)


def test_the_suite_is_the_same_wherever_its_wheel_lies(wheel: Path, tmp_path: Path) -> None:
    """The fingerprint covers the wheel's sha256, not its path: the same wheel in another
    folder (a CI checkout) gives the same suite, so the gate sees no suite change."""
    moved = tmp_path / "elsewhere" / wheel.name
    moved.parent.mkdir()
    shutil.copy(wheel, moved)
    fingerprints = []
    for name, source in (("here", wheel), ("there", moved)):
        import_category(source, "multi_turn_base", tmp_path / name)
        fingerprints.append(load_suite(tmp_path / name).fingerprint)
    assert fingerprints[0] == fingerprints[1]
    meta = json.loads((tmp_path / "there" / "suite.json").read_text())
    # Beside the suite folder: named relative to it (docs/bfcl.md), found there.
    assert meta["environment"]["bfcl"] == f"../elsewhere/{wheel.name}"
    assert load_suite(tmp_path / "there").environment.wheel == moved.resolve()  # type: ignore


def test_bfcl_calls_on_two_threads_do_not_interleave() -> None:
    """BFCL's classes keep state beyond their instances (MathAPI sets mpmath's process-wide
    precision and renders its result after), and two conversations' environments run on two
    threads: a call and its rendering never see another thread's call in between."""
    import threading
    import time

    from callgate.suites.bfcl_environment import BfclEnvironment

    process_wide = {"precision": 0}

    def set_and_read(precision: int) -> int:
        process_wide["precision"] = precision
        time.sleep(0.0005)
        return process_wide["precision"]

    env = object.__new__(BfclEnvironment)
    env.instances, env._methods = {}, {"set_and_read": set_and_read}
    seen: dict[int, list[str]] = {5: [], 40: []}

    def calls(precision: int) -> None:
        seen[precision] += [env.call("set_and_read", precision) for _ in range(150)]

    threads = [threading.Thread(target=calls, args=(p,)) for p in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {5: ["5"] * 150, 40: ["40"] * 150}


def test_a_result_with_other_turns_than_the_case_is_wrong_as_in_bfcl(suite: Suite,
                                                                     wheel: Path) -> None:
    """BFCL's runner fails a multi-turn result whose turns are more or fewer than the ground
    truth's (force-terminated), whatever they hold: an extra turn is not dropped, and a
    missing one is not filled in."""
    from callgate.importers.bfcl.results import multi_turn_line

    entries, ground = _entries(wheel, "multi_turn_base")
    case_id = entries[0]["id"]
    answer = _harness().ground_truth_answer(suite.environment(suite.cases[case_id].state),
                                            ground[case_id])
    user_turns = len(ground[case_id])
    assert _right(suite, case_id, multi_turn_line(_bfcl_record(case_id, answer), user_turns))
    for other in ([*answer, answer[-1]], [*answer, []], answer[:-1]):
        line = multi_turn_line(_bfcl_record(case_id, other), user_turns)
        assert len(line["user_turn_ends"]) == user_turns
        assert not _right(suite, case_id, line), len(other)


@pytest.mark.slow
def test_round_trip_import_score_gate(wheel: Path, tmp_path: Path) -> None:
    """A BFCL multi-turn result folder → import bfcl-results → score → gate, on the CLI."""
    cli = Path(sys.executable).parent / "callgate"
    env = {**os.environ, "COLUMNS": "200"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(cli), *args], capture_output=True, text=True, env=env,
                              timeout=300, check=False)

    suite_out = tmp_path / "suite"
    imported = run("import", "bfcl", str(wheel), "--category", "multi_turn_base",
                   "--category", "multi_turn_miss_func", "--out", str(suite_out))
    assert imported.returncode == 0, imported.stderr
    suite = load_suite(suite_out)
    harness = _harness()
    checker = harness.load_bfcl_checker(wheel)
    db = str(tmp_path / "db.sqlite")
    shares = {}
    for release, pick in (("r1", 0), ("r2", 1)):
        model = tmp_path / release / "my-model-FC"
        valid = []
        for category in ("multi_turn_base", "multi_turn_miss_func"):
            entries, ground = _entries(wheel, category)
            lines = []
            for entry in entries:
                env_ = suite.environment(suite.cases[entry["id"]].state)
                answer = list(harness.perturbations(harness.ground_truth_answer(
                    env_, ground[entry["id"]])))[pick][1]
                lines.append(json.dumps(_bfcl_record(entry["id"], answer)))
                valid.append(harness.bfcl_valid(checker, entry, ground[entry["id"]], answer))
            (model / "multi_turn").mkdir(parents=True, exist_ok=True)
            (model / "multi_turn" / f"BFCL_v4_{category}_result.json").write_text(
                "\n".join(lines) + "\n")
        responses = tmp_path / f"{release}.jsonl"
        converted = run("import", "bfcl-results", str(model), "--suite", str(suite_out),
                        "--out", str(responses))
        assert converted.returncode == 0, converted.stderr
        scored = run("score", str(suite_out), "-r", str(responses), "-m", "my-model",
                     "--release", release, "--db", db, "--json")
        assert scored.returncode == 0, scored.stderr
        figure = json.loads(scored.stdout)["scores"]["figures"]["right_arguments"]
        assert (figure["successes"], figure["n"]) == (sum(valid), len(valid))
        shares[release] = sum(valid) / len(valid)
        by_tag = json.loads(scored.stdout)["scores"]["by_tag"]
        base, miss = (by_tag[c]["right_arguments"]["pct"] for c in (
            "multi_turn_base", "multi_turn_miss_func"))
        text = run("score", str(suite_out), "-r", str(responses), "-m", "my-model", "--release",
                   f"{release}-text", "--db", str(tmp_path / f"{release}-text.sqlite"))
        # BFCL's multi-turn figure: the mean of its four categories, the two missing at 0.
        assert f"multi-turn: {(base + miss) / 4:.2f}" in text.stdout, text.stdout[-1500:]
    assert shares["r1"] == 1 and shares["r2"] < 1
    first = run("gate", "-m", "my-model", "--release", "r1", "--db", db)
    assert first.returncode == 0, first.stdout + first.stderr
    second = run("gate", "-m", "my-model", "--release", "r2", "--db", db, "--baseline", "auto")
    assert second.returncode == 1, second.stdout + second.stderr


def _broken_suite(wheel: Path, tmp_path: Path, change: Any) -> Path:
    out = tmp_path / "suite"
    import_category(wheel, "multi_turn_base", out)
    lines = (out / "cases.jsonl").read_text().splitlines()
    case = json.loads(lines[1])
    change(case)
    lines[1] = json.dumps(case)
    (out / "cases.jsonl").write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.parametrize(("change", "field", "message"), [
    (lambda case: case["expect"]["ground_truth"].pop(), "expect.ground_truth",
     "turns of ground truth for"),
    (lambda case: case["expect"]["ground_truth"][0].append("cd(folder=open('x'))"),
     "expect.ground_truth[0][1]", "not a Python literal"),
    (lambda case: case["state"].update(classes=[]), "state.classes", ""),
])
def test_a_broken_multi_turn_case_names_line_and_field(wheel: Path, tmp_path: Path, change: Any,
                                                      field: str, message: str) -> None:
    out = _broken_suite(wheel, tmp_path, change)
    with pytest.raises(InputError) as raised:
        load_suite(out)
    assert raised.value.line == 2 and raised.value.field == field, str(raised.value)
    assert message in str(raised.value)


def test_a_class_that_cannot_start_is_the_environments_fault(suite: Suite) -> None:
    """MathAPI is not in the fixture wheel (and needs mpmath): an environment error."""
    from callgate.checks.attempt import Attempt
    from callgate.checks.kinds.bfcl_multi_turn import check

    case = suite.cases["multi_turn_base_0"].model_copy(update={"state": {
        "involved_classes": ["MathAPI"], "initial_config": {}, "long_context": False}})
    attempt = Attempt({"case_id": case.id, "repeat": 0}, case, [], [], None, suite.match,
                      suite.parameter_schemas, suite.validators, suite.environment, None, None)
    verdict = check(attempt, case.expect)
    assert verdict.status == "environment_error"
    assert "MathAPI" in verdict.tool_reason


@pytest.mark.slow
def test_a_live_run_is_scored_as_its_recorded_answer_and_as_bfcl(
        wheel: Path, tmp_path: Path, loopback: Any) -> None:
    """`callgate run` over real HTTP on a multi-turn case: the model answers each user turn
    (one answer with the ground truth's calls, then text) and gets BFCL's results back; the
    verdict equals the recorded answer's and BFCL's, right and wrong."""
    from live_runs import run
    from loopback import ok, tool_call

    harness = _harness()
    checker = harness.load_bfcl_checker(wheel)
    out = tmp_path / "suite"
    import_category(wheel, "multi_turn_base", out)
    suite = load_suite(out)
    entries, ground = _entries(wheel, "multi_turn_base")
    entry = entries[1]  # multi_turn_base_3: GorillaFileSystem, two user turns
    only = {entry["id"]: suite.raw_cases[entry["id"]]}
    (out / "cases.jsonl").write_text(json.dumps(only[entry["id"]]) + "\n")
    suite = load_suite(out)
    env = suite.environment(suite.cases[entry["id"]].state)
    answer = harness.ground_truth_answer(env, ground[entry["id"]])
    for label, wanted in (("right", answer), ("wrong", [answer[0], [answer[1][0][:-1]]])):
        loopback.reset()
        for index, turn in enumerate(entry["question"]):
            calls = [tool_call(name, args, f"c{index}_{n}")
                     for n, (name, args) in enumerate(wanted[index][0])]
            loopback.script_turns(turn[0]["content"], ok(calls=calls), ok(content="Done."))
        (tmp_path / label).mkdir()
        live = run(tmp_path / label, suite, loopback)
        (verdict,) = live.result.verdicts
        valid = harness.bfcl_valid(checker, entry, ground[entry["id"]], wanted)
        assert verdict.status == "scored"
        assert bool(verdict.right_arguments) == valid == (label == "right")
        assert _right(suite, entry["id"], harness.recorded_line(entry["id"], wanted)) == valid
    # The model got BFCL's own result text back, as BFCL sends it: the text itself, not quoted.
    first_result = next(m for s in loopback.requests for m in s.body["messages"]
                        if m["role"] == "tool")
    name, arguments = answer[0][0][0]
    assert first_result["content"] == str(env.call(name, **arguments))
    assert not first_result["content"].startswith('"')


def test_single_turn_cases_beside_multi_turn_ones_are_asked_once(wheel: Path,
                                                                 tmp_path: Path) -> None:
    """One suite of single- and multi-turn categories: the environment serves the multi-turn
    cases only; a single-turn case is asked once and scored as before."""
    from callgate.importers.bfcl import answer_message

    out = tmp_path / "suite"
    import_category(wheel, ["simple_python", "multi_turn_base"], out)
    suite = load_suite(out)
    single = [case for case in suite.cases.values() if "simple_python" in case.tags]
    assert single and not any(suite.loops(case) for case in single)
    assert suite.loops(suite.cases["multi_turn_base_0"])
    for case in single:
        line = {"case_id": case.id, "response": answer_message(suite, case)}
        assert _right(suite, case.id, line) == (case.never_right is None), case.id
