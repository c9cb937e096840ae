"""`history --by tool|tag` leaves out of each release's slices the cases that release's kept
gate decision quarantined (gating.gated, by quarantine.quarantined_cases), and says how many:
a release whose only drop is on quarantined cases shows no drop in its slice; the same release
gated without the quarantine shows the drop, and nothing is said left out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from quarantined_release import AGENT, QUARANTINED, quarantine_file, scored_store
from typer.testing import CliRunner

from callgate.cli.main import app


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scored_store(tmp_path_factory.mktemp("slice-history-quarantine"))


def _store(scored: Path, tmp_path: Path, *gate: str) -> Path:
    """A copy of the scored store with r2 gated by `callgate gate` with these options."""
    db = tmp_path / "callgate.db"
    shutil.copy(scored, db)
    done = CliRunner().invoke(app, ["gate", "--agent", AGENT, "--release", "r2", "--db",
                                    str(db), "--config", str(tmp_path / "none.toml"), *gate])
    assert done.exit_code in (0, 1), done.output
    return db


def _history(db: Path, *args: str) -> Any:
    done = CliRunner().invoke(app, ["history", "--agent", AGENT, "--by", "tool", "--db",
                                    str(db), *args])
    assert done.exit_code == 0, done.output
    return json.loads(done.output) if "--json" in args else done.output


def _weather(document: dict[str, Any]) -> list[tuple[int, int, float | None, int]]:
    out = []
    for release in document["releases"]:
        s = next(s for s in release["slices"] if s["name"] == "get_weather")
        out.append((release["quarantined_left_out"], s["cases"], s["right_tool"]["change"],
                    s["right_tool"]["worse"]))
    return out


def test_with_the_quarantine_the_slice_shows_no_drop_and_the_cases_left_out(
        scored: Path, tmp_path: Path) -> None:
    db = _store(scored, tmp_path, "--quarantine", str(quarantine_file(tmp_path)))
    document = _history(db, "--json")
    assert [r["release"] for r in document["releases"]] == ["r1", "r2"]
    # r1 was gated without a quarantine: all 20 cases; r2 less its 10 quarantined ones
    assert _weather(document) == [(0, 20, None, 0), (len(QUARANTINED), 10, 0.0, 0)]
    forecast = next(s for s in document["releases"][1]["slices"]
                    if s["name"] == "get_forecast")
    assert forecast["attempts"] == 20  # the quarantined cases' calls are not counted there
    table = _history(db)
    assert "quarantined cases left out, as out of each release's gate: r2 10" in " ".join(
        table.split())


def test_without_the_quarantine_the_drop_shows(scored: Path, tmp_path: Path) -> None:
    db = _store(scored, tmp_path)
    document = _history(db, "--json")
    assert _weather(document) == [(0, 20, None, 0), (0, 20, -50.0, 10)]
    assert "quarantined cases left out" not in _history(db)


def test_a_release_never_gated_counts_every_case(scored: Path, tmp_path: Path) -> None:
    db = tmp_path / "callgate.db"
    shutil.copy(scored, db)
    assert _weather(_history(db, "--json")) == [(0, 20, None, 0), (0, 20, -50.0, 10)]
