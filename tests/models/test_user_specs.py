"""A simulated user's spec by name (models.simulated_user.user_spec_path, `--user default`): a
project's own `users/NAME.toml` first, then the one callgate ships; a path is taken as given,
and a name found nowhere is reported as not found, naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from paths import ROOT

from callgate.errors import InputError
from callgate.models.simulated_user import load_user, user_spec_path


def test_a_bare_name_finds_the_project_s_own_spec_then_the_shipped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no users/ here: the shipped default (the source tree's)
    shipped = load_user("default")
    assert shipped.fingerprint == load_user(ROOT / "users" / "default.toml").fingerprint
    assert user_spec_path("default.toml") == user_spec_path("default")
    own = tmp_path / "users"
    own.mkdir()
    (own / "default.md").write_text("Mine. {{scenario}} {{stop}}\n")
    (own / "default.toml").write_text('name = "mine"\nmodel = "openai/gpt-4.1-2025-04-14"\n'
                                      'prompt = "default.md"\n')
    assert user_spec_path("default") == Path("users") / "default.toml"
    assert load_user("default").spec.name == "mine"
    # A path is a path: not looked up by its name elsewhere.
    assert user_spec_path("elsewhere/default.toml") == Path("elsewhere/default.toml")
    with pytest.raises(InputError, match="not found") as raised:
        load_user("nobody")
    assert "nobody" in str(raised.value)
