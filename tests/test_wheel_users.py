"""The wheel carries the default simulated user (users/default.toml and its prompt, hatch
force-include as `callgate/defaults/users/`), byte for byte the source tree's, and the package
unpacked from it, away from any source tree, loads it by name (`--user default`) with the same
fingerprint."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from paths import ROOT

from callgate.models.simulated_user import load_user


@pytest.mark.slow  # it builds a wheel (README: slow tests)
def test_the_wheel_holds_the_default_user_and_the_package_finds_it(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is needed to build the wheel")
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "CALLGATE_DB")}
    built = subprocess.run([uv, "build", "--wheel", "--offline", "-q", "-o", str(tmp_path / "d")],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if built.returncode != 0 and "offline" in built.stderr.lower():
        pytest.skip("the build backend is not in uv's cache")
    assert built.returncode == 0, built.stderr
    wheel = zipfile.ZipFile(next((tmp_path / "d").glob("callgate-*.whl")))
    for name in ("default.toml", "default.md"):
        assert wheel.read(f"callgate/defaults/users/{name}") == (ROOT / "users" / name
                                                                 ).read_bytes()
    unpacked = tmp_path / "site"
    wheel.extractall(unpacked)
    work = tmp_path / "work"  # no users/ folder here, and no source tree above it
    work.mkdir()
    found = subprocess.run(
        [sys.executable, "-c", "import callgate; from callgate.models.simulated_user import "
         "load_user, user_spec_path; print(callgate.__file__); print(user_spec_path('default'));"
         " print(load_user('default').fingerprint)"],
        cwd=work, env={**env, "PYTHONPATH": str(unpacked)}, capture_output=True, text=True,
        timeout=120)
    assert found.returncode == 0, found.stderr
    package, spec, fingerprint = found.stdout.split()
    assert package.startswith(str(unpacked))  # the unpacked wheel's, not the source tree's
    assert spec == str(unpacked / "callgate" / "defaults" / "users" / "default.toml")
    assert fingerprint == load_user(ROOT / "users" / "default.toml").fingerprint
