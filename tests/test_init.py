"""`callgate init`: the scaffold checks, scores and gates at once, through the installed CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

CALLGATE = str(Path(sys.executable).with_name("callgate"))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    env.pop("CALLGATE_DB", None)
    return subprocess.run([CALLGATE, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)


def test_init_scaffold_checks_scores_and_gates_right_away(tmp_path: Path) -> None:
    made = cli("init", "proj", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    proj = tmp_path / "proj"
    for name in ("suite/tools.json", "suite/cases.jsonl", "responses/first.jsonl",
                 "callgate.toml", "releases/.gitkeep", ".github/workflows/callgate.yml",
                 ".github/workflows/callgate-sharded.yml"):
        assert (proj / name).is_file(), name
        assert f"created {Path('proj') / name}" in made.stdout

    cases = [json.loads(line) for line in (proj / "suite/cases.jsonl").read_text().splitlines()]
    kinds = {c["expect"]["type"] for c in cases}
    assert "no_call" in kinds
    assert any(c["expect"].get("mode") == "unordered" and len(c["expect"]["calls"]) == 2
               for c in cases)
    assert any("one_of" in json.dumps(c["expect"]) for c in cases)

    check = cli("suite", "check", "suite", cwd=proj)
    assert check.returncode == 0, check.stderr
    assert "5 cases" in check.stdout and "warning" not in check.stdout

    scored = cli("score", "suite", "--responses", "responses/first.jsonl", "--agent", "my-agent",
                 "--model", "example/travel-agent", "--release", "first", "--json", cwd=proj)
    assert scored.returncode == 0, scored.stderr
    figures = json.loads(scored.stdout)["scores"]["figures"]
    assert figures["scored"] == 5 and figures["right_arguments"]["pct"] == 100.0

    # The workflow's gate step works on the scaffold: releases/ exists, the first release passes.
    gate = cli("gate", "--agent", "my-agent", "--release", "first", "--baseline", "releases/",
               "--scores-out", "releases/first.json", cwd=proj)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert (proj / "releases/first.json").is_file()

    # Every path the workflows name exists in the scaffold; every command and option they use
    # is one of callgate's.
    import typer.main
    import yaml

    from callgate.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for name in ("callgate.yml", "callgate-sharded.yml"):
        workflow = (proj / ".github/workflows" / name).read_text()
        assert "jobs" in yaml.safe_load(workflow), name  # valid YAML (PyYAML comes with litellm)
        for path in re.findall(r"callgate (?:score|run) (\S+)|--responses (\S+)", workflow):
            for part in filter(None, path):
                assert (proj / part).exists(), part
        used = set(re.findall(r"(?m)^[\s#-]*(?:run: )?callgate ([a-z]+) ", workflow))
        assert used <= set(commands), used - set(commands)
        known = {flag for command in used for param in commands[command].params
                 for flag in param.opts}
        flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", workflow))
        assert flags <= known, (name, flags - known)
        # A stable agent name on every step that files, gates or reports a release: the
        # model id may change, the line it is gated along does not.
        steps = re.findall(r"callgate (?:score|gate|report) [^\n]*\n[^\n]*", workflow)
        assert len(steps) >= 2, name
        for step in steps:
            assert "--agent my-agent" in step, (name, step)
    sharded = (proj / ".github/workflows/callgate-sharded.yml").read_text()
    assert "--shard ${{ matrix.shard }}/4" in sharded and "callgate merge" in sharded

    # The candidates file loads (`run` reads ./callgate.toml whenever it exists).
    from callgate.models.config import load_config

    assert load_config(proj / "callgate.toml").find("my-agent") is not None


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "callgate.toml").write_text("# mine\n")
    refused = cli("init", cwd=tmp_path)
    assert refused.returncode == 2
    assert "callgate.toml" in refused.stderr and "not overwriting" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (tmp_path / "callgate.toml").read_text() == "# mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["callgate.toml"]
