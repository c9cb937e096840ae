"""`callgate score --traces` and `callgate import traces` in subprocesses, on what the real
OpenInference and GenAI instrumentations wrote (test_traces.record)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import write_suite
from test_traces import CASES, TOOLS, _model_span, record

pytestmark = pytest.mark.slow


def _run(exe: str, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("instrumentation", ["genai", "openinference"])
def test_import_traces_then_score_equals_score_traces(
        instrumentation: str, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    suite = write_suite(tmp_path / "suite", CASES, TOOLS)
    traces = record(instrumentation, monkeypatch).write(tmp_path / "traces.jsonl")
    imported = _run(callgate_exe, cli_env, tmp_path, "import", "traces", str(traces),
                    "--suite", str(suite), "--out", "answers.jsonl")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "converted 6 traces (6 cases) into answers.jsonl"
    lines = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert all(len(line["trace_id"]) == 32 for line in lines)
    documents = []
    for how in (["-r", "answers.jsonl"], ["--traces", str(traces)]):
        done = _run(callgate_exe, cli_env, tmp_path, "score", str(suite), *how, "-m", "m",
                    "--release", how[0], "--json", "--db", "s.db")
        assert done.returncode == 0, done.stderr
        documents.append(json.loads(done.stdout)["scores"])
    assert documents[0] == documents[1]
    assert documents[0]["figures"]["right_arguments"]["successes"] == 5


def test_an_unknown_span_is_exit_2_one_line_and_nothing_written(
        tmp_path: Path, callgate_exe: str, cli_env: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    suite = write_suite(tmp_path / "suite", CASES, TOOLS)
    traced = record("openinference", monkeypatch, CASES[1:2])
    span = _model_span(traced)
    for attribute in span["attributes"]:
        if attribute["key"] == "openinference.span.kind":
            attribute["value"] = {"stringValue": "WEIRD"}
    traces = traced.write(tmp_path / "traces.jsonl")
    for args in (["import", "traces", str(traces), "--out", "answers.jsonl"],
                 ["score", str(suite), "--traces", str(traces), "-m", "m", "--release", "r",
                  "--db", "s.db"]):
        done = _run(callgate_exe, cli_env, tmp_path, *args)
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert f"{traces}:1: span {span['spanId']}: openinference.span.kind 'WEIRD'" in line
    assert not (tmp_path / "answers.jsonl").exists()
    if (tmp_path / "s.db").exists():
        with sqlite3.connect(tmp_path / "s.db") as db:
            assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_score_takes_responses_or_traces_not_both(tmp_path: Path, callgate_exe: str,
                                                  cli_env: dict[str, str]) -> None:
    suite = write_suite(tmp_path / "suite", CASES, TOOLS)
    (tmp_path / "a.jsonl").write_text("")
    for how in ([], ["-r", "a.jsonl", "--traces", "a.jsonl"]):
        done = _run(callgate_exe, cli_env, tmp_path, "score", str(suite), *how, "-m", "m",
                    "--release", "r")
        assert done.returncode == 2
        assert "give --responses FILE or --traces FILE" in done.stderr
