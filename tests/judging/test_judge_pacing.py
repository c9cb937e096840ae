"""The judge's calls are paced as a run's are: `judge calibrate` and `score --judge` against a
judge endpoint that rate-limits (a token bucket answering 429 with Retry-After and rate-limit
headers) finish with every verdict, meet fewer 429s than a fixed pool of 8 (the old default),
and say what limited them, on stderr and in score's --json. End to end: the installed CLI in
a subprocess, real HTTP to a loopback server, a real SQLite file."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import KEY_ENV
from live_judge import TOOLS, make_judge, make_set, script_judge, verdict
from loopback import Loopback, TokenBucket, ok, tool_call

pytestmark = pytest.mark.slow

JUDGED_CASES = 24


def limited_judge() -> Loopback:
    # Bursts of 3 at 20 requests/s: a first round of 8 judge calls meets 429s.
    return Loopback(latency=0.05, bucket=TokenBucket(rate=20, burst=3)).start()


@pytest.fixture
def servers() -> Iterator[list[Loopback]]:
    """Two fresh rate-limited judge endpoints: one for the paced run, one for the fixed."""
    started = [limited_judge(), limited_judge()]
    try:
        yield started
    finally:
        for server in started:
            server.stop()


def run(exe: str, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def summary(stderr: str) -> tuple[str, int]:
    """The judge's pacing line on stderr: its mode word and the 429s it counted."""
    found = re.search(r"judge calls: (limit|fixed) \d+ · 429s (\d+) · backoff [\d.]+s", stderr)
    assert found, stderr
    return found.group(1), int(found.group(2))


def calibrate(exe: str, env: dict[str, str], cwd: Path, server: Loopback, *extra: str
              ) -> subprocess.CompletedProcess:
    spec = make_judge(cwd, server.base_url)
    script_judge(server, make_set(cwd / "set.jsonl"))
    return run(exe, env, cwd, "judge", "calibrate", str(spec), "--set", "set.jsonl",
               "--db", "c.db", "--json", *extra)


def test_calibration_against_a_rate_limited_judge_slows_down_instead_of_failing(
        servers: list[Loopback], tmp_path: Path, callgate_exe: str, cli_env: dict) -> None:
    paced_dir, fixed_dir = tmp_path / "paced", tmp_path / "fixed"
    paced_dir.mkdir()
    fixed_dir.mkdir()
    paced = calibrate(callgate_exe, cli_env, paced_dir, servers[0])
    assert paced.returncode == 0, paced.stderr  # certified: every item has its verdict
    cert = json.loads(paced.stdout)
    assert cert["certified"] and cert["dimensions"]["tool_choice"]["tpr"] == 1.0
    bucket = servers[0].bucket
    assert bucket is not None and bucket.refused > 0 and bucket.admitted == 17
    assert summary(paced.stderr) == ("limit", bucket.refused)

    fixed = calibrate(callgate_exe, cli_env, fixed_dir, servers[1], "--concurrency", "8")
    fixed_bucket = servers[1].bucket
    assert fixed_bucket is not None
    assert summary(fixed.stderr) == ("fixed", fixed_bucket.refused)
    assert bucket.refused < fixed_bucket.refused


def judged_suite(root: Path) -> tuple[Path, Path]:
    """A suite of judged cases and a recorded answer to each (an escalation)."""
    root.mkdir()
    (root / "tools.json").write_text(json.dumps(TOOLS))
    cases = [{"id": f"j{n}", "messages": [{"role": "user", "content": f"[case-{n}] a person"}],
              "expect": {"type": "judge", "rubric": "Escalate faithfully."}}
             for n in range(JUDGED_CASES)]
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    answers = root.parent / f"{root.name}.jsonl"
    answers.write_text("".join(json.dumps({"case_id": f"j{n}", "finish_reason": "stop",
                                           "response": {"role": "assistant", "tool_calls": [
                                               {"id": "c", "type": "function", "function": {
                                                   "name": "escalate",
                                                   "arguments": '{"summary": "help"}'}}]}})
                               + "\n" for n in range(JUDGED_CASES)))
    return root, answers


def score(exe: str, env: dict[str, str], cwd: Path, server: Loopback, *extra: str
          ) -> subprocess.CompletedProcess:
    spec = make_judge(cwd, server.base_url)
    suite, answers = judged_suite(cwd / "suite")
    server.script("[case-", ok(content=verdict("pass", "pass"), provider=None, cost=None))
    return run(exe, env, cwd, "score", str(suite), "-r", str(answers), "-m", "m",
               "--release", "r1", "--db", "s.db", "--judge", str(spec), "--uncalibrated",
               *extra)


def test_score_with_a_rate_limited_judge_judges_every_attempt_and_says_what_limited_it(
        servers: list[Loopback], tmp_path: Path, callgate_exe: str, cli_env: dict) -> None:
    paced_dir, fixed_dir = tmp_path / "paced", tmp_path / "fixed"
    paced_dir.mkdir()
    fixed_dir.mkdir()
    paced = score(callgate_exe, cli_env, paced_dir, servers[0], "--json")
    assert paced.returncode == 0, paced.stderr
    doc = json.loads(paced.stdout)
    # Every attempt judged: none pending, none a judge_error, none a provider error.
    assert {a["status"] for a in doc["attempts"]} == {"scored"}
    assert doc["scores"]["judged"]["n"] == JUDGED_CASES
    bucket = servers[0].bucket
    assert bucket is not None and bucket.refused > 0 and bucket.admitted == JUDGED_CASES
    pacing = doc["judge_pacing"]
    assert pacing["mode"] == "adaptive" and pacing["rate_limited"] == bucket.refused
    assert pacing["lowest"] < 8 and pacing["backoff_s"] >= 1.0  # cut; a Retry-After waited
    assert summary(paced.stderr) == ("limit", bucket.refused)

    fixed = score(callgate_exe, cli_env, fixed_dir, servers[1], "--concurrency", "8")
    fixed_bucket = servers[1].bucket
    assert fixed_bucket is not None
    assert summary(fixed.stderr) == ("fixed", fixed_bucket.refused)
    assert bucket.refused < fixed_bucket.refused


def test_a_runs_judge_at_its_own_endpoint_is_paced_and_reported(
        servers: list[Loopback], loopback: Loopback, tmp_path: Path, callgate_exe: str,
        cli_env: dict) -> None:
    """The candidate at one endpoint, the judge at another that rate-limits: the judge has a
    pacer of its own, and the run reports it beside the candidate's."""
    judge_server = servers[0]
    spec = make_judge(tmp_path, judge_server.base_url)
    suite, _ = judged_suite(tmp_path / "suite")
    loopback.script("[case-", ok(calls=[tool_call("escalate", {"summary": "help"})]))
    judge_server.script("[case-", ok(content=verdict("pass", "pass"), provider=None, cost=None))
    done = run(callgate_exe, cli_env, tmp_path, "run", str(suite), "-m", "openai/agent",
               "--api-base", loopback.base_url, "--api-key-env", KEY_ENV, "-k", "1",
               "--release", "r1", "--db", "r.db", "--judge", str(spec), "--uncalibrated",
               "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert {a["status"] for a in doc["attempts"]} == {"scored"}
    bucket = judge_server.bucket
    assert bucket is not None and bucket.refused > 0 and bucket.admitted == JUDGED_CASES
    live = doc["live"]
    assert live["pacing"]["rate_limited"] == 0 and live["provider_errors"] == 0
    assert live["judge_pacing"]["mode"] == "adaptive"
    assert live["judge_pacing"]["rate_limited"] == bucket.refused
    assert summary(done.stderr) == ("limit", bucket.refused)
