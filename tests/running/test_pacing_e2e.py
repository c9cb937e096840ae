"""`callgate run` against a rate-limited loopback server (a token bucket that answers 429 with
Retry-After past it): the run finishes, every attempt is answered and scored (none lost, none
counted against the model), and the run says what limited it in --json, in the store and on
its progress line. End to end: the installed CLI in a subprocess, real HTTP, a real SQLite
file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import KEY_ENV, lookup_case, write_suite
from loopback import Loopback, TokenBucket, ok, tool_call

pytestmark = pytest.mark.slow

CASES = 12
REPEATS = 3


@pytest.fixture
def limited() -> object:
    # Bursts of 3 at 30 requests/s: the first round of 8 adaptive requests meets 429s.
    with Loopback(latency=0.02, bucket=TokenBucket(rate=30, burst=3)) as server:
        yield server


def run(exe: str, env: dict[str, str], cwd: Path, server: Loopback, *extra: str
        ) -> subprocess.CompletedProcess[str]:
    suite = write_suite(cwd / "suite", [lookup_case(f"c{i}") for i in range(CASES)])
    args = [exe, "run", str(suite), "-m", "openai/served", "--api-base", server.base_url,
            "--api-key-env", KEY_ENV, "-k", str(REPEATS), "--db", str(cwd / "runs.db"), *extra]
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_a_rate_limited_run_finishes_with_every_attempt_scored(
        limited: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]) -> None:
    limited.script("[c", ok(calls=[tool_call("lookup_order", {"order_id": "ord_1"})]))
    done = run(callgate_exe, cli_env, tmp_path, limited, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    live = doc["live"]
    bucket = limited.bucket
    assert bucket is not None and bucket.refused > 0  # the limit was met
    # No attempt lost: every one answered and scored right; the 429s were retried, not kept.
    assert live["called"] == CASES * REPEATS and live["provider_errors"] == 0
    assert doc["scores"]["figures"]["scored"] == CASES * REPEATS
    assert doc["scores"]["figures"]["right_arguments"]["pct"] == pytest.approx(100.0)
    assert all(a["status"] == "scored" for a in doc["attempts"])
    assert live["requests"] == bucket.admitted + bucket.refused == CASES * REPEATS + live["retries"]
    # What limited it: every 429 the server sent is counted, and the Retry-After waits.
    pacing = live["pacing"]
    assert pacing["mode"] == "adaptive" and pacing["rate_limited"] == bucket.refused
    assert pacing["backoff_s"] >= 1.0  # at least one whole-second Retry-After
    assert pacing["lowest"] < 8  # cut from the start of 8
    with sqlite3.connect(tmp_path / "runs.db") as db:
        stored = json.loads(db.execute("SELECT pacing FROM runs").fetchone()[0])
    assert stored == pacing


def test_a_fixed_concurrency_is_kept_and_reported(
        limited: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]) -> None:
    done = run(callgate_exe, cli_env, tmp_path, limited, "--json", "--concurrency", "2")
    assert done.returncode == 0, done.stderr
    pacing = json.loads(done.stdout)["live"]["pacing"]
    assert (pacing["mode"], pacing["limit"], pacing["lowest"], pacing["highest"]) == (
        "fixed", 2, 2, 2)


def test_the_progress_line_says_what_limits_the_run(
        limited: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]) -> None:
    done = run(callgate_exe, {**cli_env, "COLUMNS": "200"}, tmp_path, limited)
    assert done.returncode == 0, done.stderr
    # The bar is drawn on stderr; its last state names the limit, the 429s and the backoff.
    assert "limit " in done.stderr and "429s " in done.stderr and "backoff " in done.stderr, (
        done.stderr)
