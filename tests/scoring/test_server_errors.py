"""--server-errors: a 5xx after retries is excluded (the default), or counted as a wrong answer
when the serving stack is what is released; rate limits and timeouts stay excluded either way.
End to end: the installed CLI, `run` against the loopback server and `score` on a file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY_ENV, lookup_case, no_call_case, write_suite
from loopback import Loopback, error, ok, tool_call

pytestmark = pytest.mark.slow

CALL = tool_call("lookup_order", {"order_id": "ord_1"})


def callgate(exe: str, env: dict[str, str], cwd: Path, *args: str
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exe, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def by_case(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {attempt["case_id"]: attempt for attempt in doc["attempts"]}


def suite_of(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "suite", [
        lookup_case("ok"), lookup_case("down"), lookup_case("limited"),
        no_call_case("hours"), no_call_case("quiet")])


def test_run_counts_server_errors_only_when_asked(
        loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]) -> None:
    loopback.script("[ok]", ok(calls=[CALL]))
    loopback.script("[down]", error(500, "model output broke the parser"))
    loopback.script("[limited]", error(429, "slow down"))
    loopback.script("[hours]", ok(content="Nine to five."))
    loopback.script("[quiet]", error(503, "overloaded"))
    suite = suite_of(tmp_path)
    (tmp_path / "callgate.toml").write_text(
        '[[candidates]]\nname = "vllm-next"\nmodel = "openai/served"\n'
        f'api_base = "{loopback.base_url}"\napi_key_env = "{KEY_ENV}"\n')
    args = ["run", str(suite), "-m", "vllm-next", "-k", "1", "--max-retries", "0",
            "--max-excluded", "0.25", "--json"]

    excluded = callgate(callgate_exe, cli_env, tmp_path, *args, "--db", "exclude.db")
    # 3 of 5 excluded (two server errors and a rate limit): not a result.
    assert excluded.returncode == 3, excluded.stderr
    assert "running the same command again asks the attempts that failed" in " ".join(
        excluded.stderr.split())
    verdicts = by_case(json.loads(excluded.stdout))
    assert {case: v["status"] for case, v in verdicts.items()} == {
        "ok": "scored", "down": "provider_error", "limited": "provider_error",
        "hours": "scored", "quiet": "provider_error"}

    counted = callgate(callgate_exe, cli_env, tmp_path, *args, "--db", "count.db",
                       "--server-errors", "count")
    # Only the rate limit is excluded now (1 of 5, under 0.25): a result.
    assert counted.returncode == 0, counted.stderr
    doc = json.loads(counted.stdout)
    verdicts = by_case(doc)
    assert verdicts["limited"]["status"] == "provider_error"
    down, quiet = verdicts["down"], verdicts["quiet"]
    assert (down["status"], down["tool"], down["right_tool"], down["right_arguments"]) == (
        "scored", "missing_call", False, False)
    assert down["tool_reason"].startswith("server error 500 counted (--server-errors count)")
    assert "model output broke the parser" in down["tool_reason"]
    assert (quiet["status"], quiet["tool"], quiet["right_tool"]) == (
        "scored", "wrong_tool", False)
    assert quiet["tool_reason"].startswith("server error 503 counted (--server-errors count)")
    figures = doc["scores"]["figures"]
    assert figures["scored"] == 4 and figures["right_tool"]["pct"] == pytest.approx(50.0)
    assert doc["scores"]["excluded"]["provider_error"] == 1
    # A failed request has no cost to know: the counted ones are not "cost unknown".
    assert doc["scores"]["cost_unknown"] == 0


def test_score_counts_recorded_server_errors_only_when_asked(
        tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]) -> None:
    suite = suite_of(tmp_path)
    lines = [
        {"case_id": "ok", "response": {"role": "assistant", "tool_calls": [CALL]}},
        {"case_id": "down", "error": {"kind": "server_error", "status": 502,
                                      "message": "bad gateway"}},
        {"case_id": "limited", "error": {"kind": "rate_limit", "status": 429}},
        {"case_id": "hours", "error": {"kind": "timeout", "message": "no response within 5 s"}},
        {"case_id": "quiet", "error": {"kind": "server_error", "status": 500}},
    ]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = ["score", str(suite), "-r", "r.jsonl", "-m", "m", "--release", "1", "--json",
            "--max-excluded", "0.5"]

    excluded = callgate(callgate_exe, cli_env, tmp_path, *args, "--db", "exclude.db")
    assert excluded.returncode == 3, excluded.stderr  # 4 of 5 excluded
    assert [v["status"] for v in by_case(json.loads(excluded.stdout)).values()].count(
        "provider_error") == 4

    counted = callgate(callgate_exe, cli_env, tmp_path, *args, "--db", "count.db",
                       "--server-errors", "count")
    assert counted.returncode == 0, counted.stderr  # the 429 and the timeout: 2 of 5
    verdicts = by_case(json.loads(counted.stdout))
    assert {case: v["status"] for case, v in verdicts.items()} == {
        "ok": "scored", "down": "scored", "limited": "provider_error",
        "hours": "provider_error", "quiet": "scored"}
    assert verdicts["down"]["tool_reason"].startswith(
        "server error 502 counted (--server-errors count)")
    assert verdicts["quiet"]["tool"] == "wrong_tool" and not verdicts["quiet"]["right_tool"]

    # Scored as two shards and merged, the release's scores are the unsharded one's: a
    # counted server error has no cost to know there too (merge counted it as unknown).
    shards = []
    for k in (1, 2):
        shard = callgate(callgate_exe, cli_env, tmp_path, *args, "--db", f"shard{k}.db",
                         "--server-errors", "count", "--shard", f"{k}/2")
        assert shard.returncode in (0, 3), shard.stderr
        shards.append(f"shard{k}.db")
    merged = callgate(callgate_exe, cli_env, tmp_path, "merge", "merged.db", *shards)
    assert merged.returncode == 0, merged.stderr

    def scores_of(db: str) -> dict[str, Any]:
        with sqlite3.connect(tmp_path / db) as conn:
            (scores,) = conn.execute("SELECT scores FROM runs WHERE release = '1'").fetchone()
        return json.loads(scores)

    assert scores_of("merged.db")["cost_unknown"] == scores_of("count.db")["cost_unknown"]
    assert scores_of("merged.db")["figures"] == scores_of("count.db")["figures"]

    table = callgate(callgate_exe, cli_env, tmp_path, *args[:-3], "--db", "table.db",
                     "--server-errors", "count", "--max-excluded", "0.5")
    assert table.returncode == 0, table.stderr
    assert "server error 502 counted" in table.stdout  # the failures table names it


def test_a_bad_server_errors_value_is_one_line(tmp_path: Path, callgate_exe: str,
                                               cli_env: dict[str, str]) -> None:
    done = callgate(callgate_exe, cli_env, tmp_path, "score", "s", "-r", "r", "-m", "m",
                    "--release", "1", "--server-errors", "sometimes")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --server-errors sometimes: ") and len(
        done.stderr.splitlines()) == 1, done.stderr


def test_the_gate_never_compares_releases_scored_with_different_server_error_rules(
        tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]) -> None:
    suite = suite_of(tmp_path)
    answers = [{"case_id": c, "response": {"role": "assistant", "tool_calls": [CALL]}}
               for c in ("ok", "down", "limited")]
    answers += [{"case_id": c, "response": {"role": "assistant", "content": "Nine to five."}}
                for c in ("hours", "quiet")]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(line) + "\n" for line in answers))

    def score(release: str, *more: str) -> None:
        done = callgate(callgate_exe, cli_env, tmp_path, "score", str(suite), "-r", "r.jsonl",
                        "-m", "m", "--release", release, *more)
        assert done.returncode == 0, done.stderr

    def gate(release: str) -> subprocess.CompletedProcess[str]:
        return callgate(callgate_exe, cli_env, tmp_path, "gate", "-m", "m", "--release",
                        release, "--json")

    score("1")
    assert gate("1").returncode == 0
    score("2", "--server-errors", "count")  # the same answers, the other rule
    mixed = gate("2")
    assert mixed.returncode == 3, mixed.stdout + mixed.stderr
    said = " ".join(json.loads(mixed.stdout)["messages"])
    assert ("server errors are counted as wrong answers in 2 and excluded in the baseline 1"
            in said)
    score("3")  # back to the baseline's rule: compared, passes
    assert gate("3").returncode == 0


def test_run_live_marks_a_run_not_a_result_as_callgate_run_does(
        loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]) -> None:
    """The library's run_live, given max_excluded, leaves the gate record `callgate run
    --max-excluded` leaves, written as the run is finished (before, only the CLI wrote it)."""
    from callgate.models.config import Candidate
    from callgate.models.retry import RetryPolicy
    from callgate.running.run import run_live
    from callgate.running.settings import RunSettings
    from callgate.store.db import Store
    from callgate.suites.suite import load_suite

    loopback.script("[ok]", ok(calls=[CALL]))
    loopback.script("[hours]", ok(content="Nine to five."))
    for case_id in ("down", "limited", "quiet"):
        loopback.script(f"[{case_id}]", error(503, "overloaded"))
    suite = suite_of(tmp_path)
    (tmp_path / "callgate.toml").write_text(
        '[[candidates]]\nname = "vllm-next"\nmodel = "openai/served"\n'
        f'api_base = "{loopback.base_url}"\napi_key_env = "{KEY_ENV}"\n')
    by_cli = callgate(callgate_exe, cli_env, tmp_path, "run", str(suite), "-m", "vllm-next",
                      "-k", "1", "--max-retries", "0", "--max-excluded", "0.25",
                      "--release", "r1", "--db", "cli.db")
    assert by_cli.returncode == 3, by_cli.stderr
    settings = RunSettings(repeats=1, progress=False, retry=RetryPolicy(max_retries=0),
                           max_excluded=0.25)
    with Store(tmp_path / "library.db") as store:
        live = run_live(load_suite(suite), Candidate(
            name="vllm-next", model="openai/served", api_base=loopback.base_url,
            api_key_env=KEY_ENV), store, release="r1", settings=settings,
            environ={KEY_ENV: cli_env[KEY_ENV]})
    record = live.result.not_a_result
    assert record is not None and record.decided_by == "run"

    def gate_records(db: str) -> list[tuple[str, str, str]]:
        with sqlite3.connect(tmp_path / db) as conn:
            return conn.execute("SELECT agent, release, gate FROM runs").fetchall()

    assert gate_records("library.db") == gate_records("cli.db")
    (_, _, gate), = gate_records("cli.db")
    assert json.loads(gate) == record.model_dump(mode="json")
