"""The README and the documentation site are kept true: the Python example runs, and every
command and option of the CLI appears in the hand-written pages (as sqlite-utils checks its
docs); the site's own build and command examples are tests/test_docs_site.py."""

from __future__ import annotations

import re
from typing import Any

import click
import pytest
import typer.main
from paths import ROOT

from callgate.cli import app

# The hand-written pages: the CLI reference page is generated from the app, so it is no check.
PAGES = {path: path.read_text(encoding="utf-8") for path in
         [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
         if path.name != "cli.md"}
DOCS = "\n".join(PAGES.values())


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)


def test_the_python_apis_example_runs(monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    page = ROOT / "docs" / "reference" / "api.md"
    blocks = python_blocks(page.read_text(encoding="utf-8"))
    assert len(blocks) == 1, "the Python API page has one ```python example"
    monkeypatch.chdir(ROOT)  # its paths are the source tree's
    exec(compile(blocks[0], str(page), "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "2026.10 first_release 0" in out
    assert "2026.11 regression 1" in out


def commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every visible command under a click group (typer may vendor click: duck-typed)."""
    found = []
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        if command.hidden:
            continue
        path = (*prefix, name)
        found.append((path, command))
        if hasattr(command, "list_commands"):
            found.extend(commands(command, path))
    return found


COMMANDS = commands(typer.main.get_command(app))


def test_the_command_tree_is_walked() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"score", "gate", "judge calibrate", "serve"} <= names
    gate = dict((" ".join(path), command) for path, command in COMMANDS)["gate"]
    assert "--max-drop" in {opt for param in gate.params for opt in param.opts}


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_and_option_is_in_the_docs(path: tuple[str, ...], command: Any) -> None:
    assert f"callgate {' '.join(path)}" in DOCS, f"`callgate {' '.join(path)}` not in the docs"
    missing = [
        flag
        for param in command.params
        if param.param_type_name == "option" and not param.hidden
        for flag in [max(param.opts, key=len)]
        if flag.startswith("--") and flag != "--help"
        and not re.search(re.escape(flag) + r"(?![\w-])", DOCS)
    ]
    assert not missing, f"callgate {' '.join(path)}: {', '.join(missing)} not in the docs"


def test_the_case_field_table_lists_every_field_of_a_case() -> None:
    from callgate.suites.suite import Case

    formats = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    table = formats[formats.index("### cases.jsonl"):formats.index("Expectation shapes")]
    listed = set(re.findall(r"^\| `(\w+)`", table, flags=re.M))
    # a field documented with its feature: docs/policies.md's "In a case" table
    policies = (ROOT / "docs" / "policies.md").read_text(encoding="utf-8")
    case_table = policies[policies.index("### In a case"):policies.index("A bad policy")]
    listed |= set(re.findall(r"^\| `(\w+)`", case_table, flags=re.M))
    # and docs/simulated-user.md's (a scenario)
    simulated = (ROOT / "docs" / "simulated-user.md").read_text(encoding="utf-8")
    case_table = simulated[simulated.index("### In a case"):simulated.index("### The scenario")]
    listed |= set(re.findall(r"^\| `(\w+)`", case_table, flags=re.M))
    assert listed == set(Case.model_fields), set(Case.model_fields) ^ listed


def test_the_calibration_readme_points_only_at_files_it_ships_with() -> None:
    # It is installed beside the set (callgate/defaults/calibration/): a path in it must exist
    # there and here, so only the set and the judges, never the source tree's other files.
    folder = ROOT / "calibration"
    text = (folder / "README.md").read_text(encoding="utf-8")
    paths = re.findall(r"`((?:\.\./)?[\w./-]+\.(?:md|jsonl|toml))`", text)
    assert paths
    for path in paths:
        assert (folder / path).is_file(), path
        assert path.startswith(("../judges/", "tool_choice")), path
    assert "design document" not in text  # not in the repository
