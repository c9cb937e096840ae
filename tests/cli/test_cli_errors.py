"""Failures no command catches never exit 1, which CI reads as a regression."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from factories import calls, case, write_suite

CALLGATE = str(Path(sys.executable).with_name("callgate"))


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("CALLGATE_DB", None)
    return subprocess.run([CALLGATE, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=60)


@pytest.mark.slow
def test_unknown_command_and_missing_argument_are_usage_errors(tmp_path: Path) -> None:
    assert cli(tmp_path, "nosuch").returncode == 2
    assert cli(tmp_path, "score").returncode == 2


@pytest.mark.slow
def test_a_file_that_is_not_utf8_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "base.json").write_bytes(b"\xff\xfe\x00not json")
    root = write_suite(tmp_path / "s", [case("a", calls(("lookup_order", {})))])
    (root / "cases.jsonl").write_bytes(b"\xff\xfe\x00")
    result = cli(tmp_path, "suite", "check", str(root))
    assert result.returncode == 2 and "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_directory_where_a_file_is_expected(tmp_path: Path) -> None:
    result = cli(tmp_path, "judge", "show", str(tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr


@pytest.mark.slow
def test_model_output_that_looks_like_markup_is_printed_as_text(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "s", [case("[/x]", calls(("lookup_order",
                                                           {"order_id": "ord_1"})))])
    line = {"case_id": "[/x]", "finish_reason": "tool_calls", "response": {
        "role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
            "name": "lookup_order", "arguments": json.dumps({"order_id": "ord_[/red]"})}}]}}
    (tmp_path / "r.jsonl").write_text(json.dumps(line) + "\n")
    result = cli(tmp_path, "score", str(root), "-r", "r.jsonl", "-m", "m", "--release", "r1")
    assert result.returncode == 0, result.stderr
    assert "ord_[/red]" in result.stdout and "[/x]" in result.stdout


BAD_COMMAND_LINES = [  # (arguments, how the one stderr line starts)
    ("gate -m m --release r --max-drop -1", "error: --max-drop -1: "),  # below min=
    ("gate -m m --release r --max-excluded 2", "error: --max-excluded 2: "),  # above max=
    ("serve --port 99999", "error: --port 99999: "),
    ("judge calibrate tool_choice --set absent.jsonl --concurrency 5000",
     "error: --concurrency 5000: "),
    ("judge calibrate tool_choice --set absent.jsonl --concurrency 0", "error: --concurrency 0: "),
    ("gate --release r", "error: name the agent: --agent NAME (or --model"),
    ("judge calibrate tool_choice", "error: missing option '--set'"),
    ("score suite -r r.jsonl -m m --release r --bogus", "error: no such option: --bogus"),
    ("judge plan tool_choice --set tool_choice --rule bogus", "error: --rule "),  # a choice
    ("judge label 1 --set new.jsonl --split bogus", "error: --split "),
    ("run suite -m m -k many", "error: --repeats many: "),  # not a number
    ("gate -m m --release r --max-drop lots", "error: --max-drop lots: "),
    ("judge audit first", "error: RUN first: "),  # an argument that is not a number
    ("gate -m m --release r --max-drop", "error: option '--max-drop' requires an argument"),
    ("suite check", "error: missing argument 'path'"),
    ("score -r r.jsonl -m m --release r", "error: missing argument 'SUITE'"),
    ("gate -m m --release r stray", "error: got unexpected extra argument(s) (stray)"),
    ("frobnicate", "error: no such command 'frobnicate'"),
    ("judge calibrat tool_choice", "error: no such command 'calibrat'. Did you mean 'calibrate'?"),
    # Run ids and seeds past what SQLite stores (they ended in an OverflowError, exit 4).
    ("judge audit 99999999999999999999", "error: RUN 99999999999999999999: "),
    ("judge plan tool_choice --run 99999999999999999999", "error: --run 99999999999999999999: "),
    ("judge label --audit 99999999999999999999", "error: --audit 99999999999999999999: "),
    ("judge audit 1 --seed 99999999999999999999", "error: --seed 99999999999999999999: "),
]


@pytest.mark.slow
@pytest.mark.parametrize(("args", "starts"), BAD_COMMAND_LINES,
                         ids=[args for args, _ in BAD_COMMAND_LINES])
def test_a_bad_command_line_is_one_line_naming_what_is_wrong(
    args: str, starts: str, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    """No "Usage:"/"Try ... --help" lines and no box: one line in callgate's own style, exit 2,
    nothing on stdout and nothing written."""
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([callgate_exe, *args.split()], cwd=work, env=cli_env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), lines
    assert not lines[0].endswith("."), lines
    assert list(work.iterdir()) == []


@pytest.mark.slow
def test_help_and_a_bare_group_are_shown_as_before(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    bare = subprocess.run([callgate_exe, "judge"], cwd=tmp_path, env=cli_env,
                          capture_output=True, text=True, timeout=60)
    assert bare.returncode == 2 and "calibrate" in bare.stdout and "error" not in bare.stderr
    shown = subprocess.run([callgate_exe, "judge", "calibrate", "--help"], cwd=tmp_path,
                           env=cli_env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "Usage:" in shown.stdout and shown.stderr == ""
    assert "1 to 4096" in shown.stdout  # the bound of --concurrency is named in its help


@pytest.mark.slow
def test_the_judge_concurrency_bound_itself_is_allowed(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    """4096 passes the option check: the refusal is then the missing set file, no longer
    --concurrency."""
    done = subprocess.run([callgate_exe, "judge", "calibrate", "tool_choice", "--set",
                           "absent.jsonl", "--concurrency", "4096"], cwd=tmp_path, env=cli_env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "absent.jsonl" in done.stderr
    assert "--concurrency" not in done.stderr


@pytest.mark.slow
def test_judge_calibrate_without_its_key_fails_before_drawing_a_bar(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CALLGATE_DB", "OPENAI_API_KEY")}
    done = subprocess.run([CALLGATE, "judge", "calibrate", "tool_choice", "--set", "tool_choice",
                           "--db", "c.db"], cwd=tmp_path, capture_output=True, text=True,
                          env={**env, "COLUMNS": "100"}, timeout=60)
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.splitlines() == [
        "error: command line: environment variable OPENAI_API_KEY is not set; it should hold the "
        "API key for openai/gpt-4.1-2025-04-14 (set api_key_env to name another variable)"]
