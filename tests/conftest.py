"""Fixtures for live runs: the loopback server, a small suite whose cases name themselves, and
the installed CLI."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import CANCEL_ORDER, LOOKUP_ORDER
from loopback import Loopback

# pytest caches the test modules it rewrites for its assertions in __pycache__ only when
# bytecode may be written; with PYTHONDONTWRITEBYTECODE set (as CI's machine has), every run
# and every xdist worker rewrote all ~120 test modules again: 10 of the 15 s CPU of collecting
# the tree. Written while collecting only (.gitignore'd); the tests themselves run with the
# setting as it was, so no test sees a __pycache__ appear in a folder it watches.
_DONT_WRITE_BYTECODE = sys.dont_write_bytecode
sys.dont_write_bytecode = False


def pytest_collection_finish(session: pytest.Session) -> None:
    sys.dont_write_bytecode = _DONT_WRITE_BYTECODE


def _build_each_app_once() -> None:
    """typer builds its click command anew from the app on every call (`app()`, CliRunner's
    invoke): ~30 ms of inspect.signature and type hints for callgate's 100 commands, which was
    half the CPU of the in-process CLI tests (tests/cli/test_bad_inputs.py: 11 of 24 s). A
    click command is made to be invoked many times, and typer captures each command's function
    when it is declared, so the command built the first time is the one every later call would
    build: it is kept, per app, while the app's commands and groups stay as they were."""
    import typer.main
    import typer.testing

    build = typer.main.get_command
    built: dict[int, tuple[typer.Typer, tuple[int, int], Any]] = {}

    def get_command(app: typer.Typer) -> Any:
        shape = (len(app.registered_commands), len(app.registered_groups))
        kept = built.get(id(app))
        if kept is None or kept[0] is not app or kept[1] != shape:
            kept = built[id(app)] = (app, shape, build(app))
        return kept[2]

    typer.main.get_command = get_command  # what Typer.__call__ looks up on each call
    typer.testing._get_command = get_command  # type: ignore[attr-defined]


# The test files that import litellm (4-8 s CPU, once per process). xdist's load scheduling
# hands each worker a run of consecutive tests first (a quarter of its share), so with these
# files first one worker imports litellm, early, instead of both, wherever they fall.
LITELLM_FILES = ("test_providers.py", "test_estimate.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in LITELLM_FILES)  # stable: order kept


def pytest_configure(config: pytest.Config) -> None:
    _build_each_app_once()
    # Hypothesis loads its third-party plugins on import: the only one here is trio's
    # (selenium's dependency, for trio's own tests), 0.25 s CPU in every process.
    os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")
    from hypothesis import HealthCheck
    from hypothesis import settings as hypothesis_settings

    # A property holds or not whatever the load: no per-example deadline and no health check
    # on the time spent generating inputs (both wall time; at load 17 a list of 60 verdicts
    # took 2.7 s).
    hypothesis_settings.register_profile(
        "callgate", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    hypothesis_settings.load_profile("callgate")

KEY_ENV = "CALLGATE_TEST_KEY"
KEY = "sk-or-v1-test-5ecret-do-not-store-0123456789"

LOOKUP = LOOKUP_ORDER
# `strict` rides along so the tests see it sent to the model exactly as written.
CANCEL = {"type": "function", "function": {**CANCEL_ORDER["function"], "strict": True}}
TOOLS = [LOOKUP, CANCEL]


def marker(case_id: str) -> str:
    """What the loopback server matches a case by: its id in brackets in the user message."""
    return f"[{case_id}]"


def lookup_case(case_id: str, order: str = "ord_1") -> dict[str, Any]:
    return {
        "id": case_id,
        "messages": [
            {"role": "system", "content": "You help with orders."},
            {"role": "user", "content": f"{marker(case_id)} Where is my order {order}?"},
        ],
        "tags": ["clean"],
        "expect": {
            "type": "calls",
            "calls": [{"tool": "lookup_order", "args": {"order_id": order}}],
        },
    }


def no_call_case(case_id: str) -> dict[str, Any]:
    return {
        "id": case_id,
        "messages": [{"role": "user", "content": f"{marker(case_id)} What are your hours?"}],
        "tags": ["no-tool"],
        "expect": {"type": "no_call"},
    }


def write_suite(root: Path, cases: list[dict[str, Any]], tools: list[dict] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.json").write_text(json.dumps(tools or TOOLS, indent=2))
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return root


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    server = Loopback().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def callgate_exe() -> str:
    """The installed `callgate` script of this environment."""
    beside = Path(sys.executable).parent / "callgate"
    found = str(beside) if beside.exists() else shutil.which("callgate")
    if found is None:
        pytest.skip("the callgate script is not installed")
    return found


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """A subprocess environment with the test key in KEY_ENV and nothing else of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CALLGATE_", "OPENROUTER"))}
    env[KEY_ENV] = KEY
    env["COLUMNS"] = "160"
    env["HOME"] = str(tmp_path)
    return env


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store `callgate demo` writes, made once per test process, in process (the modules
    that serve it copy it: `copy_demo_store`)."""
    return build_demo_store(tmp_path_factory.mktemp("demo-store"))


def build_demo_store(folder: Path) -> Path:
    """`callgate demo --db FOLDER/callgate.db`, in process. A copy names the store it was
    made in wherever a kept gate decision says where its baseline came from; a module that
    compares those with a fresh `gate` builds its own."""
    from typer.testing import CliRunner

    from callgate.cli.main import app

    db = folder / "callgate.db"
    done = CliRunner().invoke(app, ["demo", "--db", str(db)])
    assert done.exit_code == 0, done.output
    return db


def copy_demo_store(demo_store: Path, folder: Path) -> Path:
    """A copy of the demo's store of one's own, its WAL included (SQLite's backup)."""
    import sqlite3

    db = folder / "callgate.db"
    with sqlite3.connect(demo_store) as source, sqlite3.connect(db) as target:
        source.backup(target)
    source.close()
    target.close()
    return db
