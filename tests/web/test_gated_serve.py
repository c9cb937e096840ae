"""A running `serve` and `callgate gate` on one store: a release gated again (another
quarantine) is shown at once, and a decision serve takes again on a changed store never
overwrites one the gate kept meanwhile (another process)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from quarantined_release import AGENT, quarantine_file, scored_store
from typer.testing import CliRunner

import callgate.web.views as views_module
from callgate.cli.main import app
from callgate.store.db import Store
from callgate.web.views import Views


def _gate(db: Path, *extra: str) -> dict[str, Any]:
    done = CliRunner().invoke(app, ["gate", "--agent", AGENT, "--release", "r2", "--db",
                                    str(db), "--json", *extra])
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _r2(store: Store) -> Any:
    found = store.find_stored_run("weather", AGENT, "r2")
    assert found is not None
    return store.stored_run(found["id"])


def test_a_release_gated_again_is_shown_at_once(tmp_path: Path) -> None:
    db = scored_store(tmp_path)
    assert _gate(db)["outcome"] == "regression"
    with Store(db) as store:
        views = Views(store)  # serve is up
        assert views.decision(_r2(store))[1].outcome == "regression"
        assert _gate(db, "--quarantine", str(quarantine_file(tmp_path)))["outcome"] == "pass"
        assert views.decision(_r2(store))[1].outcome == "pass"


def test_serve_never_overwrites_a_decision_the_gate_kept_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = scored_store(tmp_path)
    assert _gate(db)["outcome"] == "regression"
    with sqlite3.connect(db) as conn:  # as if the store changed since the gate
        conn.execute("UPDATE gated_decisions SET key = 'stale'")
    real = views_module.decide_release

    def gated_meanwhile(*args: Any, **kwargs: Any) -> Any:
        taken = real(*args, **kwargs)
        monkeypatch.setattr(views_module, "decide_release", real)
        assert _gate(db, "--quarantine", str(quarantine_file(tmp_path)))["outcome"] == "pass"
        return taken

    monkeypatch.setattr(views_module, "decide_release", gated_meanwhile)
    with Store(db) as store:
        shown = Views(store).as_gated(_r2(store))
    with Store(db) as store:
        recorded = json.loads(_r2(store).row["gate"])["outcome"]
        again = Views(store).as_gated(_r2(store))
    assert shown is not None and again is not None
    assert recorded == shown[1].outcome == again[1].outcome == "pass"
