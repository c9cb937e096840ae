"""A simulated user's spec for the tests: its prompt and a pinned user model reached at a
loopback server, written into `folder` (sim.md, sim.toml) and loaded as callgate loads one."""

from __future__ import annotations

from pathlib import Path

from conftest import KEY_ENV
from loopback import Loopback

from callgate.models.simulated_user import SimulatedUser, load_user


def user_spec(folder: Path, loopback: Loopback, prompt: str) -> SimulatedUser:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sim.md").write_text(prompt)
    spec = folder / "sim.toml"
    spec.write_text(f'name = "sim"\nmodel = "openrouter/test/user-2025-04-14"\n'
                    f'api_base = "{loopback.base_url}"\napi_key_env = "{KEY_ENV}"\n'
                    'prompt = "sim.md"\n')
    return load_user(spec)
