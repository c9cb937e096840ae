"""A release belongs to an agent; a model change is gated, never waved through (issue 21,
point 1). End to end through the installed CLI on a real SQLite file, live runs against the
loopback server."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import KEY_ENV, lookup_case, write_suite
from factories import calls, case, line, message, tool_call, write_lines
from factories import write_suite as write_cases
from loopback import Loopback, ok
from loopback import tool_call as wire_call
from paths import FIXTURES
from stores import legacy_store

from callgate.cli.demo import example_path
from callgate.gating.scores_file import read_release_file

pytestmark = pytest.mark.slow

CALLGATE = str(Path(sys.executable).with_name("callgate"))
EXAMPLE = example_path()
OLD = "openrouter/openai/gpt-4.1-mini"
NEW = "openrouter/anthropic/claude-haiku-4.5"
# A scores file written by callgate c15e4bf (before agents): the example's 2026.10 answers
# scored as OLD and gated as its first release.
BEFORE_AGENTS = FIXTURES / "release_2026.10_c15e4bf.json"


def cli(cwd: Path, *args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALLGATE_")}
    env.update({"COLUMNS": str(columns), "NO_COLOR": "1"})
    return subprocess.run([CALLGATE, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


def score(cwd: Path, answers: str, release: str, model: str, *extra: str) -> None:
    """The example's recorded answers of month `answers` (2026.10 good, 2026.11 worse)."""
    done = cli(cwd, "score", str(EXAMPLE), "-r", str(EXAMPLE / f"responses-{answers}.jsonl"),
               "-m", model, "--release", release, *extra)
    assert done.returncode == 0, done.stderr


