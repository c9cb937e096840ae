"""The terminal labellers (`judge label RUN --set FILE` and `judge label --audit RUN`) driven
through real stdin: the same questions in the same order, an impossible pair asked again before
anything is kept, and the judge's verdict hidden until the person has answered."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest
from live_judge import judged_responses, judged_suite, make_judge, run, verdict
from loopback import Loopback, ok

from callgate.judging.calibration_set import read_journal

QUESTION = re.compile(r"(tool_choice|arguments) \[[^\]]*\]")


@pytest.fixture
def run_id(tmp_path: Path, loopback: Loopback, callgate_exe: str, cli_env: dict) -> int:
    spec = make_judge(tmp_path, loopback.base_url)
    for n in range(4):
        loopback.script(f"[case-{n}]", ok(content=verdict("pass", "pass", f"judge-reason-{n}"),
                                           provider=None, cost=None))
    scored = run(callgate_exe, cli_env, tmp_path, "score", str(judged_suite(tmp_path / "s")),
                 "-r", str(judged_responses(tmp_path / "r.jsonl")), "-m", "m", "--release",
                 "r1", "--db", "c.db", "--judge", str(spec), "--uncalibrated", "--json")
    assert scored.returncode == 0, scored.stderr
    return int(json.loads(scored.stdout)["run_id"])


def label(exe: str, env: dict, cwd: Path, answers: str, *args: str
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exe, "judge", "label", *args, "--labeller", "Grace", "--db", "c.db"],
                          input=answers, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.slow
def test_fail_then_pass_is_asked_again_in_both_labellers_before_anything_is_kept(
    run_id: int, tmp_path: Path, callgate_exe: str, cli_env: dict
) -> None:
    grown = tmp_path / "grown.jsonl"
    labelled = label(callgate_exe, cli_env, tmp_path, "fail\npass\nn/a\nwrong tool\nq\n",
                     str(run_id), "--set", str(grown))
    assert labelled.returncode == 0, labelled.stderr
    assert "cannot pass when tool_choice fails" in labelled.stdout
    [item] = read_journal(grown).items
    assert (item.label.tool_choice, item.label.arguments, item.note) == (
        "fail", "n/a", "wrong tool")
    with sqlite3.connect(tmp_path / "c.db") as conn:
        stored = conn.execute("select label_tool_choice, label_arguments from "
                              "calibration_items where set_name = 'grown.jsonl'").fetchall()
    assert stored == [("fail", "n/a")]

    drawn = run(callgate_exe, cli_env, tmp_path, "judge", "audit", str(run_id), "--n", "4",
                "--seed", "3", "--db", "c.db")
    assert drawn.returncode == 0, drawn.stderr
    audited = label(callgate_exe, cli_env, tmp_path, "fail\npass\nn/a\nq\n", "--audit",
                    str(run_id))
    assert audited.returncode == 0, audited.stderr
    assert "cannot pass when tool_choice fails" in audited.stdout
    with sqlite3.connect(tmp_path / "c.db") as conn:
        labels = conn.execute("select label_tool_choice, label_arguments from audit_items "
                              "where run = ? and label_tool_choice is not null",
                              [run_id]).fetchall()
    assert labels == [("fail", "n/a")]
    # One set of questions, asked in one order, by both labellers.
    assert QUESTION.findall(labelled.stdout)[:3] == QUESTION.findall(audited.stdout)[:3] == [
        "tool_choice", "arguments", "arguments"]
    asked = [m.group(0) for m in QUESTION.finditer(labelled.stdout)][:3]
    assert asked == [m.group(0) for m in QUESTION.finditer(audited.stdout)][:3]


@pytest.mark.slow
def test_the_judges_verdict_is_shown_only_after_the_person_has_answered(
    run_id: int, tmp_path: Path, callgate_exe: str, cli_env: dict
) -> None:
    blind = label(callgate_exe, cli_env, tmp_path, "pass\npass\n\nfail\nn\nwrong\nq\n",
                  str(run_id), "--set", "blind.jsonl")
    assert blind.returncode == 0, blind.stderr
    # Each attempt: its text, the two questions, then the judge's verdict, then the note.
    for n, case in enumerate(("j0", "j1")):
        start = blind.stdout.index(f"── run{run_id}-{case}-r0 ──")
        shown = blind.stdout.index(f"judge-reason-{n}")
        asked = blind.stdout.index("arguments [", start)
        assert start < blind.stdout.index("tool_choice [", start) < asked < shown
        assert shown < blind.stdout.index("note (why)", start)
    assert [(i.label.tool_choice, i.note) for i in read_journal(tmp_path / "blind.jsonl").items
            ] == [("pass", f"labelled by hand from run {run_id}; the judge said pass/pass"),
                  ("fail", "wrong")]


@pytest.mark.slow
def test_answers_that_end_keep_the_labels_given_and_say_so_on_one_line(
    run_id: int, tmp_path: Path, callgate_exe: str, cli_env: dict
) -> None:
    ended = label(callgate_exe, cli_env, tmp_path, "pass\npass\nfine\npass\n", str(run_id),
                  "--set", "cut.jsonl")
    assert ended.returncode == 2
    assert ended.stderr.count("\n") == 1 and ended.stderr.startswith("error: stdin: ")
    assert "the 1 label(s) given are kept" in ended.stderr
    assert [i.note for i in read_journal(tmp_path / "cut.jsonl").items] == ["fine"]
    with sqlite3.connect(tmp_path / "c.db") as conn:
        assert conn.execute("select count(*) from calibration_items where set_name = "
                            "'cut.jsonl'").fetchone() == (1,)
