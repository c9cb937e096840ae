"""The decision `serve` and `report --html` show is the one `callgate gate` takes: the same
baseline (a scores file or folder with --baseline), missing shards inconclusive."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from paths import EXAMPLES

SUPPORT = EXAMPLES / "order_support"
GOOD, BAD = SUPPORT / "responses-2026.10.jsonl", SUPPORT / "responses-2026.11.jsonl"


def cg(exe: str, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def gate_card(html: str) -> str:
    """The text of the report's gate card (outcome, exit code, baseline)."""
    found = re.search(r'<div class="label">gate</div>(.*?)</div>', html, re.S)
    assert found, html[:500]
    return re.sub(r"<[^>]+>", " ", found.group(1))


@pytest.mark.slow
def test_report_takes_the_gate_baseline_from_a_scores_folder(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    (tmp_path / "releases").mkdir()
    base = tmp_path / "base.db"
    assert cg(callgate_exe, cli_env, tmp_path, "score", str(SUPPORT), "-r", str(GOOD), "-m",
              "a", "--release", "r1", "--db", str(base)).returncode == 0
    assert cg(callgate_exe, cli_env, tmp_path, "gate", "-m", "a", "--release", "r1", "--db",
              str(base), "--scores-out", "releases/r1.json").returncode == 0
    ci = tmp_path / "ci.db"  # a fresh runner: only the kept scores file knows r1
    assert cg(callgate_exe, cli_env, tmp_path, "score", str(SUPPORT), "-r", str(BAD), "-m",
              "a", "--release", "r2", "--db", str(ci)).returncode == 0
    gate = cg(callgate_exe, cli_env, tmp_path, "gate", "-m", "a", "--release", "r2", "--db",
              str(ci), "--baseline", "releases/", "--json")
    assert gate.returncode == 1
    made = cg(callgate_exe, cli_env, tmp_path, "report", "--html", "r.html", "-m", "a",
              "--db", str(ci), "--baseline", "releases/")
    assert made.returncode == 0, made.stderr
    card = gate_card((tmp_path / "r.html").read_text())
    assert "regression" in card and "exit 1" in card and "r1" in card, card
    assert json.loads(gate.stdout)["baseline_release"] == "r1"


@pytest.mark.slow
def test_a_release_missing_shards_is_shown_inconclusive(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    db = tmp_path / "s.db"
    assert cg(callgate_exe, cli_env, tmp_path, "score", str(SUPPORT), "-r", str(GOOD), "-m",
              "a", "--release", "r1", "--db", str(db)).returncode == 0
    assert cg(callgate_exe, cli_env, tmp_path, "score", str(SUPPORT), "-r", str(GOOD), "-m",
              "a", "--release", "r2", "--shard", "2/2", "--db", str(db)).returncode == 0
    gate = cg(callgate_exe, cli_env, tmp_path, "gate", "-m", "a", "--release", "r2", "--db",
              str(db))
    assert gate.returncode == 3
    from callgate.gating.finding import find_current
    from callgate.gating.release import decide_release
    from callgate.store.db import Store

    with Store(db) as store:
        decision, _ = decide_release(store, find_current(store, "a", "r2", None))
    assert decision.outcome == "inconclusive" and decision.exit_code == 3
    assert "1/2" in decision.messages[0]
    made = cg(callgate_exe, cli_env, tmp_path, "report", "--html", "r.html", "-m", "a",
              "--release", "r2", "--db", str(db))
    assert made.returncode == 0, made.stderr
    card = gate_card((tmp_path / "r.html").read_text())
    assert "inconclusive" in card and "exit 3" in card, card
