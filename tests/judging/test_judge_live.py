"""The judge over real HTTP: a loopback OpenAI-compatible server plays the judge model with
scripted verdicts; the CLI runs as a subprocess on a temporary database."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import KEY, KEY_ENV
from live_judge import (
    calibrate_perfect_judge,
    judged_responses,
    judged_suite,
    make_judge,
    make_set,
    run,
    script_judge,
    verdict,
)
from loopback import Loopback, ok

from callgate.judging.judge import load_judge


@pytest.fixture
def setup(tmp_path: Path, loopback: Loopback) -> tuple[Path, Path, list]:
    spec = make_judge(tmp_path, loopback.base_url)
    labels = make_set(tmp_path / "set.jsonl")
    return spec, tmp_path / "set.jsonl", labels


@pytest.mark.slow
def test_certification_passes_writes_the_certificate_and_reruns_from_cache(
    setup: tuple, loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    spec, calib, labels = setup
    script_judge(loopback, labels)
    result = run(callgate_exe, cli_env, tmp_path, "judge", "calibrate", str(spec), "--set",
                 str(calib), "--db", "c.db")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "certified" in result.stdout
    cert = json.loads((tmp_path / "tool_choice.cert.json").read_text())
    assert cert["certified"] and cert["fingerprint"] == load_judge(spec).fingerprint
    assert cert["dimensions"]["arguments"]["m1"] == 5 and cert["dimensions"]["arguments"]["m0"] == 5
    assert cert["dimensions"]["tool_choice"]["tpr"] == 1.0
    sent = loopback.requests
    assert len(sent) == 17
    body = sent[0].body
    assert body["model"] == "judge-2026-01-01" and body["temperature"] == 0
    assert "max_tokens" not in body and "tools" not in body
    assert sent[0].headers.get("Authorization") == f"Bearer {KEY}"
    prompt = body["messages"][0]["content"]
    assert "<<<CANDIDATE_RESPONSE" in prompt and "{{response}}" not in prompt

    loopback.reset()
    again = run(callgate_exe, cli_env, tmp_path, "judge", "calibrate", str(spec), "--set",
                str(calib), "--db", "c.db")
    assert again.returncode == 0 and loopback.requests == []  # every verdict from the cache
    assert KEY not in (tmp_path / "c.db").read_bytes().decode("latin-1")

    show = run(callgate_exe, cli_env, tmp_path, "judge", "show", str(spec), "--db", "c.db")
    assert "certified" in show.stdout and "NOT" not in show.stdout


@pytest.mark.slow
def test_certification_fails_below_the_thresholds(
    setup: tuple, loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    spec, calib, labels = setup
    script_judge(loopback, labels, wrong={"[item-05]"})  # one of five argument failures missed
    result = run(callgate_exe, cli_env, tmp_path, "judge", "calibrate", str(spec), "--set",
                 str(calib), "--db", "c.db", "--json")
    assert result.returncode == 1
    cert = json.loads(result.stdout)
    assert not cert["certified"]
    assert cert["dimensions"]["arguments"]["tnr"] == pytest.approx(0.8)
    assert cert["dimensions"]["tool_choice"]["passed"]
    assert not (tmp_path / "tool_choice.cert.json").exists()


@pytest.mark.slow
def test_runs_refuse_an_uncertified_judge_and_a_changed_prompt(
    setup: tuple, loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    spec, calib, labels = setup
    suite = judged_suite(tmp_path / "suite")
    responses = judged_responses(tmp_path / "r.jsonl")
    score = ["score", str(suite), "-r", str(responses), "-m", "m", "--release", "r1",
             "--db", "c.db", "--judge", str(spec)]
    refused = run(callgate_exe, cli_env, tmp_path, *score)
    assert refused.returncode == 2 and "has no certificate" in refused.stderr

    calibrate_perfect_judge(loopback, labels, callgate_exe, cli_env, tmp_path, spec, calib)
    prompt = tmp_path / "tool_choice.md"
    prompt.write_text(prompt.read_text().replace("careful reviewer", "careful grader", 1))
    changed = run(callgate_exe, cli_env, tmp_path, *score)
    assert changed.returncode == 2 and "prompt, model or parameters changed" in changed.stderr

    loopback.reset()
    for n, tool, args in [(0, "pass", "pass"), (1, "pass", "fail"), (2, "pass", "pass"),
                          (3, "fail", "n/a")]:
        loopback.script(f"[case-{n}]", ok(content=verdict(tool, args, f"case {n}"),
                                           provider=None, cost=None))
    anyway = run(callgate_exe, cli_env, tmp_path, *score, "--uncalibrated", "--json")
    assert anyway.returncode == 0, anyway.stderr
    doc = json.loads(anyway.stdout)
    assert doc["scores"]["uncalibrated"] is True
    gate = run(callgate_exe, cli_env, tmp_path, "gate", "-m", "m", "--release", "r1",
               "--db", "c.db")
    assert gate.returncode == 3 and "not calibrated" in gate.stdout


@pytest.mark.slow
def test_judged_verdicts_never_override_schema_failures_and_are_corrected(
    setup: tuple, loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    spec, calib, labels = setup
    calibrate_perfect_judge(loopback, labels, callgate_exe, cli_env, tmp_path, spec, calib)
    loopback.reset()
    for n, tool, args in [(0, "pass", "pass"), (1, "pass", "fail"), (2, "pass", "pass"),
                          (3, "fail", "n/a")]:
        loopback.script(f"[case-{n}]", ok(content=verdict(tool, args, f"case {n}"),
                                           provider=None, cost=None))
    suite = judged_suite(tmp_path / "suite")
    responses = judged_responses(tmp_path / "r.jsonl")
    score = ["score", str(suite), "-r", str(responses), "-m", "m", "--release", "r1",
             "--db", "c.db", "--judge", str(spec), "--json"]
    result = run(callgate_exe, cli_env, tmp_path, *score)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    by_case = {a["case_id"]: a for a in doc["attempts"]}
    assert by_case["j0"]["right_arguments"] and by_case["j0"]["status"] == "scored"
    assert by_case["j1"]["arguments"] == "wrong_value" and "case 1" in (
        by_case["j1"]["arguments_reason"])
    assert by_case["j2"]["right_tool"] and by_case["j2"]["arguments"] == "schema_violation"
    assert not by_case["j2"]["right_arguments"]  # the judge said pass; the schema wins
    assert by_case["j3"]["tool"] == "missing_call" and not by_case["j3"]["right_tool"]
    judged = doc["scores"]["judged"]
    assert judged["n"] == 4 and judged["certified"]
    # tool choice over all 4 judged attempts: the judge passed j0, j1, j2
    assert judged["tool_choice"]["raw"] == pytest.approx(75.0)
    assert judged["tool_choice"]["n"] == 4
    # arguments over the judge's pass/fail where it passed the tool choice, as calibration
    # measures them: j0 pass, j1 fail; j2 failed its schema (counted apart), j3 is out
    assert judged["arguments"]["n"] == 2 and judged["arguments"]["raw"] == pytest.approx(50.0)
    assert judged["arguments"]["deterministic_failures"] == 1
    assert judged["arguments"]["not_applicable"] == 0
    # a perfect judge (TPR = TNR = 1) leaves the share unchanged
    assert judged["arguments"]["corrected"] == pytest.approx(50.0)
    assert doc["scores"]["uncalibrated"] is False
    assert len(loopback.requests) == 4

    loopback.reset()
    rerun = run(callgate_exe, cli_env, tmp_path, *score)
    assert rerun.returncode == 0 and loopback.requests == []  # judge verdicts from the cache


@pytest.mark.slow
def test_label_judged_attempts_by_hand(
    setup: tuple, loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    spec, _, labels = setup
    script_judge(loopback, labels)
    for n in range(4):
        loopback.script(f"[case-{n}]", ok(content=verdict("pass", "pass", f"case {n}"),
                                           provider=None, cost=None))
    suite = judged_suite(tmp_path / "suite")
    responses = judged_responses(tmp_path / "r.jsonl")
    scored = run(callgate_exe, cli_env, tmp_path, "score", str(suite), "-r", str(responses),
                 "-m", "m", "--release", "r1", "--db", "c.db", "--judge", str(spec),
                 "--uncalibrated", "--json")
    run_id = json.loads(scored.stdout)["run_id"]
    grown = tmp_path / "grown.jsonl"
    answers = "pass\npass\nfaithful summary\ns\nfail\nn/a\n\nq\n"
    result = subprocess.run([callgate_exe, "judge", "label", str(run_id), "--set", str(grown),
                             "--db", "c.db"], input=answers, cwd=tmp_path, env=cli_env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "added 2 item(s)" in result.stdout
    from callgate.judging.calibration_set import read_set

    items, _ = read_set(grown)
    assert [(i.id, i.label.tool_choice, i.label.arguments) for i in items] == [
        (f"run{run_id}-j0-r0", "pass", "pass"), (f"run{run_id}-j2-r0", "fail", "n/a")]
    assert items[0].note == "faithful summary" and items[0].case.rubric == "Escalate faithfully."
    assert items[1].response.tool_calls[0].arguments == '{"summary": "[case-2] x", "priority": 1}'
    import sqlite3

    with sqlite3.connect(tmp_path / "c.db") as conn:
        stored = conn.execute("select item_id from calibration_items where set_name = ?",
                              ["grown.jsonl"]).fetchall()
    assert sorted(r[0] for r in stored) == [f"run{run_id}-j0-r0", f"run{run_id}-j2-r0"]


@pytest.mark.slow
def test_live_run_with_the_judge(
    setup: tuple, loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    from loopback import tool_call

    spec, calib, labels = setup
    calibrate_perfect_judge(loopback, labels, callgate_exe, cli_env, tmp_path, spec, calib)
    loopback.reset()
    suite = judged_suite(tmp_path / "suite")
    # The candidate's calls carry a word only the judge's prompt will contain (S<n>-...).
    for n in range(4):
        loopback.script(f"[case-{n}]", ok(calls=[tool_call(
            "escalate", {"summary": f"S{n}-summary"})]))
    loopback.script("hours?", ok(content="9 to 5"))
    for n, tool, args in [(0, "pass", "pass"), (1, "pass", "fail"), (2, "fail", "n/a"),
                          (3, "pass", "pass")]:
        loopback.script(f"S{n}-summary", ok(content=verdict(tool, args), provider=None,
                                             cost=None))
    result = run(callgate_exe, cli_env, tmp_path, "run", str(suite), "--model",
                 "openai/agent", "--api-base", loopback.base_url, "--api-key-env", KEY_ENV,
                 "--repeats", "1", "--release", "r1", "--db", "c.db", "--judge", str(spec),
                 "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    by_case = {a["case_id"]: a for a in doc["attempts"]}
    assert [by_case[f"j{n}"]["right_arguments"] for n in range(4)] == [True, False, False, True]
    assert by_case["j2"]["tool"] == "wrong_tool" and by_case["plain"]["right_tool"]
    assert doc["scores"]["judged"]["n"] == 4 and doc["scores"]["excluded"]["pending_judge"] == 0
    judge_requests = [r for r in loopback.requests if r.body.get("model") == "judge-2026-01-01"]
    assert len(judge_requests) == 4 and len(loopback.requests) == 9


@pytest.mark.slow
@pytest.mark.xfail(reason="open race (stop 44's note): in full parallel runs only, Ctrl-C "
                   "while judging leaves `callgate score` waiting on a held request", strict=False)
def test_ctrl_c_while_judging_keeps_the_verdicts_already_paid_for(
    setup: tuple, loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    import signal
    import sqlite3
    import threading
    import time

    from loopback import Reply, completion

    spec, _, _ = setup
    for n in (0, 1, 3):
        loopback.script(f"[case-{n}]", ok(content=verdict("pass", "pass"), provider=None,
                                           cost=None))
    # case 2's verdict is held until the test has sent Ctrl-C: it is in flight then, however
    # long a loaded machine takes to reach that point
    released = threading.Event()
    loopback.script("[case-2]", Reply(body=completion(content=verdict("pass", "pass"),
                                                      provider=None, cost=None), hold=released))
    suite = judged_suite(tmp_path / "suite")
    responses = judged_responses(tmp_path / "r.jsonl")
    score = ["score", str(suite), "-r", str(responses), "-m", "m", "--release", "r1",
             "--db", "c.db", "--judge", str(spec), "--uncalibrated"]
    db = tmp_path / "c.db"

    def query(sql: str) -> list[tuple]:
        with sqlite3.connect(db) as conn:
            return conn.execute(sql).fetchall()

    process = subprocess.Popen([callgate_exe, *score], cwd=tmp_path, env=cli_env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120  # an upper bound only: it ends when the verdicts are in
    while time.monotonic() < deadline:
        try:
            if query("SELECT count(*) FROM judge_cache")[0][0] == 3:
                break
        except sqlite3.OperationalError:  # not created yet
            pass
        time.sleep(0.05)
    else:
        process.kill()
        released.set()
        raise AssertionError("the three quick verdicts never reached the cache")
    process.send_signal(signal.SIGINT)
    try:
        try:
            process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            # Seen in full parallel runs only: the first Ctrl-C left the process waiting on the
            # held request (a race not found yet, in the closing note of stop 44); a second
            # Ctrl-C abandons requests in flight, as a user would press it.
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=60)
    finally:
        released.set()
    assert process.returncode != 0
    assert query("SELECT count(*) FROM judge_cache")[0][0] == 3  # committed, not rolled back
    assert query("SELECT status FROM runs") == [("interrupted",)]  # never shown as finished
    assert dict(query("SELECT case_id, status FROM verdicts WHERE case_id LIKE 'j%'")) == {
        "j0": "scored", "j1": "scored", "j2": "pending_judge", "j3": "scored"}

    loopback.reset()
    loopback.script("[case-2]", ok(content=verdict("pass", "pass"), provider=None, cost=None))
    again = run(callgate_exe, cli_env, tmp_path, *score, "--json")
    assert again.returncode == 0, again.stderr
    assert len(loopback.requests) == 1 and "[case-2]" in loopback.requests[0].marker
    assert query("SELECT status FROM runs") == [("done",)]


@pytest.mark.slow
def test_a_certificate_earned_under_looser_thresholds_does_not_count(
    setup: tuple, loopback: Loopback, callgate_exe: str, cli_env: dict, tmp_path: Path
) -> None:
    spec, calib, labels = setup
    calibrate_perfect_judge(loopback, labels, callgate_exe, cli_env, tmp_path, spec, calib)
    fingerprint = load_judge(spec).fingerprint
    spec.write_text(spec.read_text().replace("tpr = 0.9", "tpr = 0.99"))
    assert load_judge(spec).fingerprint == fingerprint  # thresholds decide no verdict
    show = run(callgate_exe, cli_env, tmp_path, "judge", "show", str(spec), "--db", "c.db")
    assert "NOT CERTIFIED" in show.stdout and "other thresholds" in show.stdout
