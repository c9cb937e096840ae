"""The documentation site: it builds with `mkdocs build --strict` (a broken link fails it), its
CLI reference is the command tree and its API reference every public name, the README is a
landing page that links into it, and the site's command examples are callgate's commands with
callgate's options — the getting-started ones run for real."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
import yaml
from paths import ROOT

import callgate
from callgate.cli import app
from callgate.cli.reference import cli_reference, walk_commands

BIN = Path(sys.executable).parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
ROOT_COMMAND = typer.main.get_command(app)


def mkdocs(root: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([str(BIN / "mkdocs"), "build", "--strict", "-f",
                           str(root / "mkdocs.yml"), "-d", str(out)],
                          capture_output=True, text=True, cwd=root, env=env, timeout=600)


def nav_pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    return [page for value in nav.values() for page in nav_pages(value)]


@pytest.mark.slow
def test_the_site_builds_strict_and_a_broken_link_fails_it(tmp_path: Path) -> None:
    built = mkdocs(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stdout + built.stderr
    cli_page = (tmp_path / "site/reference/cli/index.html").read_text()
    for path, _ in walk_commands(ROOT_COMMAND):
        assert f"callgate {' '.join(path)}" in cli_page, path
    api_page = (tmp_path / "site/reference/api/index.html").read_text()
    for name in set(callgate.__all__) - {"__version__"}:
        assert re.search(rf'id="callgate\.[\w.]+\.{name}"', api_page), name
    formulas = (tmp_path / "site/reference/statistics/index.html").read_text()
    assert "(p + q₀ − 1) / (q₀ + q₁ − 1)" in formulas and "C(c, k) / C(n, k)" in formulas

    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copytree(ROOT / "src", copy / "src")
    page = copy / "docs/guides/ci.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    broken = mkdocs(copy, tmp_path / "broken")
    assert broken.returncode != 0
    assert "no-such-page.md" in broken.stdout + broken.stderr


def test_the_nav_names_pages_that_exist_and_the_existing_docs() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = nav_pages(config["nav"])
    for page in pages:
        assert (ROOT / "docs" / page).is_file(), page
    assert {"bfcl.md", "targets.md", "formats.md", "store.md", "reference/cli.md",
            "reference/api.md", "reference/statistics.md", "benchmarks.md"} <= set(pages)
    guides = next(item["Guides"] for item in config["nav"]
                  if isinstance(item, dict) and "Guides" in item)
    assert {"guides/ci.md", "guides/judge.md", "guides/sharding.md"} <= set(nav_pages(guides))


def test_the_cli_reference_is_generated_from_the_app() -> None:
    text = cli_reference()
    for path, command in walk_commands(ROOT_COMMAND):
        if hasattr(command, "list_commands"):
            continue
        section = text.split(f"`callgate {' '.join(path)}`", 1)[1]
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                assert max(param.opts, key=len) in section, (path, param.opts)
    assert "`--exit-code <int>`" in text and "`--comment / --no-comment`" in text


def test_the_readme_is_a_landing_page_that_links_into_the_site() -> None:
    lines = README.splitlines()
    assert len(lines) < 300
    quick = README[README.index("## Quick start"):README.index("### Try an agent")]
    assert re.findall(r"^```sh\n(.*?)^```", quick, flags=re.M | re.S) == [
        "pip install uv && uv run --no-dev callgate demo   # set up, score the bundled example,"
        " store it in callgate.db\n"
        "pip install uv && uv run pytest                   # set up with the dev tools and run"
        " the tests\n"]
    assert README.count("```yaml") == 1  # one CI example
    for credit in ("Agent Wranglers", "CC BY 4.0",
                   "https://agentwranglers.se/playbook/agents-as-users/tool-choice-evals/"
                   "tool-choice-gate", '"How to Test Tool-Calling Accuracy in AI Agents"'):
        assert credit in README, credit
    assert "uv run pytest " in README and "what CI runs" in README
    linked = set(re.findall(r"\]\((docs/[\w/.-]+\.md)", README))
    assert {"docs/getting-started.md", "docs/guides/ci.md", "docs/reference/cli.md",
            "docs/bfcl.md", "docs/targets.md", "docs/formats.md", "docs/store.md"} <= linked


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_names_a_file_that_exists(page: Path) -> None:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.exists(), f"{page.relative_to(ROOT)}: {target}"


# ------------------------------------------------------------------ the command examples


def shell_lines(text: str) -> list[str]:
    """Every command line of the ```sh blocks, continuations joined, comments dropped."""
    found = []
    for block in re.findall(r"^```(?:sh|bash)\n(.*?)^```", text, flags=re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
            if line and not line.startswith("#"):
                found.extend(part.strip() for part in re.split(r" && | ; |; | \| ", line))
    return found


def callgate_invocations(page: Path) -> list[list[str]]:
    """The arguments after `callgate` of each callgate command the page's blocks show."""
    found = []
    for line in shell_lines(page.read_text(encoding="utf-8")):
        tokens = shlex.split(line)
        if "callgate" in tokens and tokens[0] in ("callgate", "uv"):
            found.append(tokens[tokens.index("callgate") + 1:])
    return found


EXAMPLES = [(page, args) for page in PAGES for args in callgate_invocations(page)]


def test_the_pages_show_many_commands() -> None:
    assert len(EXAMPLES) >= 50
    assert len({page for page, _ in EXAMPLES}) >= 8


@pytest.mark.parametrize("page,args", EXAMPLES,
                         ids=[f"{p.relative_to(ROOT)}:{' '.join(a[:2])}" for p, a in EXAMPLES])
def test_every_command_example_is_a_command_with_its_options(page: Path,
                                                             args: list[str]) -> None:
    command, rest = ROOT_COMMAND, list(args)
    while hasattr(command, "list_commands") and rest and not rest[0].startswith("-"):
        name = rest.pop(0)
        if "|" in name:  # `judge show|calibrate|label ...`: each of them a command
            assert all(command.get_command(click.Context(command), n) for n in name.split("|"))
            return
        found = command.get_command(click.Context(command), name)
        assert found is not None, f"{page.relative_to(ROOT)}: callgate {' '.join(args)}"
        command = found
    known = {"--help", "--version"} | {flag for param in command.params
                                       for flag in (*param.opts, *param.secondary_opts)}
    for token in rest:
        flag = token.strip("[]").split("=", 1)[0]
        if flag.startswith("--"):
            assert flag in known, f"{page.relative_to(ROOT)}: {flag} in callgate {' '.join(args)}"


@pytest.mark.slow
def test_the_getting_started_and_ci_examples_run(tmp_path: Path) -> None:
    """The commands a new user types first, as the pages give them: init, check, score, then
    the CI guide's gate by hand, with `uv run callgate` the installed callgate."""
    started = (ROOT / "docs/getting-started.md").read_text(encoding="utf-8")
    section = started[started.index("## Starting a project"):]
    block = re.findall(r"^```sh\n(.*?)^```", section, flags=re.M | re.S)[0]
    guide = (ROOT / "docs/guides/ci.md").read_text(encoding="utf-8")
    by_hand = re.findall(r"^```sh\n(.*?)^```", guide[guide.index("Without the action"):],
                         flags=re.M | re.S)[0]
    script = (block + by_hand).replace("uv run callgate", str(BIN / "callgate"))
    env = {**os.environ, "HEAD_SHA": "0123abcd" * 5, "RUNNER_TEMP": str(tmp_path / "temp"),
           "NO_COLOR": "1"}
    env.pop("CALLGATE_DB", None)
    (tmp_path / "temp").mkdir()
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 cases" in done.stdout and "first release" in done.stdout
    assert (tmp_path / "temp/scores.json").is_file()
    assert (tmp_path / "my-project/.github/workflows/callgate-release.yml").is_file()
