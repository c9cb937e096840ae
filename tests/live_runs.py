"""Live runs against the loopback model: in process (run_live with quick settings and a
candidate pointed at the server, the store's rows read back), or through the CLI (a
callgate.toml naming the candidate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import KEY, KEY_ENV
from loopback import Loopback

from callgate.models.config import Candidate
from callgate.models.retry import RetryPolicy
from callgate.running.run import LiveRun, run_live
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import Suite


def settings(**changes: Any) -> RunSettings:
    values: dict[str, Any] = {"repeats": 1, "concurrency": 4, "timeout": 2, "progress": False,
                              "retry": RetryPolicy(base_delay=0.01), **changes}
    return RunSettings(**values)


def candidate(loopback: Loopback) -> Candidate:
    return Candidate(name="cand", model="openrouter/test/model", api_base=loopback.base_url,
                     api_key_env=KEY_ENV)


def run(tmp_path: Path, suite: Suite, loopback: Loopback, run_settings: RunSettings | None = None,
        environ: dict[str, str] | None = None) -> LiveRun:
    with Store(tmp_path / "callgate.db") as store:
        return run_live(suite, candidate(loopback), store, release="r1",
                        settings=run_settings or settings(),
                        environ={KEY_ENV: KEY} if environ is None else environ)


def rows(tmp_path: Path, sql: str) -> list[dict[str, Any]]:
    with Store(tmp_path / "callgate.db") as store:
        return list(store.db.query(sql))


def config(tmp_path: Path, loopback: Loopback, **extra: str) -> Path:
    lines = [
        "[[candidates]]",
        'name = "router"',
        'model = "openrouter/test/model"',
        f'api_base = "{loopback.base_url}"',
        f'api_key_env = "{KEY_ENV}"',
        *(f"{k} = {v}" for k, v in extra.items()),
        "[candidates.provider]",
        'order = ["fireworks"]',
        "allow_fallbacks = false",
    ]
    path = tmp_path / "callgate.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
