"""`callgate run --target` end to end: the installed CLI as a subprocess, each kind of target
(a Python function, an HTTP endpoint, a JSON Lines process) asking the loopback model, with
targets that crash, hang and reply garbage (classified, excluded, the run goes on, resume asks
only them again), an agent whose own loop runs the tools, a candidate naming a target, and the
usage errors of a target that cannot run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import lookup_case, write_suite
from loopback import Loopback, ok, tool_call
from paths import TESTS
from target_runs import AGENT, callgate, target_of

CALL = tool_call("lookup_order", {"order_id": "ord_1"})
CANCEL = tool_call("cancel_order", {"order_id": "ord_1", "reason": "changed_mind"}, "call_2")




def loop_case() -> dict:
    case = lookup_case("loop")
    case["expect"] = {"type": "trajectory", "mode": "strict", "args": "key", "calls": [
        {"tool": "lookup_order", "args": {"order_id": "ord_1"}, "step": 0},
        {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "changed_mind"},
         "step": 1}]}
    return case


@pytest.fixture
def agent_env(loopback: Loopback, cli_env: dict[str, str]) -> dict[str, str]:
    loopback.script("[", ok(calls=[CALL]))
    loopback.script_turns("[loop]", ok(calls=[CALL]), ok(calls=[CANCEL]), ok(content="Done."))
    return {**cli_env, "LOOPBACK_URL": loopback.base_url, "PYTHONPATH": str(TESTS)}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["python", "http", "cmd"])
def test_each_kind_of_target_end_to_end(
    kind: str, loopback: Loopback, tmp_path: Path, callgate_exe: str, agent_env: dict[str, str]
) -> None:
    cases = [lookup_case("a"), loop_case(), *(lookup_case(c) for c in ("crash", "hang",
                                                                       "garbage"))]
    suite = write_suite(tmp_path / "suite", cases)
    with target_of(kind, agent_env) as target:
        args = ["run", str(suite), "--target", target, "-k", "1", "--max-retries", "0",
                "--timeout", "1", "--db", "t.db", "--json"]
        done = callgate(callgate_exe, agent_env, tmp_path, *args)
        assert done.returncode == 3, done.stderr  # 3 of 5 attempts excluded: not a result
        doc = json.loads(done.stdout)
        verdicts = {a["case_id"]: a for a in doc["attempts"]}
        assert {c: v["status"] for c, v in verdicts.items()} == {
            "a": "scored", "loop": "scored", "crash": "target_error", "hang": "target_error",
            "garbage": "target_error"}
        assert verdicts["a"]["right_arguments"]
        assert verdicts["loop"]["right_arguments"] and verdicts["loop"]["calls"] == 2
        assert doc["scores"]["excluded"]["target_error"] == 3
        assert (doc["agent"], doc["live"]["client"]) == (target, kind)
        errors = [line for line in done.stderr.splitlines() if line.startswith("target error")]
        assert sorted(line.split("'")[1] for line in errors) == ["crash", "garbage", "hang"]
        assert "Traceback" not in done.stderr
        crashed = verdicts["crash"]["tool_reason"]
        assert crashed.startswith("target error: case 'crash' repeat 0: ")
        assert {"python": "raised RuntimeError: the agent fell over",
                "http": "answered HTTP 500: internal error",
                "cmd": "exited with code 3: fatal: the agent fell over"}[kind] in crashed
        assert "no reply within 1 s" in verdicts["hang"]["tool_reason"]
        # The loop's requests carried the results of the agent's own tools.
        loop_turns = [s.body for s in loopback.requests if s.marker.startswith("[loop]")]
        assert [m["role"] for m in loop_turns[-1]["messages"][-2:]] == ["assistant", "tool"]

        loopback.reset()
        loopback.script("[", ok(calls=[CALL]))
        again = callgate(callgate_exe, agent_env, tmp_path, *args)
        assert again.returncode == 3, again.stderr
        redo = json.loads(again.stdout)
        assert (redo["live"]["cached"], redo["live"]["called"]) == (2, 3)
        assert not loopback.requests  # the failing targets fail before they ask the model


@pytest.mark.slow
def test_a_candidate_names_a_target_and_a_changed_version_is_asked_again(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, agent_env: dict[str, str]
) -> None:
    suite = write_suite(tmp_path / "suite", [lookup_case("a"), lookup_case("b")])
    (tmp_path / "callgate.toml").write_text(
        '[[candidates]]\nname = "support-agent"\nmodel = "openai/gpt-4o-mini"\n'
        f'target = "cmd:{sys.executable} {AGENT} jsonl"\n')
    args = ["run", str(suite), "-m", "support-agent", "-k", "2", "--db", "t.db", "--json"]
    first = json.loads(callgate(callgate_exe, agent_env, tmp_path, *args).stdout)
    assert (first["agent"], first["model"]) == ("support-agent", "openai/gpt-4o-mini")
    assert first["scores"]["figures"]["right_arguments"]["pct"] == 100.0
    assert first["live"]["called"] == 4
    same = json.loads(callgate(callgate_exe, agent_env, tmp_path, *args).stdout)
    assert (same["live"]["called"], same["live"]["cached"]) == (0, 4)
    changed = json.loads(callgate(callgate_exe, {**agent_env, "AGENT_VERSION": "2"}, tmp_path,
                                  *args).stdout)
    assert changed["live"]["called"] == 4


@pytest.mark.slow
@pytest.mark.parametrize(("target", "message"), [
    ("gpt-4o", "error: command line: target: 'gpt-4o': a target is python:pkg.module:function"),
    ("python:no_such_agent:run", "error: --target python:no_such_agent:run: cannot import "
                                 "no_such_agent: ModuleNotFoundError"),
    ("cmd:no-such-program-here", "error: --target cmd:no-such-program-here: the hello failed: "
                                 "could not start no-such-program-here"),
    ("http://127.0.0.1:9/agent", "error: --target http://127.0.0.1:9/agent: the hello failed: "
                                 "unreachable"),
])
def test_a_target_that_cannot_run_is_one_line_and_exit_2(
    target: str, message: str, tmp_path: Path, callgate_exe: str, agent_env: dict[str, str]
) -> None:
    suite = write_suite(tmp_path / "suite", [lookup_case("a")])
    done = callgate(callgate_exe, agent_env, tmp_path, "run", str(suite), "--target", target,
                    "--db", "t.db")
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_readme_runs_the_example_agent_with_no_key(tmp_path: Path,
                                                       cli_env: dict[str, str]) -> None:
    readme = (TESTS.parent / "README.md").read_text()
    line = "uv run --no-dev python -m callgate.examples.order_agent"
    assert line in readme
    done = subprocess.run([sys.executable, "-m", "callgate.examples.order_agent", "--db",
                           "try.db"], env=cli_env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "order-store: python:callgate.examples.order_agent:answer @ try-agent" in done.stdout
    assert "13 attempt(s) called, 0 from the store, 0 retries, 0 target error(s)" in done.stdout
    assert "final state" in done.stdout  # final-state checks ran on the agent's transcripts
    assert (tmp_path / "try.db").is_file()
