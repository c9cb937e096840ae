"""Failures no command catches never exit 1, which CI reads as a regression."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from factories import calls, case, write_suite

CALLGATE = str(Path(sys.executable).with_name("callgate"))


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("CALLGATE_DB", None)
    return subprocess.run([CALLGATE, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=60)


def test_unknown_command_and_missing_argument_are_usage_errors(tmp_path: Path) -> None:
    assert cli(tmp_path, "nosuch").returncode == 2
    assert cli(tmp_path, "score").returncode == 2


def test_a_file_that_is_not_utf8_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "base.json").write_bytes(b"\xff\xfe\x00not json")
    root = write_suite(tmp_path / "s", [case("a", calls(("lookup_order", {})))])
    (root / "cases.jsonl").write_bytes(b"\xff\xfe\x00")
    result = cli(tmp_path, "suite", "check", str(root))
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_a_directory_where_a_file_is_expected(tmp_path: Path) -> None:
    result = cli(tmp_path, "judge", "show", str(tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr


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
