"""`callgate run` end to end: the installed CLI as a subprocess against the loopback server.

What went over the wire, the verdicts in --json, the key never stored or printed, the cache,
--offline, and resuming after SIGKILL or Ctrl-C."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV, lookup_case, marker, no_call_case, write_suite
from live_runs import config
from loopback import Loopback, error, ok, tool_call

CALL = tool_call("lookup_order", {"order_id": "ord_1"})


def callgate(
    exe: str, env: dict[str, str], cwd: Path, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [exe, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def assert_no_key(tmp_path: Path, *outputs: str) -> None:
    for text in outputs:
        assert KEY not in text
    for path in tmp_path.rglob("*.db*"):
        assert KEY.encode() not in path.read_bytes(), path


def stored_count(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("SELECT count(*) FROM live_responses").fetchone()[0]
    except sqlite3.Error:
        return 0


def answered(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT case_id FROM live_responses")}


def run_status(db: Path) -> list[Any]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT status FROM runs")]


@pytest.mark.slow
def test_run_json_wire_and_secrets(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    loopback.script("[ok]", ok(calls=[CALL], provider="Fireworks", cost=0.002))
    loopback.script(
        "[limited]", error(429, "slow down", **{"Retry-After": "0.2"}), ok(calls=[CALL])
    )
    loopback.script(
        "[cut]", ok(calls=[tool_call("lookup_order", '{"order_')], finish_reason="length")
    )
    loopback.script("[chat]", ok(content="It ships tomorrow."))
    loopback.script("[hours]", ok(content="Nine to five."))
    loopback.script("[echo]", error(400, f"bad request, key {KEY}"))
    cases = [lookup_case(c) for c in ("ok", "limited", "cut", "chat", "echo")]
    suite = write_suite(tmp_path / "suite", [*cases, no_call_case("hours")])
    cfg = config(tmp_path, loopback)
    # 4 of 12 attempts are excluded on purpose: allowed here, or the run would exit 3.
    args = ["run", str(suite), "-m", "router", "-k", "2", "--config", str(cfg), "--db", "c.db",
            "--max-excluded", "0.5"]
    done = callgate(callgate_exe, cli_env, tmp_path, *args, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["agent"] == "router" and doc["release"] == "dev"
    assert doc["model"] == "openrouter/test/model"  # the model id the agent ran with
    assert doc["live"]["called"] == 12 and doc["live"]["cached"] == 0
    assert doc["live"]["client"] == "lean" and doc["live"]["provider_errors"] == 2
    verdicts = {(a["case_id"], a["repeat"]): a for a in doc["attempts"]}
    assert len(verdicts) == 12
    assert verdicts[("ok", 0)]["right_arguments"] and verdicts[("limited", 1)]["right_arguments"]
    assert verdicts[("cut", 0)]["status"] == "truncated"
    assert verdicts[("chat", 1)]["tool"] == "missing_call"
    assert verdicts[("hours", 0)]["right_tool"]
    assert verdicts[("echo", 0)]["status"] == "provider_error"
    scores = doc["scores"]
    assert scores["excluded"] == {
        "truncated": 2, "provider_error": 2, "environment_error": 0, "pending_judge": 0,
        "judge_error": 0, "target_error": 0,
    }
    assert scores["providers"]["Fireworks"] == 2
    assert scores["cost_usd"] == pytest.approx(2 * 0.002 + 8 * 0.000125)

    tools = json.loads((suite / "tools.json").read_text())
    assert len(loopback.requests) == 13  # one 429 retried
    for seen in loopback.requests:
        assert seen.headers["Authorization"] == f"Bearer {KEY}"
        body = seen.body
        assert body["reasoning_effort"] == "low"
        assert body["provider"] == {
            "order": ["fireworks"],
            "allow_fallbacks": False,
            "require_parameters": True,
        }
        assert body["tools"] == tools
        assert not {"max_tokens", "max_completion_tokens", "max_output_tokens"} & set(body)
    assert_no_key(tmp_path, done.stdout, done.stderr)

    # Again: answers come from the store; only the failed attempts are called again.
    loopback.reset()
    again = callgate(callgate_exe, cli_env, tmp_path, *args, "--json")
    assert again.returncode == 0, again.stderr
    assert sorted(s.marker.split(" ")[0] for s in loopback.requests) == ["[echo]", "[echo]"]
    redo = json.loads(again.stdout)
    assert redo["live"]["cached"] == 10 and redo["live"]["called"] == 2
    assert [a for a in redo["attempts"] if a["case_id"] != "echo"] == [
        a for a in doc["attempts"] if a["case_id"] != "echo"
    ]
    # And once more: zero requests.
    loopback.reset()
    third = callgate(callgate_exe, cli_env, tmp_path, *args, "--json")
    assert third.returncode == 0, third.stderr
    assert loopback.requests == []
    assert json.loads(third.stdout)["live"]["cached"] == 12

    # --offline fails on a miss instead of calling.
    offline = callgate(
        callgate_exe, cli_env, tmp_path, *args[:4], "-k", "3", *args[6:], "--offline"
    )
    assert offline.returncode == 2
    assert "--offline: 6 of 18 attempts have no stored response" in offline.stderr
    assert loopback.requests == []

    # The table for people; --no-cache calls again.
    table = callgate(callgate_exe, cli_env, tmp_path, *args, "--no-cache")
    assert table.returncode == 0, table.stderr
    assert "right tool" in table.stdout and "12 attempt(s) called" in table.stdout
    assert len(loopback.requests) == 12
    assert_no_key(tmp_path, table.stdout, table.stderr)


@pytest.mark.slow
def test_flags_without_a_config(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    suite = write_suite(tmp_path / "suite", [lookup_case("a")])
    done = callgate(
        callgate_exe,
        cli_env,
        tmp_path,
        "run",
        str(suite),
        "-m",
        "openai/local-model",
        "--api-base",
        loopback.base_url,
        "--api-key-env",
        KEY_ENV,
        "-k",
        "1",
        "--reasoning-effort",
        "medium",
        "--param",
        "temperature=0",
        "--param",
        "seed=7",
        "--db",
        "c.db",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    (seen,) = loopback.requests
    assert seen.body["model"] == "local-model" and seen.body["reasoning_effort"] == "medium"
    assert seen.body["temperature"] == 0 and seen.body["seed"] == 7
    assert "provider" not in seen.body and "usage" not in seen.body
    doc = json.loads(done.stdout)
    assert doc["model"] == "openai/local-model"
    attempt = doc["attempts"][0]  # the default reply calls lookup_order with no order_id
    assert attempt["right_tool"] and attempt["arguments"] == "schema_violation"
    # An unset key variable is a usage error, before anything is sent.
    env = {k: v for k, v in cli_env.items() if k != KEY_ENV}
    missing = callgate(
        callgate_exe,
        env,
        tmp_path,
        "run",
        str(suite),
        "-m",
        "openrouter/x/y",
        "--no-cache",
        "--api-base",
        loopback.base_url,
        "--api-key-env",
        KEY_ENV,
        "--db",
        "c.db",
    )
    assert missing.returncode == 2 and f"{KEY_ENV} is not set" in missing.stderr
    assert len(loopback.requests) == 1


@pytest.mark.slow
def test_a_count_that_is_surely_a_typo_is_refused_before_any_call(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    """`-k 30000` would plan 30,000 paid calls per case: refused in one line naming the
    option, exit 2, with no call made and no store written; the bounds themselves run."""
    suite = write_suite(tmp_path / "suite", [lookup_case("a"), no_call_case("b")])
    base = ["run", str(suite), "-m", "openai/local-model", "--api-base", loopback.base_url,
            "--api-key-env", KEY_ENV, "--db", "c.db"]
    for option, value, name in (("-k", "101", "--repeats"), ("--repeats", "30000", "--repeats"),
                                ("-k", "0", "--repeats"), ("-c", "4097", "--concurrency"),
                                ("--concurrency", "0", "--concurrency")):
        done = callgate(callgate_exe, cli_env, tmp_path, *base, option, value)
        assert done.returncode == 2, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {name} {value}: "), lines
    assert loopback.requests == [] and not (tmp_path / "c.db").exists()
    done = callgate(callgate_exe, cli_env, tmp_path, *base, "-k", "100", "-c", "4096")
    assert done.returncode == 0, done.stderr
    assert len(loopback.requests) == 200


@pytest.mark.slow
def test_an_auth_failure_stops_with_exit_2(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    loopback.script("[", error(401, f"invalid key {KEY}"))
    suite = write_suite(tmp_path / "suite", [lookup_case(f"c{i}") for i in range(10)])
    done = callgate(
        callgate_exe,
        cli_env,
        tmp_path,
        "run",
        str(suite),
        "-m",
        "router",
        "-k",
        "1",
        "-c",
        "1",
        "--config",
        str(config(tmp_path, loopback)),
        "--db",
        "c.db",
    )
    assert done.returncode == 2
    assert "auth" in done.stderr and "run the same command again" in done.stderr
    assert len(loopback.requests) == 1
    assert_no_key(tmp_path, done.stdout, done.stderr)


def _start_slow_run(
    loopback: Loopback, tmp_path: Path, exe: str, env: dict[str, str], cases: int
) -> tuple[subprocess.Popen[str], list[str], Path]:
    loopback.latency = 0.1
    suite = write_suite(tmp_path / "suite", [lookup_case(f"c{i:02d}") for i in range(cases)])
    args = [
        "run",
        str(suite),
        "-m",
        "router",
        "-k",
        "1",
        "-c",
        "2",
        "--config",
        str(config(tmp_path, loopback)),
        "--db",
        "c.db",
    ]
    process = subprocess.Popen(
        [exe, *args],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    db = tmp_path / "c.db"
    deadline = time.monotonic() + 600  # a bound on a hang only: the 6th answer ends the wait
    while stored_count(db) < 6:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no answer was committed"
        time.sleep(0.02)
    return process, args, db


def _resume(
    loopback: Loopback, tmp_path: Path, exe: str, env: dict[str, str], args: list[str], db: Path
) -> None:
    """Run again: the server must see exactly the attempts with no stored answer."""
    done_before = answered(db)
    loopback.reset()
    loopback.latency = 0
    again = callgate(exe, env, tmp_path, *args, "--json")
    assert again.returncode == 0, again.stderr
    cases = {f"c{i:02d}" for i in range(30)}
    expected = Counter(marker(c) for c in cases - done_before)
    assert Counter(s.marker.split(" ")[0] for s in loopback.requests) == expected
    doc = json.loads(again.stdout)
    assert doc["live"]["cached"] == len(done_before)
    assert doc["live"]["called"] == 30 - len(done_before)
    assert len(doc["attempts"]) == 30 and doc["missing_cases"] == []
    assert run_status(db) == ["done"]


@pytest.mark.slow
def test_resume_after_sigkill(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    process, args, db = _start_slow_run(loopback, tmp_path, callgate_exe, cli_env, 30)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=10)
    assert 6 <= len(answered(db)) < 30
    assert run_status(db) == ["running"]
    _resume(loopback, tmp_path, callgate_exe, cli_env, args, db)


@pytest.mark.slow
def test_ctrl_c_saves_and_says_how_to_resume(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    process, args, db = _start_slow_run(loopback, tmp_path, callgate_exe, cli_env, 30)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=20)
    assert process.returncode == 130, err
    assert "interrupted" in err and "Run the same command again to resume" in err
    saved = answered(db)
    assert 6 <= len(saved) < 30
    assert f"{len(saved)} of 30 attempts are saved" in err
    assert run_status(db) == ["interrupted"]
    _resume(loopback, tmp_path, callgate_exe, cli_env, args, db)
