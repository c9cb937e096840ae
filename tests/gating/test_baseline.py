"""Which release is a baseline: only one that passed its gate (or was the model's first), and
never a run that is mostly excluded attempts. End to end through the installed CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import lookup_case, write_suite
from live_runs import config
from loopback import Loopback, error, ok, tool_call

from callgate.cli.demo import example_path
from callgate.gating.scores_file import read_release_file

CALLGATE = str(Path(sys.executable).with_name("callgate"))
EXAMPLE = example_path()
RIGHT = tool_call("lookup_order", {"order_id": "ord_1"})
WRONG = tool_call("lookup_order", {"order_id": "ord_2"})


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    env = {**(env or os.environ), "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("CALLGATE_DB", None)
    return subprocess.run([CALLGATE, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


def score(cwd: Path, responses: str, release: str) -> None:
    done = cli(cwd, "score", str(EXAMPLE), "-r", str(EXAMPLE / f"responses-{responses}.jsonl"),
               "-m", "agent", "--release", release)
    assert done.returncode == 0, done.stderr


def gate(cwd: Path, release: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(cwd, "gate", "-m", "agent", "--release", release, "--json", *args)


def stored_gate(db: Path, release: str) -> dict | None:
    with sqlite3.connect(db) as conn:
        (raw,) = conn.execute("SELECT gate FROM runs WHERE release = ?", [release]).fetchone()
    return None if raw is None else json.loads(raw)


# --------------------------------------------------------------------------- point 6


@pytest.mark.slow
def test_a_failed_release_never_becomes_the_baseline(tmp_path: Path) -> None:
    """A passes; B (worse) fails; C, with B's very answers, must fail against A, not pass
    against B: from a folder of scores files and from the store alike."""
    releases = tmp_path / "releases"
    releases.mkdir()
    score(tmp_path, "2026.10", "A")
    first = gate(tmp_path, "A", "--baseline", str(releases), "--scores-out",
                 str(releases / "A.json"))
    assert first.returncode == 0, first.stdout + first.stderr
    score(tmp_path, "2026.11", "B")
    failed = gate(tmp_path, "B", "--baseline", str(releases), "--scores-out",
                  str(releases / "B.json"))
    assert failed.returncode == 1, failed.stdout + failed.stderr

    score(tmp_path, "2026.11", "C")  # the same answers as B
    for baseline in (str(releases), "auto"):
        again = gate(tmp_path, "C", "--baseline", baseline)
        assert again.returncode == 1, (baseline, again.stdout, again.stderr)
        decision = json.loads(again.stdout)
        assert decision["outcome"] == "regression" and decision["baseline_release"] == "A"
        assert any("B" in w and "not released" in w for w in decision["warnings"])

    # B's scores are kept for the record, marked as not released.
    kept = read_release_file(releases / "B.json")
    assert kept.gate is not None and kept.gate.outcome == "regression"
    assert not kept.gate.released and kept.gate.baseline_release == "A"
    assert read_release_file(releases / "A.json").gate.released
    assert stored_gate(tmp_path / "callgate.db", "B")["outcome"] == "regression"
    assert stored_gate(tmp_path / "callgate.db", "A")["released"] is True

    # Named explicitly, a release that failed its gate is refused as a baseline.
    named = gate(tmp_path, "C", "--baseline", str(releases / "B.json"))
    assert named.returncode == 2
    assert "B.json" in named.stderr and "regression" in named.stderr


@pytest.mark.slow
def test_the_newest_gate_decision_of_a_release_counts(tmp_path: Path) -> None:
    """The newest decision of a release counts: gated again and passing, it is a baseline."""
    score(tmp_path, "2026.10", "A")
    assert gate(tmp_path, "A").returncode == 0
    score(tmp_path, "2026.11", "B")
    assert gate(tmp_path, "B").returncode == 1
    score(tmp_path, "2026.11", "C")
    assert json.loads(gate(tmp_path, "C").stdout)["baseline_release"] == "A"
    # Re-scoring B does not wash its refusal away: only gating it again does.
    score(tmp_path, "2026.11", "B")
    assert stored_gate(tmp_path / "callgate.db", "B")["outcome"] == "regression"
    assert json.loads(gate(tmp_path, "C").stdout)["baseline_release"] == "A"
    # Someone accepts B on purpose (a larger allowed drop): B was released after all.
    assert gate(tmp_path, "B", "--max-drop", "50").returncode == 0
    accepted = gate(tmp_path, "C")
    assert accepted.returncode == 0, accepted.stdout
    assert json.loads(accepted.stdout)["baseline_release"] == "B"


# --------------------------------------------------------------------------- point 7


@pytest.mark.slow
def test_an_all_error_run_exits_3_and_is_never_a_baseline(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    suite = write_suite(tmp_path / "suite", [lookup_case(f"c{i}") for i in range(6)])
    cfg = config(tmp_path, loopback)

    def run(release: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [callgate_exe, "run", str(suite), "-m", "router", "-k", "2", "--config", str(cfg),
             "--db", "c.db", "--release", release, "--no-cache", "--max-retries", "0", *extra],
            env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=60)

    def gate_run(release: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [callgate_exe, "gate", "-m", "router", "--release", release, "--db", "c.db",
             "--json"], env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=60)

    loopback.script("[", ok(calls=[RIGHT]))
    assert run("r1").returncode == 0
    assert gate_run("r1").returncode == 0

    loopback.script("[", error(500, "upstream is down"))
    broken = run("r2")
    assert broken.returncode == 3, broken.stdout + broken.stderr
    assert "12 of 12 attempts (100.0%) were excluded" in broken.stderr
    assert "not a result" in broken.stderr
    assert stored_gate(tmp_path / "c.db", "r2")["outcome"] == "inconclusive"

    loopback.script("[", ok(calls=[WRONG]))
    worse = run("r3")
    assert worse.returncode == 0, worse.stderr
    decided = gate_run("r3")
    assert decided.returncode == 1, decided.stdout + decided.stderr
    decision = json.loads(decided.stdout)
    assert decision["baseline_release"] == "r1"
    assert any("r2" in w and "excluded" in w for w in decision["warnings"]), decision["warnings"]

    # Allowing more exclusions is the user's explicit choice: the run exits 0 and is not
    # marked, yet the gate's own --max-excluded still keeps it from being a baseline.
    loopback.script("[", error(500, "upstream is down"))
    allowed = run("r2", "--max-excluded", "1")
    assert allowed.returncode == 0, allowed.stderr
    assert stored_gate(tmp_path / "c.db", "r2") is None
    decision = json.loads(gate_run("r3").stdout)
    assert decision["outcome"] == "regression" and decision["baseline_release"] == "r1"


@pytest.mark.slow
def test_score_of_mostly_truncated_responses_exits_3(tmp_path: Path) -> None:
    lines = [json.loads(x) for x in
             (EXAMPLE / "responses-2026.10.jsonl").read_text().splitlines() if x.strip()]
    for entry in lines[: len(lines) // 2]:
        if "choices" in entry["response"]:
            entry["response"]["choices"][0]["finish_reason"] = "length"
        else:
            entry["finish_reason"] = "length"
    (tmp_path / "cut.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    done = cli(tmp_path, "score", str(EXAMPLE), "-r", "cut.jsonl", "-m", "agent",
               "--release", "cut")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "were excluded" in done.stderr and "--max-excluded" in done.stderr
    assert stored_gate(tmp_path / "callgate.db", "cut")["outcome"] == "inconclusive"


# --------------------------------------------------------------------------- the rule itself


def test_which_kept_files_are_baselines(tmp_path: Path) -> None:
    """Files kept by an older callgate have no decision: a baseline unless their own figures
    say they are not a result. A newer not-released file is passed over, with a note."""
    from releases import release, uniform

    from callgate.gating.finding import baseline_from_path
    from callgate.scoring.result import GateRecord

    old = release("r1", uniform(20, 20, 20))
    broken = release("r2", uniform(2, 2, 2), excluded=18)  # 90% truncated, never gated
    failed = release("r3", uniform(20, 10, 10)).model_copy(update={"gate": GateRecord(
        outcome="regression", released=False, baseline_release="r1", max_drop=2.0,
        max_excluded=0.05, messages=["right tool fell 50.0 points"])})
    for r in (old, broken, failed):
        (tmp_path / f"{r.release}.json").write_text(r.to_json())
    current = release("r4", uniform(20, 10, 10))
    base, notes, _ = baseline_from_path(tmp_path, current)
    assert base == old
    assert [n.split(":")[0] for n in notes] == ["release r3 (r3.json) is not a baseline",
                                               "release r2 (r2.json) is not a baseline"]
    assert "right tool fell 50.0 points" in notes[0] and "90.0%" in notes[1]
    assert broken.why_not_a_baseline(max_excluded=0.95) is None  # the gate's limit decides


def test_a_store_made_before_the_gate_column_gets_it(tmp_path: Path) -> None:
    from callgate.store.db import Store
    from callgate.store.schema import SCHEMA

    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:  # every table as callgate made them before runs.gate
        conn.executescript(SCHEMA)
        conn.execute("INSERT INTO runs (suite_name, suite, model, release, source, created_at, "
                     "callgate_version, status) VALUES ('s', 'f', 'm', 'r1', 'recorded', "
                     "'2026-01-01', '0.1.0', 'done')")
    with Store(db) as store:
        (row,) = store.runs("m")
        assert row["gate"] is None
        store.set_run_gate(row["id"], '{"outcome": "pass"}')
    with Store(db) as store:  # opening again adds nothing twice
        assert store.run(row["id"])["gate"] == '{"outcome": "pass"}'


def test_judge_errors_count_toward_the_excluded_share() -> None:
    from callgate.scoring.exclusion import excluded_share, too_many_excluded

    excluded = {"judge_error": 3, "pending_judge": 40}
    assert excluded_share(50, excluded) == 3 / 50  # cases never judged are not a fault
    assert "3 judge error" in (too_many_excluded(50, excluded, 0.05) or "")
