"""A Python environment's timeout is kept at a thread boundary: a constructor, a tool or a
state() that never returns is the environment's error within the timeout, and so is sys.exit;
the calls still run in order on one thread (the one the environment was made on)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from callgate.suites import environment_guard
from callgate.suites.environment import EnvironmentError_, call_tool, fresh, snapshot

RELEASE = threading.Event()


class Stuck:
    def __init__(self, state: dict[str, Any]) -> None:
        self.thread = threading.get_ident()
        if state.get("hang_init"):
            RELEASE.wait(60)

    def state(self) -> dict[str, Any]:
        return {"thread": self.thread == threading.get_ident()}

    def wait(self) -> str:
        RELEASE.wait(60)
        return "late"

    def leave(self) -> str:
        raise SystemExit(4)


@pytest.fixture(autouse=True)
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(environment_guard, "TIMEOUT", 0.5)
    RELEASE.clear()
    yield
    RELEASE.set()


def test_a_constructor_that_never_returns_is_the_environments_error() -> None:
    started = time.monotonic()
    with pytest.raises(EnvironmentError_, match=r"the constructor did not return within 0\.5 s"):
        fresh(Stuck, {"hang_init": True})
    assert time.monotonic() - started < 30


def test_a_tool_that_never_returns_and_one_that_exits_are_the_environments_errors() -> None:
    env = fresh(Stuck, {})
    assert snapshot(env) == {"thread": True}  # state() ran on the constructor's thread
    with pytest.raises(EnvironmentError_, match=r"leave called sys\.exit\(4\)"):
        call_tool(env, "leave", {})
    with pytest.raises(EnvironmentError_, match=r"wait did not return within 0\.5 s"):
        call_tool(env, "wait", {})
    with pytest.raises(EnvironmentError_, match=r"state\(\): not run, since wait did not"):
        snapshot(env)
