"""`callgate history --production`: production samples (score --traces --production) per UTC
day and per release, from what the real instrumentations wrote over two days; the CLI in
process, and once end to end in a subprocess."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from production_traces import CONVERSATIONS, record_production, shifted, write_folder
from rich.console import Console
from typer.testing import CliRunner

from callgate.cli.main import app
from callgate.report.production_history import production_groups, production_table
from callgate.scoring.production import score_production
from callgate.store.db import Store


@pytest.fixture(scope="module")
def two_days(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Yesterday's export (every conversation, release r1) and today's (the clean ones and
    the policy breach, release r2), as the OpenInference instrumentation wrote them."""
    root = tmp_path_factory.mktemp("prod")
    with pytest.MonkeyPatch.context() as monkeypatch:
        yesterday = shifted(record_production("openinference", monkeypatch), -1)
        today = record_production("openinference", monkeypatch,
                                  [c for c in CONVERSATIONS if c["id"] in ("valid", "policy")])
    return (write_folder(root / "folder", tools=None), yesterday.write(root / "d1.jsonl"),
            today.write(root / "d2.jsonl"))


def _day(path: Path) -> str:
    first = json.loads(path.read_text().splitlines()[0])
    span = first["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    from datetime import UTC, datetime

    return datetime.fromtimestamp(int(span["startTimeUnixNano"]) / 1e9, UTC).date().isoformat()


def test_history_per_day_and_per_release(two_days: tuple[Path, Path, Path],
                                         tmp_path: Path) -> None:
    folder, first, second = two_days
    with Store(tmp_path / "s.db") as store:
        score_production(folder, first, store, agent="bot", release="r1")
        score_production(folder, second, store, agent="bot", release="r2")
        by_day = production_groups(store.production_counts("bot", "day"),
                                   store.production_violations("bot", "day"))
        by_release = production_groups(store.production_counts("bot", "release"),
                                       store.production_violations("bot", "release"))
    assert [g.key for g in by_day] == [_day(first), _day(second)]
    assert _day(first) < _day(second)
    one, two = (g.figures for g in by_day)
    assert (one.traces, one.provider_errors, one.schema_valid.successes,
            one.schema_valid.n, one.policy_clean.successes) == (7, 1, 4, 6, 5)
    assert (two.traces, two.provider_errors, two.schema_valid.successes,
            two.policy_clean.successes, two.policy_clean.n) == (2, 0, 2, 1, 2)
    assert two.violations == {"forbidden_values": 1} and two.calls_per_trace == 1.0
    assert [g.key for g in by_release] == ["r1", "r2"]
    assert [g.figures for g in by_release] == [one, two]  # one release a day here
    console = Console(width=80, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(production_table("bot", "day", by_day))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert _day(first) in text and "66.7" in text and "50.0" in text


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_the_cli_scores_production_then_prints_its_history(
        two_days: tuple[Path, Path, Path], tmp_path: Path) -> None:
    folder, first, second = two_days
    db = str(tmp_path / "s.db")
    for path, release in ((first, "r1"), (second, "r2")):
        done = _invoke("score", str(folder), "--traces", str(path), "--production",
                       "--agent", "bot", "--release", release, "--db", db, "--json")
        assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["stored"] == 2 and document["schema_valid"]["successes"] == 2
    assert {s["trace_id"] for s in document["samples"]} == {
        row[0] for row in sqlite3.connect(db).execute(
            "SELECT trace_id FROM production_samples WHERE release = 'r2'")}
    done = _invoke("history", "--agent", "bot", "--production", "--by", "day", "--json",
                   "--db", db)
    assert done.exit_code == 0, done.output
    groups = json.loads(done.stdout)["groups"]
    assert [(g["day"], g["traces"], g["policy_clean"]["pct"]) for g in groups] == [
        (_day(first), 7, pytest.approx(83.3333)), (_day(second), 2, 50.0)]
    done = _invoke("history", "--agent", "bot", "--production", "--by", "release", "--db", db)
    assert done.exit_code == 0 and "r1" in done.stdout and "r2" in done.stdout
    text = _invoke("score", str(folder), "--traces", str(first), "--production", "--agent",
                   "bot", "--db", db)
    assert text.exit_code == 0
    assert "trace " in text.stdout and "a tool its model call was not offered" in text.stdout
    assert "7 traces already stored" in text.stdout


@pytest.mark.parametrize(("args", "says"), [
    (["--responses", "x.jsonl", "--traces", "t.jsonl", "--agent", "b"], "--responses not taken"),
    (["--traces", "t.jsonl"], "--agent NAME"),
    ([], "give --traces FILE"),
])
def test_the_cli_refuses_what_production_does_not_take(args: list[str], says: str,
                                                       tmp_path: Path) -> None:
    done = _invoke("score", str(tmp_path), "--production", *args, "--db",
                   str(tmp_path / "s.db"))
    assert done.exit_code == 2 and says in done.output
    assert not (tmp_path / "s.db").exists()


def test_history_production_refuses_what_it_cannot_show(two_days: tuple[Path, Path, Path],
                                                        tmp_path: Path) -> None:
    folder, first, _ = two_days
    db = str(tmp_path / "s.db")
    assert _invoke("score", str(folder), "--traces", str(first), "--production", "--agent",
                   "bot", "--db", db).exit_code == 0
    for args, says in ((["--agent", "nobody"], "no production samples of agent 'nobody'"),
                       (["--agent", "bot", "--by", "tool"], "expected day or release"),
                       (["--agent", "bot", "--suite", "s"], "drop --suite s")):
        done = _invoke("history", "--production", *args, "--db", db)
        assert done.exit_code == 2 and says in done.output, done.output


def test_score_without_production_still_needs_model_and_release(tmp_path: Path) -> None:
    done = _invoke("score", str(tmp_path), "--traces", "t.jsonl", "--release", "r")
    assert done.exit_code == 2 and "give --model MODEL and --release LABEL" in done.output


@pytest.mark.slow
def test_production_end_to_end_in_a_subprocess(two_days: tuple[Path, Path, Path],
                                               tmp_path: Path, callgate_exe: str,
                                               cli_env: dict[str, str]) -> None:
    folder, first, _ = two_days
    bad = tmp_path / "bad.jsonl"
    lines = first.read_text().splitlines()
    bad.write_text("\n".join([*lines[:2], lines[2].replace(
        '"openinference.span.kind", "value": {"stringValue": "LLM"}',
        '"openinference.span.kind", "value": {"stringValue": "WEIRD"}'), *lines[3:]]) + "\n")
    run = [callgate_exe, "score", str(folder), "--production", "--agent", "bot", "--db",
           "s.db", "--traces"]
    done = subprocess.run([*run, str(bad)], cwd=tmp_path, env=cli_env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert f"{bad}:3: span " in line and "openinference.span.kind 'WEIRD'" in line
    done = subprocess.run([*run, str(first)], cwd=tmp_path, env=cli_env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([callgate_exe, "history", "--agent", "bot", "--production", "--db",
                           "s.db", "--json"], cwd=tmp_path, env=cli_env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (group,) = json.loads(done.stdout)["groups"]
    assert (group["traces"], group["provider_errors"], group["unknown_tool_calls"]["successes"]
            ) == (7, 1, 1)