def gate(cwd: Path, release: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(cwd, "gate", "--release", release, "--json", *args)


def decision_of(result: subprocess.CompletedProcess[str], code: int) -> dict:
    assert result.returncode == code, result.stdout + result.stderr
    return json.loads(result.stdout)


def stored_gate(db: Path, release: str) -> dict:
    with sqlite3.connect(db) as conn:
        (raw,) = conn.execute("SELECT gate FROM runs WHERE release = ?", [release]).fetchone()
    return json.loads(raw)


def test_a_model_switch_without_a_name_is_inconclusive_naming_the_other_agent(
        tmp_path: Path) -> None:
    releases = tmp_path / "releases"
    releases.mkdir()
    score(tmp_path, "2026.10", "r1", OLD)
    decision_of(gate(tmp_path, "r1", "-m", OLD, "--baseline", str(releases), "--scores-out",
                     str(releases / "r1.json")), 0)
    score(tmp_path, "2026.10", "r2", NEW)  # the same answers, from another model id
    for baseline in ("auto", str(releases)):
        decision = decision_of(gate(tmp_path, "r2", "-m", NEW, "--baseline", baseline), 3)
        assert decision["outcome"] == "inconclusive", baseline
        assert (decision["agent"], decision["model"]) == (NEW, NEW)
        said = " ".join(decision["messages"])
        assert f"agent {OLD} has" in said and "its last is r1" in said, said
        assert f"--baseline-agent {OLD}" in said and "--new-agent" in said
    assert not stored_gate(tmp_path / "callgate.db", "r2")["released"]
    # The text output says it too, and the exit code is the same.
    plain = cli(tmp_path, "gate", "-m", NEW, "--release", "r2")
    assert plain.returncode == 3 and f"--baseline-agent {OLD}" in plain.stdout


def test_baseline_agent_compares_with_the_other_agent_and_fails_a_real_drop(
        tmp_path: Path) -> None:
    releases = tmp_path / "releases"
    releases.mkdir()
    score(tmp_path, "2026.10", "r1", OLD)
    decision_of(gate(tmp_path, "r1", "-m", OLD, "--scores-out", str(releases / "r1.json")), 0)
    score(tmp_path, "2026.11", "r2", NEW)  # the new model answers worse
    # From the store, a folder of scores files, or the old model's file named on its own
    # (refused before agents): the same comparison, the model change named.
    for args in (("--baseline-agent", OLD), ("--baseline-agent", OLD, "--baseline",
                 str(releases)), ("--baseline", str(releases / "r1.json"))):
        decision = decision_of(gate(tmp_path, "r2", "-m", NEW, *args), 1)
        assert decision["outcome"] == "regression", args
        assert decision["baseline_release"] == "r1" and decision["baseline_agent"] == OLD
        assert (decision["baseline_model"], decision["model"]) == (OLD, NEW)
        assert f"model changed: {OLD} → {NEW}" in decision["messages"], decision["messages"]
        assert any("REGRESSION" in m for m in decision["messages"])
    recorded = stored_gate(tmp_path / "callgate.db", "r2")
    assert recorded["baseline_agent"] == OLD and not recorded["released"]
    # An agent with no released release on the suite is an input error, not a first release.
    unknown = cli(tmp_path, "gate", "-m", NEW, "--release", "r2", "--baseline-agent", "nobody")
    assert unknown.returncode == 2 and "no released release of agent 'nobody'" in unknown.stderr


def test_new_agent_starts_a_line_on_purpose_and_is_recorded(tmp_path: Path) -> None:
    releases = tmp_path / "releases"
    releases.mkdir()
    score(tmp_path, "2026.10", "r1", OLD)
    decision_of(gate(tmp_path, "r1", "-m", OLD), 0)
    score(tmp_path, "2026.11", "r2", NEW)
    started = decision_of(gate(tmp_path, "r2", "-m", NEW, "--new-agent", "--scores-out",
                               str(releases / "r2.json")), 0)
    assert started["outcome"] == "first_release" and started["new_agent"] is True
    assert any("starts a new line on purpose" in m and OLD in m for m in started["messages"])
    assert stored_gate(tmp_path / "callgate.db", "r2")["new_agent"] is True
    kept = read_release_file(releases / "r2.json")
    assert kept.gate is not None and kept.gate.new_agent and kept.gate.released
    assert (kept.agent, kept.model) == (NEW, NEW)
    # Gated again, the recorded choice counts; the new line goes on from its first release.
    assert decision_of(gate(tmp_path, "r2", "-m", NEW), 0)["new_agent"] is True
    score(tmp_path, "2026.11", "r3", NEW)
    followed = decision_of(gate(tmp_path, "r3", "-m", NEW), 0)
    assert (followed["baseline_release"], followed["baseline_agent"]) == ("r2", NEW)
    twice = cli(tmp_path, "gate", "-m", NEW, "--release", "r3", "--new-agent")
    assert twice.returncode == 2 and "already has a baseline" in twice.stderr
    both = cli(tmp_path, "gate", "-m", NEW, "--release", "r3", "--new-agent",
               "--baseline-agent", OLD)
    assert both.returncode == 2 and "give one of them" in both.stderr


def test_a_named_agent_whose_model_changed_is_compared_and_the_change_named(
        tmp_path: Path) -> None:
    score(tmp_path, "2026.10", "r1", OLD, "--agent", "support")
    decision_of(gate(tmp_path, "r1", "--agent", "support"), 0)
    score(tmp_path, "2026.11", "r2", NEW, "--agent", "support")
    decision = decision_of(gate(tmp_path, "r2", "--agent", "support"), 1)
    assert (decision["agent"], decision["model"], decision["baseline_model"]) == (
        "support", NEW, OLD)
    assert decision["messages"][0] == f"model changed: {OLD} → {NEW}"
    # --model finds the release by the model id it ran with, as before agents.
    assert decision_of(gate(tmp_path, "r2", "-m", NEW), 1)["agent"] == "support"

    document = json.loads(cli(tmp_path, "history", "--agent", "support", "--json").stdout)
    assert [(r["release"], r["agent"], r["model"]) for r in document["releases"]] == [
        ("r1", "support", OLD), ("r2", "support", NEW)]
    table = cli(tmp_path, "history", "--agent", "support", "--suite", "order-support",
                columns=80).stdout
    folded = "".join(table.split())  # the model is the line(s) under its release
    assert f"first_release{OLD}r2" in folded and folded.endswith(f"regression{NEW}"), table
    lines = table.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in table
    assert any(line.split()[-1:] == ["first_release"] for line in lines), table
    assert any(line.split()[-1:] == ["regression"] for line in lines), table


def test_a_named_candidate_whose_model_changed_is_compared_and_the_change_named(
        loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    suite = write_suite(tmp_path / "suite", [lookup_case(f"c{i}") for i in range(8)])

    def candidate(model: str) -> None:
        (tmp_path / "callgate.toml").write_text(
            f'[[candidates]]\nname = "support"\nmodel = "{model}"\n'
            f'api_base = "{loopback.base_url}"\napi_key_env = "{KEY_ENV}"\n'
            "extra = { temperature = 0 }\n")

    def callgate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([callgate_exe, *args, "--db", "c.db"], env=cli_env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)

    candidate("openai/model-a")
    loopback.script("[", ok(calls=[wire_call("lookup_order", {"order_id": "ord_1"})]))
    assert callgate("run", str(suite), "-m", "support", "-k", "1", "--release", "r1"
                    ).returncode == 0
    assert callgate("gate", "-m", "support", "--release", "r1").returncode == 0
    candidate("openai/model-b")
    loopback.script("[", ok(calls=[wire_call("lookup_order", {"order_id": "ord_2"})]))
    ran = callgate("run", str(suite), "-m", "support", "-k", "1", "--release", "r2", "--json")
    assert ran.returncode == 0, ran.stderr
    assert (json.loads(ran.stdout)["agent"], json.loads(ran.stdout)["model"]) == (
        "support", "openai/model-b")
    decision = decision_of(callgate("gate", "-m", "support", "--release", "r2", "--json"), 1)
    assert decision["messages"][0] == "model changed: openai/model-a → openai/model-b"
    with sqlite3.connect(tmp_path / "c.db") as conn:
        rows = conn.execute("SELECT agent, model, model_params FROM runs ORDER BY id").fetchall()
    assert [(a, m) for a, m, _ in rows] == [("support", "openai/model-a"),
                                           ("support", "openai/model-b")]
    params = json.loads(rows[1][2])
    assert params["extra"] == {"temperature": 0} and params["reasoning_effort"] == "low"
    assert "api_key_env" not in params


def test_a_store_made_before_agents_migrates_with_agent_the_model_name(tmp_path: Path) -> None:
    db = legacy_store(tmp_path / "old.db")  # made by 673342a: release r1 of model 'agent'
    suite = write_cases(tmp_path / "suite", [
        case("ord", calls(("lookup_order", {"order_id": "ord_7281"}))),
        case("shipped", {"type": "no_call"}, "What does status shipped mean?"),
    ], name="orders")
    answers = write_lines(tmp_path / "r.jsonl", [
        line("ord", message(tool_call("lookup_order", {"order_id": "ord_7281"}))),
        line("shipped", {"role": "assistant", "content": "It left."}, finish_reason="stop"),
    ])
    done = cli(tmp_path, "score", str(suite), "-r", str(answers), "-m", "agent", "--release",
               "r2", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "m008_runs_agent_columns" in done.stderr  # the notice names the migration
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT release, agent, model FROM runs ORDER BY id").fetchall()
    assert rows == [("r1", "agent", "agent"), ("r2", "agent", "agent")]
    decision = decision_of(gate(tmp_path, "r2", "-m", "agent", "--db", str(db)), 0)
    assert decision["baseline_release"] == "r1" and decision["baseline_agent"] == "agent"


def test_a_scores_file_written_before_agents_reads_with_agent_the_model(tmp_path: Path) -> None:
    old = read_release_file(BEFORE_AGENTS)
    assert "agent" not in json.loads(BEFORE_AGENTS.read_text())
    assert (old.agent, old.model, old.release) == (OLD, OLD, "2026.10")
    assert old.gate is not None and old.gate.released and not old.gate.new_agent
    folder = tmp_path / "releases"
    folder.mkdir()
    shutil.copy(BEFORE_AGENTS, folder / "2026.10.json")
    score(tmp_path, "2026.11", "2026.11", NEW)
    # In a folder it is another agent's release: named, not waved through; named, compared.
    waved = decision_of(gate(tmp_path, "2026.11", "-m", NEW, "--baseline", str(folder)), 3)
    assert any(f"--baseline-agent {OLD}" in m for m in waved["messages"])
    compared = decision_of(gate(tmp_path, "2026.11", "-m", NEW, "--baseline", str(folder),
                                "--baseline-agent", OLD), 1)
    assert compared["baseline_release"] == "2026.10"
    assert f"model changed: {OLD} → {NEW}" in compared["messages"]


def test_serve_shows_the_agent_beside_the_model(tmp_path: Path) -> None:
    from urllib.parse import urlencode

    from webserver import Server

    score(tmp_path, "2026.10", "r1", OLD, "--agent", "support")
    score(tmp_path, "2026.11", "r2", NEW, "--agent", "support")
    server = Server(tmp_path / "callgate.db")
    try:
        listed = server.json("/api/releases")["models"]
        assert [(m["agent"], set(m["models"].split(","))) for m in listed] == [
            ("support", {OLD, NEW})]
        history = server.json("/api/releases?" + urlencode({"model": "support"}))
        releases = history["suites"]["order-support"]
        assert [(r["release"], r["agent"], r["model"]) for r in releases] == [
            ("r1", "support", OLD), ("r2", "support", NEW)]
        assert f"model changed: {OLD} → {NEW}" in releases[1]["messages"]
        status, page = server.get(f"/runs/{releases[1]['run_id']}")
        assert status == 200 and "support r2" in page and f"model {NEW}" in page
        status, index = server.get("/")
        assert status == 200 and "support" in index and NEW in index
    finally:
        server.stop()


def test_history_by_a_model_id_shows_the_agent_it_ran_under(tmp_path: Path) -> None:
    score(tmp_path, "2026.10", "r1", OLD, "--agent", "support-bot")
    score(tmp_path, "2026.11", "r2", NEW, "--agent", "support-bot")
    by_agent = cli(tmp_path, "history", "--agent", "support-bot", "--json")
    assert by_agent.returncode == 0, by_agent.stderr
    for model in (OLD, NEW):  # either model id finds the agent's whole line
        by_model = cli(tmp_path, "history", "-m", model, "--json")
        assert by_model.returncode == 0, by_model.stderr
        assert json.loads(by_model.stdout) == json.loads(by_agent.stdout)
    score(tmp_path, "2026.10", "r3", OLD, "--agent", "other-bot")
    both = cli(tmp_path, "history", "-m", OLD)
    assert both.returncode == 2 and "several agents (other-bot, support-bot)" in both.stderr
