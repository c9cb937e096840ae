"""The built wheel, installed in a fresh venv, has everything a new user needs: the demo runs
and the default judge and its calibration set are there, equal to the editable copies in the
source tree (judges/, calibration/).

Dependencies are installed at the locked versions through uv (from its cache when warm, else
from PyPI); about 15 s here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from callgate.judging.judge import load_judge


def sh(*args: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_runs_the_demo_and_has_the_judge(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is needed to build the wheel")
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "CALLGATE_DB", "PYTHONPATH")}
    sh(uv, "build", "--wheel", "-q", "-o", tmp_path / "dist", cwd=ROOT, env=env)
    wheel = next((tmp_path / "dist").glob("callgate-*.whl"))
    sh(uv, "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project", "-q",
       "-o", tmp_path / "requirements.txt", cwd=ROOT, env=env)
    sh(sys.executable, "-m", "venv", tmp_path / "venv", cwd=tmp_path, env=env)
    python = tmp_path / "venv" / "bin" / "python"
    sh(uv, "pip", "install", "-q", "--python", python, "-r", tmp_path / "requirements.txt",
       wheel, cwd=tmp_path, env=env)

    work = tmp_path / "work"  # no judges/ or calibration/ folder here: only the package's
    work.mkdir()
    exe = tmp_path / "venv" / "bin" / "callgate"
    demo = sh(exe, "demo", cwd=work, env={**env, "COLUMNS": "100"})
    assert "gate FAIL: regression" in demo.stdout and (work / "callgate.db").is_file()

    show = sh(exe, "judge", "show", "tool_choice", cwd=work, env=env)
    source_fingerprint = load_judge(ROOT / "judges" / "tool_choice.toml").fingerprint
    assert f"fingerprint  {source_fingerprint}" in show.stdout
    assert "site-packages" in show.stdout  # the installed copy, not the source tree's

    found = sh(python, "-c", "from callgate.judging.bundled import calibration_set; "
                             "print(calibration_set('tool_choice'))", cwd=work, env=env)
    installed_set = Path(found.stdout.strip())
    assert "site-packages" in str(installed_set)
    assert installed_set.read_bytes() == (ROOT / "calibration" / "tool_choice.jsonl").read_bytes()


@pytest.mark.slow  # it builds a wheel (README: slow tests)
def test_a_judge_a_user_adds_to_judges_is_not_baked_into_the_wheel(tmp_path: Path) -> None:
    import zipfile

    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is needed to build the wheel")
    tree = tmp_path / "tree"
    for name in ("src", "judges", "calibration", "users"):
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    (tree / "judges" / "mine.toml").write_text("# a user's own judge\n")
    (tree / "calibration" / "mine.jsonl").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    built = subprocess.run([uv, "build", "--wheel", "--offline", "-q", "-o", str(tmp_path / "d")],
                           cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    if built.returncode != 0 and "offline" in built.stderr.lower():
        pytest.skip("the build backend is not in uv's cache")
    assert built.returncode == 0, built.stderr
    wheel = next((tmp_path / "d").glob("callgate-*.whl"))
    shipped = {name for name in zipfile.ZipFile(wheel).namelist() if "/defaults/" in name}
    assert shipped == {f"callgate/defaults/{name}" for name in (
        "judges/tool_choice.toml", "judges/tool_choice.md", "calibration/tool_choice.jsonl",
        "calibration/README.md", "judges/answer_kind.toml", "judges/answer_kind.md",
        "calibration/answer_kind.jsonl", "judges/claim_support.toml",
        "judges/claim_support.md", "calibration/claim_support.jsonl",
        "judges/user_fidelity.toml", "judges/user_fidelity.md",
        "calibration/user_fidelity.jsonl", "users/default.toml", "users/default.md")}
