"""Runs of a target (the team's own agent) for the targets' tests: in process through
run_live, and the --target value of each kind for the CLI's."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from paths import TESTS

from callgate.models.config import Candidate
from callgate.models.retry import RetryPolicy
from callgate.running.run import LiveRun, run_live
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import Suite

AGENT = TESTS / "target_agents.py"


def settings(**changes: Any) -> RunSettings:
    values: dict[str, Any] = {"repeats": 1, "concurrency": 4, "timeout": 2, "progress": False,
                              "retry": RetryPolicy(base_delay=0.01, max_retries=1), **changes}
    return RunSettings(**values)


def run(tmp_path: Path, suite: Suite, target: str, run_settings: RunSettings | None = None,
        **changes: Any) -> LiveRun:
    with Store(tmp_path / "callgate.db") as store:
        return run_live(suite, Candidate(target=target, **changes), store, release="r1",
                        settings=run_settings or settings())


def callgate(exe: str, env: dict[str, str], cwd: Path, *args: str
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exe, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@contextlib.contextmanager
def target_of(kind: str, env: dict[str, str] | None = None, agent: Path = AGENT
              ) -> Iterator[str]:
    """The --target value of an agent of this kind (an HTTP agent is served while in use),
    from the agents' module `agent` under tests/ (its `answer` for a Python target)."""
    if kind == "python":
        yield f"python:{agent.stem}:answer"
        return
    if kind == "cmd":
        yield f"cmd:{sys.executable} {agent} jsonl"
        return
    server = subprocess.Popen([sys.executable, str(agent), "http"], env=env, text=True,
                              stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        assert ready[0] == "READY", ready
        yield ready[1]
    finally:
        server.kill()
        server.wait()
