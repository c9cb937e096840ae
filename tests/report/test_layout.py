"""What CI logs show at 80 columns: release labels never cut, the gate and calibration tables
whole (no '…', no line wider than 80), and `history --json` with the full labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from console80 import cli80

from callgate.cli.demo import example_path

SHA_OLD = "3f9a1c2b7e4d5f60718293a4b5c6d7e8f9012345"
SHA_NEW = "b7e4d5f60718293a4b5c6d7e8f90123453f9a1c2"


def assert_fits(text: str) -> None:
    assert "…" not in text, text
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert not wide, "\n".join(wide)


def score(tmp_path: Path, release: str) -> None:
    root = example_path()
    month = "2026.10" if release == SHA_OLD else "2026.11"
    result = cli80("score", str(root), "-r", str(root / f"responses-{month}.jsonl"), "-m", "agent",
                   "--release", release, "--db", "c.db", cwd=tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_history_and_gate_fit_80_columns_with_sha_releases(tmp_path: Path) -> None:
    score(tmp_path, SHA_OLD)
    score(tmp_path, SHA_NEW)
    history = cli80("history", "-m", "agent", "--db", "c.db", cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    assert_fits(history.stdout)
    for header in ("release", "created UTC", "tool %", "args %", "calls", "scored", "gate"):
        assert header in history.stdout
    rows = [line for line in history.stdout.splitlines() if line.startswith(SHA_NEW[:12])]
    # the last columns, scored and gate (never gated yet), are there
    assert len(rows) == 1 and rows[0].split()[-2:] == ["98", "–"]
    assert SHA_OLD[:12] in history.stdout

    document = json.loads(cli80("history", "-m", "agent", "--db", "c.db", "--json",
                                cwd=tmp_path).stdout)
    releases = document["releases"]
    assert [r["release"] for r in releases] == [SHA_OLD, SHA_NEW]
    assert releases[0]["change_right_tool"] is None
    assert releases[1]["change_right_tool"] == round(
        releases[1]["figures"]["right_tool"]["pct"] - releases[0]["figures"]["right_tool"]["pct"],
        6)
    assert releases[1]["figures"]["scored"] == 98

    gate = cli80("gate", "-m", "agent", "--release", SHA_NEW, "--db", "c.db", cwd=tmp_path)
    assert gate.returncode == 1, gate.stderr
    assert_fits(gate.stdout)
    for label in ("right tool", "right arguments", "detectable drop, paired",
                  "detectable drop, unpaired", "McNemar p"):
        assert label in gate.stdout
    gated = cli80("history", "-m", "agent", "--db", "c.db", cwd=tmp_path)
    assert_fits(gated.stdout)
    rows = [line for line in gated.stdout.splitlines() if line.startswith(SHA_NEW[:12])]
    assert rows[0].split()[-1] == "regression"


@pytest.mark.slow
def test_a_long_release_label_wraps_instead_of_being_cut(tmp_path: Path) -> None:
    label = "spring-2027-model-swap-with-new-tool-descriptions"
    score(tmp_path, label)
    history = cli80("history", "-m", "agent", "--db", "c.db", cwd=tmp_path)
    assert_fits(history.stdout)
    width = max(len(line.split()[0]) for line in history.stdout.splitlines()[3:] if line)
    first_column = "".join(line[:width].strip() for line in history.stdout.splitlines()[3:])
    assert label in first_column
