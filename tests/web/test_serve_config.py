"""`serve --config FILE` (default ./callgate.toml, as `gate`): a release `callgate gate` never
decided is shown with the decision the configured [gate] takes (here its quarantine and slice
rule), the one `callgate gate --config FILE` would take; without the file, the default rule's;
a release `gate` decided keeps showing that decision. In process, through the app (Starlette's
test client)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from quarantined_release import AGENT, QUARANTINED, entries, scored_store
from starlette.testclient import TestClient
from typer.testing import CliRunner

from callgate.cli.main import app as cli
from callgate.cli.serving import configured_gate
from callgate.gating.gated import GateInputs
from callgate.web.app import create_app


def write_config(root: Path) -> Path:
    path = root / "callgate.toml"
    path.write_text("[gate]\nper_tool = true\n" + "".join(
        f'[[gate.quarantine]]\ncase = "{q.case}"\nreason = "{q.reason}"\nby = "{q.by}"\n'
        for q in entries()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """r1 gated, r2 never gated."""
    return scored_store(tmp_path_factory.mktemp("serve-config"))


def copied(scored: Path, root: Path, name: str = "callgate.db") -> Path:
    db = root / name
    shutil.copy(scored, db)
    return db


def shown(db: Path, configured: GateInputs | None) -> dict[str, Any]:
    with TestClient(create_app(db, configured=configured),
                    base_url="http://127.0.0.1:8765") as http:
        api = http.get("/api/gate", params={"model": AGENT, "release": "r2"})
        assert api.status_code == 200
        body: dict[str, Any] = api.json()
        # the releases' list says the same outcome
        listed = http.get("/api/releases", params={"model": AGENT}).json()
        assert [r["outcome"] for r in listed["suites"]["weather"]] == ["first_release",
                                                                       body["outcome"]]
        return body


def gate_cli(db: Path, *args: str) -> dict[str, Any]:
    done = CliRunner().invoke(cli, ["gate", "--agent", AGENT, "--release", "r2", "--db",
                                    str(db), "--json", *args])
    assert done.exit_code in (0, 1), done.output
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_a_never_gated_release_shows_the_configured_rules_decision(
        scored: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    configured = configured_gate(config)
    assert configured is not None and configured.slice_rule is not None
    db = copied(scored, tmp_path)
    decision = shown(db, configured)
    assert (decision["outcome"], decision["shared_cases"]) == ("pass", 70)
    assert [q["case"] for q in decision["quarantined"]] == QUARANTINED
    assert decision["what_to_fix"]["slice_gate"] is not None  # [gate] per_tool = true
    # exactly what `callgate gate --config FILE` decides on a copy of the store (its path
    # apart)
    cli_decision = gate_cli(copied(scored, tmp_path, "gated.db"), "--config", str(config))
    assert cli_decision.pop("baseline_source").endswith("gated.db")
    assert decision.pop("baseline_source") == f"store {db}"
    assert decision == cli_decision
    again = shown(db, configured)  # read back as kept, the same
    assert {k: v for k, v in again.items() if k != "baseline_source"} == decision


def test_without_a_config_the_default_rule_shows(scored: Path, tmp_path: Path) -> None:
    assert configured_gate(tmp_path / "callgate.toml") is None  # no file: the defaults
    plain = tmp_path / "plain.toml"
    plain.write_text('[gate]\nrule = "points"\n', encoding="utf-8")
    assert configured_gate(plain) is None  # only the defaults: the default rule's key
    decision = shown(copied(scored, tmp_path), None)
    assert decision["outcome"] == "regression" and decision["quarantined"] == []


def test_a_gated_release_keeps_its_own_decision(scored: Path, tmp_path: Path) -> None:
    db = copied(scored, tmp_path)
    kept = gate_cli(db, "--config", str(tmp_path / "none.toml"))  # gated without quarantine
    assert kept["outcome"] == "regression"
    assert shown(db, configured_gate(write_config(tmp_path))) == kept


def test_serve_reads_callgate_toml_by_default_and_refuses_a_bad_one(
        scored: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before the port is bound: one line naming the file, line and field."""
    db = copied(scored, tmp_path)
    (tmp_path / "callgate.toml").write_text('[gate]\nrule = "sure"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["serve", "--db", str(db), "--port", "0"])
    assert done.exit_code == 2
    assert "callgate.toml" in done.output and "gate.rule" in done.output, done.output
    other = tmp_path / "other.toml"
    other.write_text("[gate]\nper_tool = 3\n", encoding="utf-8")
    done = CliRunner().invoke(cli, ["serve", "--db", str(db), "--port", "0", "--config",
                                    str(other)])
    assert done.exit_code == 2 and "other.toml" in done.output, done.output
