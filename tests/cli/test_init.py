"""`callgate init`: the scaffold checks, scores and gates at once, through the installed CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CALLGATE = str(Path(sys.executable).with_name("callgate"))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    env.pop("CALLGATE_DB", None)
    return subprocess.run([CALLGATE, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)


@pytest.mark.slow
def test_init_scaffold_checks_scores_and_gates_right_away(tmp_path: Path) -> None:
    made = cli("init", "proj", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    proj = tmp_path / "proj"
    for name in ("suite/tools.json", "suite/cases.jsonl", "responses/first.jsonl",
                 "callgate.toml", "releases/.gitkeep", "calibration/README.md",
                 ".github/workflows/callgate.yml", ".github/workflows/callgate-release.yml",
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
    for name in ("callgate.yml", "callgate-release.yml"):
        parsed = yaml.safe_load((proj / ".github/workflows" / name).read_text())
        gate = next(step for step in parsed["jobs"][next(iter(parsed["jobs"]))]["steps"]
                    if "callgate@" in step.get("uses", ""))["with"]
        assert (proj / gate["suite"]).is_dir() and (proj / gate["responses"]).is_file()
        assert gate["agent"] == "my-agent" and gate["model"] == "example/travel-agent"
    for name in ("callgate-sharded.yml",):
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


def test_init_refuses_to_overwrite_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process (the console script's own entry, so exit codes are mapped as installed):
    what is tested is the refusal and the folder, not the process."""
    from callgate.cli.main import entry

    (tmp_path / "callgate.toml").write_text("# mine\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("CALLGATE_DB", raising=False)
    monkeypatch.setattr(sys, "argv", ["callgate", "init"])
    with pytest.raises(SystemExit) as refused:
        entry()
    stderr = capsys.readouterr().err
    assert refused.value.code == 2
    assert "callgate.toml" in stderr and "not overwriting" in stderr
    assert "Traceback" not in stderr
    assert (tmp_path / "callgate.toml").read_text() == "# mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["callgate.toml"]




def test_init_fills_in_the_git_source_callgate_was_installed_from(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    from callgate.cli import scaffold

    class Installed:
        def __init__(self, direct_url: dict | None) -> None:
            self.text = json.dumps(direct_url) if direct_url is not None else None

        def read_text(self, name: str) -> str | None:
            return self.text

    pinned = {"url": "https://github.com/acme/callgate", "vcs_info": {
        "vcs": "git", "commit_id": "0123abcd" * 5, "requested_revision": "main"}}
    for direct_url, source in [
        (pinned, f"git+https://github.com/acme/callgate@{'0123abcd' * 5}"),
        ({"url": "file:///home/me/callgate", "dir_info": {"editable": True}},
         scaffold.PLACEHOLDER_SOURCE),
        ({**pinned, "url": "file:///home/me/callgate"}, scaffold.PLACEHOLDER_SOURCE),
        (None, scaffold.PLACEHOLDER_SOURCE),  # from an index or a wheel file
    ]:
        monkeypatch.setattr(metadata, "distribution", lambda name, d=direct_url: Installed(d))
        assert scaffold.install_source() == source
        workflow = scaffold.scaffold_files()[".github/workflows/callgate.yml"]
        action = ("acme/callgate@" + "0123abcd" * 5 if direct_url is pinned
                  else "OWNER/callgate@COMMIT")
        assert f"      - uses: {action}\n" in workflow
        assert "pip install" not in workflow


@pytest.mark.slow
def test_hints_name_the_command_that_works_where_they_are_read(tmp_path: Path) -> None:
    """Outside the uv project that runs this callgate (as after `uv tool install .`), the
    hints say `callgate`, not `uv run callgate`, which works only inside such a project."""
    made = cli("init", "proj", cwd=tmp_path)
    assert "\n  cd proj && callgate suite check suite\n  callgate score suite" in made.stdout
    demo = cli("demo", "--db", "d.db", cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert "uv run" not in demo.stdout
    assert "run `callgate serve --db d.db`" in demo.stdout


def test_inside_a_uv_project_the_hints_say_uv_run(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from callgate.cli.common import command_name

    project = tmp_path / "project"
    (project / ".venv").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (project / "sub").mkdir()
    monkeypatch.setattr(sys, "prefix", str(project / ".venv"))
    assert command_name(project) == command_name(project / "sub") == "uv run callgate"
    assert command_name(tmp_path) == "callgate"
    (project / "pyproject.toml").unlink()  # a plain virtual environment named .venv
    assert command_name(project) == "callgate"
