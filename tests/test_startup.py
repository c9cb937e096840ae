"""litellm takes seconds to import: only code that calls (or prices) a model through it may.

Checked with `python -X importtime` (PYTHONPROFILEIMPORTTIME for the installed script), which
lists every module imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import KEY_ENV, lookup_case, write_suite
from loopback import Loopback


def imported(stderr: str) -> list[str]:
    return [
        line.rsplit("|", 1)[-1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:")
    ]


def assert_no_litellm(stderr: str) -> None:
    modules = imported(stderr)
    assert modules, "no import-time report"
    assert not [m for m in modules if "litellm" in m]


def test_importing_the_cli_does_not_import_litellm() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "from callgate.cli.main import app"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert_no_litellm(done.stderr)
    assert "callgate.cli.main" in imported(done.stderr)


@pytest.mark.slow
def test_commands_that_call_no_model_do_not_import_litellm(
    loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    env = {**cli_env, "PYTHONPROFILEIMPORTTIME": "1"}
    suite = write_suite(tmp_path / "suite", [lookup_case("a"), lookup_case("b")])
    recorded = tmp_path / "recorded.jsonl"
    recorded.write_text(
        json.dumps({"case_id": "a", "response": {"role": "assistant", "content": "hi"}}) + "\n"
    )

    def callgate(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [callgate_exe, *args], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    for args in (
        ["--help"],
        ["run", "--help"],
        ["suite", "check", str(suite)],
        ["score", str(suite), "-r", str(recorded), "-m", "m", "--release", "1", "--db", "c.db"],
    ):
        assert_no_litellm(callgate(*args).stderr)
    # Scoring recorded answers without a judge loads neither the judge nor an HTTP client.
    scored = imported(callgate("score", str(suite), "-r", str(recorded), "-m", "m",
                               "--release", "2", "--db", "c.db").stderr)
    assert "callgate.scoring.pipeline" in scored
    # (the judged shares' data model is part of the scores: it is not the judge)
    models = {"callgate.judging", "callgate.judging.judged_shares"}
    assert not [m for m in scored
                if m.startswith(("callgate.judging", "aiohttp")) and m not in models]
    # A live run on the lean path, then a re-run served from the store, offline.
    live = ["run", str(suite), "-m", "openrouter/t/m", "--api-base", loopback.base_url,
            "--api-key-env", KEY_ENV, "-k", "2", "--db", "c.db"]  # fmt: skip
    assert_no_litellm(callgate(*live).stderr)
    assert len(loopback.requests) == 4
    assert_no_litellm(callgate(*live, "--offline").stderr)
    assert len(loopback.requests) == 4


SPY = """
import os, sys

class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "litellm":
            env = os.environ
            print(env.get("LITELLM_OFFLINE_MODE"), env.get("LITELLM_LOCAL_MODEL_COST_MAP"))
            raise ImportError("the spy stops here")

sys.meta_path.insert(0, Spy())
from callgate.models.litellm_client import import_litellm
try:
    import_litellm()
except ImportError:
    pass
"""


def test_litellm_is_imported_with_its_offline_switches_set() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LITELLM_OFFLINE_MODE", "LITELLM_LOCAL_MODEL_COST_MAP")
    }
    done = subprocess.run(
        [sys.executable, "-c", SPY], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["true", "True"]


WEB_STACK = ("starlette", "jinja2", "uvicorn", "callgate.web")


@pytest.mark.slow
def test_commands_other_than_serve_and_report_do_not_import_the_web_stack(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    env = {**cli_env, "PYTHONPROFILEIMPORTTIME": "1"}
    for args in (["--help"], ["serve", "--help"], ["report", "--help"], ["gate", "--help"]):
        done = subprocess.run([callgate_exe, *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        modules = imported(done.stderr)
        assert modules, "no import-time report"
        assert not [m for m in modules if m.split(".")[0] in WEB_STACK[:3]
                    or m.startswith(WEB_STACK[3])], args
