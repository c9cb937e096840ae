"""A Python target is the user's code: its stdout is captured, its inputs are copies, its
sys.exit is one classified target_error (at import: one line, exit 2), a loop it blocks times
out at a thread boundary, and a cost or token count that is not one keeps the answer."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import unruly_agents
from conftest import lookup_case, write_suite
from paths import TESTS
from target_runs import callgate, run, settings

from callgate.models.retry import RetryPolicy
from callgate.suites.suite import load_suite

ONCE = settings(retry=RetryPolicy(base_delay=0.01, max_retries=0))


def reasons(live: object) -> dict[str, tuple[str, str]]:
    return {v.case_id: (v.status, v.tool_reason) for v in live.result.verdicts}  # type: ignore[attr-defined]


@pytest.fixture
def released() -> Iterator[None]:
    unruly_agents.RELEASE.clear()
    yield
    unruly_agents.RELEASE.set()


@pytest.mark.parametrize(("agent", "why"), [
    ("exits_async", "called sys.exit(0)"), ("exits_sync", "called sys.exit(3)"),
    ("closes_stdout", "closed or replaced sys.stdout")])
def test_an_exit_or_a_closed_stdout_is_the_attempts_target_error(
    agent: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("a")]))
    live = run(tmp_path, suite, f"python:unruly_agents:{agent}", ONCE)
    status, reason = reasons(live)["a"]
    assert status == "target_error" and why in reason
    assert live.result.scores.excluded["target_error"] == 1  # type: ignore[index]
    print("callgate's stdout still works")
    assert sys.stdout is not None and "still works" in capsys.readouterr().out


def test_what_a_target_prints_or_does_to_its_inputs_is_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("a")]))
    for agent in ("prints", "appends"):
        (tmp_path / agent).mkdir()
        live = run(tmp_path / agent, suite, f"python:unruly_agents:{agent}", ONCE)
        (verdict,) = live.result.verdicts
        assert verdict.status == "scored" and verdict.right_arguments, verdict.tool_reason
    assert "talks on stdout" not in capsys.readouterr().out


def test_an_async_target_blocking_its_loop_times_out(tmp_path: Path, released: None) -> None:
    cases = [lookup_case("block"), lookup_case("b"), lookup_case("c")]
    suite = load_suite(write_suite(tmp_path / "suite", cases))
    live = run(tmp_path, suite, "python:unruly_agents:blocks_loop",
               settings(timeout=1, retry=RetryPolicy(base_delay=0.01, max_retries=0),
                        concurrency=1))
    found = reasons(live)
    assert found["block"][0] == "target_error" and "no reply within 1 s" in found["block"][1]
    assert found["b"][0] == found["c"][0] == "scored"  # a new loop answers the rest


def test_a_cost_or_token_count_that_is_not_one_keeps_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("a")]))
    live = run(tmp_path, suite, "python:unruly_agents:bad_bookkeeping", ONCE)
    (verdict,) = live.result.verdicts
    assert verdict.status == "scored" and verdict.right_arguments
    err = capsys.readouterr().err
    assert "warning: case 'a' repeat 0: cost nan is not an amount" in err
    assert "usage.prompt_tokens inf is not a token count" in err


@pytest.mark.slow
def test_run_json_stays_json_and_an_exit_at_import_is_one_line(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    env = {**cli_env, "PYTHONPATH": str(TESTS)}
    suite = write_suite(tmp_path / "suite", [lookup_case("a")])
    done = callgate(callgate_exe, env, tmp_path, "run", str(suite), "--target",
                    "python:unruly_agents:prints", "--db", "t.db", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scores"]["figures"]["right_arguments"]["pct"] == 100.0
    exits = callgate(callgate_exe, env, tmp_path, "run", str(suite), "--target",
                     "python:unruly_agents:exits_async", "--db", "t.db", "--json",
                     "--max-retries", "0")
    assert exits.returncode == 3, exits.stderr  # its one attempt excluded: inconclusive
    doc = json.loads(exits.stdout)
    assert doc["attempts"][0]["status"] == "target_error" and "Traceback" not in exits.stderr
    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(5)\n")
    at_import = callgate(callgate_exe, {**env, "PYTHONPATH": f"{tmp_path}:{TESTS}"}, tmp_path,
                         "run", str(suite), "--target", "python:exits_at_import:answer",
                         "--db", "t.db")
    assert at_import.returncode == 2
    assert at_import.stderr.strip() == (
        "error: --target python:exits_at_import:answer: cannot import exits_at_import: it "
        "called sys.exit(5) while being imported")


GRANDPARENT = '''
import json, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # holds our pipes
sys.path.insert(0, sys.argv[1])
from unruly_agents import call
for line in sys.stdin:
    request = json.loads(line)
    reply = {"version": "1"} if "hello" in request else call(request["messages"])
    print(json.dumps(reply), flush=True)
'''


@pytest.mark.slow
def test_a_command_targets_grandchild_holding_the_pipes_prints_no_traceback(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    (tmp_path / "grandparent.py").write_text(GRANDPARENT)
    suite = write_suite(tmp_path / "suite", [lookup_case("a")])
    done = callgate(callgate_exe, cli_env, tmp_path, "run", str(suite), "--target",
                    f"cmd:{sys.executable} grandparent.py {TESTS}", "--db", "t.db", "-k", "1")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Event loop is closed" not in done.stderr
