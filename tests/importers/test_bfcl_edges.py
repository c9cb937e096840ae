"""BFCL at the edges (issue 32): `import bfcl-results` never writes over the store, the suite or
its own inputs; an imported suite finds its wheel on another machine; a multi-turn result cut by
BFCL's step limit in its last user turn is checked as BFCL checks it."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from bfcl_fixture import DATA
from typer.testing import CliRunner

from callgate.cli.main import app
from callgate.importers.bfcl import import_category, read_category
from callgate.suites.bfcl_environment import BfclEnvironments
from callgate.suites.environment import EnvironmentError_, fresh
from callgate.suites.suite import load_suite


@pytest.fixture
def bfcl_run(tmp_path: Path) -> tuple[Path, Path]:
    """A simple_python suite and a v4 result folder answering every case with no call."""
    suite = import_category(DATA, "simple_python", tmp_path / "suite").out
    folder = tmp_path / "results" / "my-model-FC" / "non_live"
    folder.mkdir(parents=True)
    lines = [json.dumps({"id": entry.id, "result": []})
             for entry in read_category(DATA, "simple_python").entries]
    (folder / "BFCL_v4_simple_python_result.json").write_text("\n".join(lines) + "\n")
    return suite, folder.parent


def _store(path: Path) -> bytes:
    with sqlite3.connect(path) as db:
        db.execute("create table kept (x)")
        db.execute("insert into kept values (1)")
    return path.read_bytes()


def _convert(folder: Path, suite: Path, out: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["import", "bfcl-results", str(folder), "--suite",
                                      str(suite), "--out", str(out), *extra])
    return result.exit_code, result.output


def test_out_never_writes_over_the_store(bfcl_run: tuple[Path, Path], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    suite, folder = bfcl_run
    store = tmp_path / "store.db"
    before = _store(store)
    code, output = _convert(folder, suite, store, "--db", str(store))
    assert code == 2, output
    assert "is the store" in output and "store.db" in output
    assert store.read_bytes() == before
    # The store named as every command names it by default: CALLGATE_DB, else callgate.db.
    monkeypatch.setenv("CALLGATE_DB", str(store))
    code, output = _convert(folder, suite, store)
    assert code == 2 and "is the store" in output, output
    monkeypatch.delenv("CALLGATE_DB")
    monkeypatch.chdir(tmp_path)
    default = tmp_path / "callgate.db"
    kept = _store(default)
    code, output = _convert(folder, suite, Path("callgate.db"))
    assert code == 2 and "is the store" in output, output
    assert default.read_bytes() == kept
    code, output = _convert(folder, suite, Path("callgate.db-wal"))
    assert code == 2 and "wal file" in output, output


@pytest.mark.parametrize("victim", ["cases.jsonl", "tools.json", "suite.json", "result"])
def test_out_never_writes_over_what_it_reads(bfcl_run: tuple[Path, Path], tmp_path: Path,
                                             victim: str, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    suite, folder = bfcl_run
    monkeypatch.chdir(tmp_path)
    path = (next(folder.rglob("*_result.json")) if victim == "result" else suite / victim)
    before = path.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    for out in (path, link):
        code, output = _convert(folder, suite, out)
        assert code == 2, output
        assert "another file this command reads" in output, output
        assert path.read_bytes() == before


def test_out_elsewhere_is_written(bfcl_run: tuple[Path, Path], tmp_path: Path) -> None:
    suite, folder = bfcl_run
    out = tmp_path / "responses.jsonl"
    code, output = _convert(folder, suite, out, "--db", str(tmp_path / "x.db"))
    assert code == 0, output
    assert len(out.read_text().splitlines()) == len(read_category(DATA, "simple_python").entries)
    code, output = _convert(folder, suite, tmp_path / "missing" / "r.jsonl")
    assert code == 2 and "does not exist" in output, output


# --------------------------------------------------------------------------- the wheel (16)

MATH_API = '''import mpmath


class MathAPI:
    def square_root(self, number: float, precision: int = 10) -> dict:
        mpmath.mp.dps = precision
        return {"result": float(mpmath.sqrt(number))}
'''


def _wheel(path: Path, math_api: bool = False) -> Path:
    from test_bfcl_multi_turn import build_wheel

    path.parent.mkdir(parents=True, exist_ok=True)
    build_wheel(path)
    if math_api:  # BFCL's MathAPI imports mpmath at the top of its module, as this one does
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr("bfcl_eval/eval_checker/multi_turn_eval/func_source_code/"
                             "math_api.py", MATH_API)
    return path


WHEEL = "bfcl_eval-2026.3.23-py3-none-any.whl"


def _import(source: Path, out: Path, *extra: str) -> str:
    result = CliRunner().invoke(app, ["import", "bfcl", str(source), "--category",
                                      "multi_turn_base", "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return result.output


def _named(suite: Path) -> str:
    return str(json.loads((suite / "suite.json").read_text())["environment"]["bfcl"])


@pytest.mark.parametrize(("wheel_at", "named"), [
    ("repo/wheels/" + WHEEL, "../wheels/" + WHEEL),  # beside the suite folder
    ("repo/suites/" + WHEEL, WHEEL.join(("../", ""))),
    ("repo/suites/bfcl/vendor/" + WHEEL, "vendor/" + WHEEL),  # under it
])
def test_a_wheel_under_or_beside_the_suite_is_named_relative_and_loads_elsewhere(
        tmp_path: Path, wheel_at: str, named: str) -> None:
    suite_at = "repo/suites/bfcl" if "suites/" in wheel_at else "repo/bfcl"
    wheel = _wheel(tmp_path / wheel_at)
    output = _import(wheel, tmp_path / suite_at)
    assert _named(tmp_path / suite_at) == named
    assert f"names the bfcl-eval wheel as {named}, relative to its folder" in output
    # The repository checked out elsewhere (a CI runner), the original gone: it still loads.
    shutil.copytree(tmp_path / "repo", tmp_path / "checkout")
    shutil.rmtree(tmp_path / "repo")
    suite = load_suite(tmp_path / "checkout" / suite_at.removeprefix("repo/"))
    assert isinstance(suite.environment, BfclEnvironments)
    assert suite.environment.wheel == (tmp_path / "checkout" / wheel_at.removeprefix(
        "repo/")).resolve()


def test_copy_wheel_puts_the_wheel_in_the_suite(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "downloads" / WHEEL)
    output = _import(wheel, tmp_path / "repo" / "bfcl", "--copy-wheel")
    assert f"copied the bfcl-eval wheel into the suite as {WHEEL}" in output
    assert _named(tmp_path / "repo" / "bfcl") == WHEEL
    assert (tmp_path / "repo" / "bfcl" / WHEEL).read_bytes() == wheel.read_bytes()
    wheel.unlink()
    shutil.move(tmp_path / "repo", tmp_path / "checkout")
    suite = load_suite(tmp_path / "checkout" / "bfcl")
    assert isinstance(suite.environment, BfclEnvironments)
    # Imported again with --copy-wheel from the copy itself: nothing to copy, named the same.
    again = _import(tmp_path / "checkout" / "bfcl" / WHEEL, tmp_path / "checkout" / "bfcl",
                    "--copy-wheel")
    assert "relative to its folder" in again and _named(tmp_path / "checkout" / "bfcl") == WHEEL


def test_a_wheel_far_away_keeps_its_absolute_path_and_says_so(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "downloads" / WHEEL)
    output = _import(wheel, tmp_path / "repo" / "suites" / "bfcl")
    assert _named(tmp_path / "repo" / "suites" / "bfcl") == str(wheel.resolve())
    assert "warning: the suite names the bfcl-eval wheel by its absolute path" in output
    assert "--copy-wheel" in output


def test_mathapi_cases_start_with_callgate_installed_as_it_is(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """mpmath comes with callgate, so BFCL's MathAPI starts; without it, the reason names the
    package and how to install it."""
    wheel = _wheel(tmp_path / "w" / WHEEL, math_api=True)
    suite = load_suite(import_category(wheel, "multi_turn_base", tmp_path / "suite").out)
    assert suite.environment is not None
    state = {"involved_classes": ["MathAPI"], "initial_config": {}, "long_context": False}
    env = fresh(suite.environment, state)
    assert json.loads(env.call("square_root", number=16.0)) == {"result": 4.0}
    monkeypatch.setitem(sys.modules, "mpmath", None)
    other = load_suite(import_category(_wheel(tmp_path / "v" / WHEEL, math_api=True),
                                       "multi_turn_base", tmp_path / "other").out)
    assert other.environment is not None
    with pytest.raises(EnvironmentError_) as raised:
        fresh(other.environment, state)
    message = str(raised.value)
    assert "MathAPI needs the Python package 'mpmath'" in message
    assert "pip install mpmath" in message and "docs/bfcl.md" in message


# --------------------------------------------------------------- BFCL's step limit (17)

def _record(case_id: str, answer: list[list[list[tuple[str, dict[str, Any]]]]],
            cut: int | None = None) -> dict[str, Any]:
    """A multi-turn result as BFCL's FC inference writes it: per turn each step's calls, then
    the text that ended the turn, except in turn `cut`, stopped by the step limit on a call."""
    return {"id": case_id, "result": [
        [[{name: json.dumps(args)} for name, args in step] for step in turn]
        + ([] if index == cut else ["Done."]) for index, turn in enumerate(answer)]}


@pytest.fixture(scope="module")
def multi_turn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    wheel = _wheel(tmp_path_factory.mktemp("wheel") / WHEEL)
    suite = load_suite(import_category(wheel, "multi_turn_base",
                                       tmp_path_factory.mktemp("suite") / "bfcl").out)
    return suite, wheel


def _verdict(suite: Any, line: dict[str, Any]) -> Any:
    from callgate.checks.check import check_response
    from callgate.suites.responses import parse_response

    case = suite.cases[line["case_id"]]
    return check_response(case, parse_response(line), suite.parameter_schemas, suite.validators,
                          rules=suite.match, environment=suite.environment)


def _ground(wheel: Path, case_id: str) -> tuple[dict[str, Any], list[list[str]]]:
    with zipfile.ZipFile(wheel) as archive:
        entry = next(e for line in archive.read("bfcl_eval/data/BFCL_v4_multi_turn_base.json")
                     .decode().splitlines() if (e := json.loads(line))["id"] == case_id)
        ground = next(g["ground_truth"] for line in archive.read(
            "bfcl_eval/data/possible_answer/BFCL_v4_multi_turn_base.json").decode().splitlines()
            if (g := json.loads(line))["id"] == case_id)
    return entry, ground


def test_a_last_turn_cut_by_the_step_limit_is_checked_as_bfcl_checks_it(
        multi_turn: tuple[Any, Path]) -> None:
    """BFCL stops a turn still calling after 20 steps and the conversation with it: in the
    last user turn the result has every turn, and BFCL checks its state and results. Right
    when they are BFCL's ground truth's (it was turn_limit), wrong when not; as BFCL says."""
    from test_bfcl_multi_turn import _harness

    from callgate.importers.bfcl.results import multi_turn_line

    suite, wheel = multi_turn
    harness = _harness()
    checker = harness.load_bfcl_checker(wheel)
    case_id = "multi_turn_base_0"
    entry, ground = _ground(wheel, case_id)
    answer = harness.ground_truth_answer(suite.environment(suite.cases[case_id].state), ground)
    last = len(answer) - 1
    looking = [[("pwd", {})]] * 20  # 20 more steps that change nothing: 21 in all
    right = [*answer[:last], [*answer[last], *looking]]
    wrong = [*answer[:last], [answer[last][0][:-1], *looking]]  # the turn's last call left out
    for cut_answer in (right, wrong):
        assert len(cut_answer[last]) == 21
        line = multi_turn_line(_record(case_id, cut_answer, cut=last), len(ground))
        verdict = _verdict(suite, line)
        assert verdict.tool != "turn_limit", verdict
        assert verdict.right_arguments == harness.bfcl_valid(checker, entry, ground, cut_answer)
    assert _verdict(suite, multi_turn_line(_record(case_id, right, cut=last),
                                           len(ground))).right_arguments
    assert not harness.bfcl_valid(checker, entry, ground, wrong)
    # Cut in an earlier turn: BFCL's result stops there, and its runner fails it
    # (force-terminated); callgate's turn limit, wrong.
    early = [[*answer[0], *looking]]
    line = multi_turn_line(_record(case_id, early, cut=0), len(ground))
    verdict = _verdict(suite, line)
    assert verdict.tool == "turn_limit" and not verdict.right_tool, verdict
    assert "user turn 1" in verdict.tool_reason


@pytest.mark.parametrize(("result", "said"), [
    ("Error during inference: Request timed out.", "BFCL's inference failed on this entry"),
    ({"error": "boom"}, "BFCL's inference failed on this entry"),
    ([[[{"cd": '{"folder": "document"}'}], "Done."]], "force-terminated"),
])
def test_an_entry_bfcls_runner_fails_says_why(multi_turn: tuple[Any, Path], result: Any,
                                              said: str) -> None:
    from callgate.importers.bfcl.results import multi_turn_line

    suite, _ = multi_turn
    case = suite.cases["multi_turn_base_0"]
    line = multi_turn_line({"id": case.id, "result": result}, 1 + len(case.user_turns))
    verdict = _verdict(suite, line)
    assert verdict.status == "scored" and not verdict.right_tool, verdict
    assert verdict.tool == "missing_call"
    assert said in verdict.tool_reason and "no call in user turn" not in verdict.tool_reason
    if isinstance(result, str):
        assert "Request timed out." in verdict.tool_reason


@pytest.mark.slow
def test_bfcl_results_over_the_store_is_refused_on_the_real_cli(
        bfcl_run: tuple[Path, Path], tmp_path: Path, callgate_exe: str, cli_env: dict) -> None:
    import subprocess

    suite, folder = bfcl_run
    store = tmp_path / "callgate.db"
    before = _store(store)
    cases = (suite / "cases.jsonl").read_bytes()
    for out in (store, suite / "cases.jsonl"):
        result = subprocess.run([callgate_exe, "import", "bfcl-results", str(folder), "--suite",
                                 str(suite), "--out", str(out)], cwd=tmp_path, env=cli_env,
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 2, result.stdout + result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert result.stderr.startswith(f"error: --out {out}: is "), result.stderr
    assert store.read_bytes() == before and (suite / "cases.jsonl").read_bytes() == cases
