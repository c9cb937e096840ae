"""`callgate run --target ... --user SPEC` end to end, the installed CLI as a subprocess: the
scenario cases of tests/running/test_target_scenarios.py played against the Python target by
the scripted loopback user model; the report shows the blamed conversations apart (`excluded:
user error`), the agent's shares over its own attempts; the same command again sends nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loopback import Loopback
from multiturn import env_suite
from paths import TESTS
from target_runs import callgate
from test_target_scenarios import AGENTS_OWN, BLAMED, TARGET, to_user, user_model, user_spec


@pytest.mark.slow
def test_run_with_a_target_and_a_simulated_user_through_the_cli(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    with Loopback(default=user_model) as server:
        user_spec(tmp_path, server)
        suite = env_suite(tmp_path / "shop", AGENTS_OWN + BLAMED)
        env = {**cli_env, "PYTHONPATH": str(TESTS)}
        args = ["run", str(suite), "--target", TARGET, "--user", "users/sim.toml",
                "--release", "r1", "-k", "1", "--db", "t.db", "--max-excluded", "0.9"]
        done = callgate(callgate_exe, env, tmp_path, *args)
        assert done.returncode == 0, done.stderr
        rows = [[cell.strip() for cell in line.split("│") if cell.strip()]
                for line in done.stdout.splitlines()]
        assert ["excluded: user error", "3"] in rows, done.stdout
        assert ["scored attempts", "2"] in rows, done.stdout
        assert to_user(server) == 9

        server.reset()
        again = callgate(callgate_exe, env, tmp_path, *args, "--json")
        assert again.returncode == 0, again.stderr
        doc = json.loads(again.stdout)
        assert server.requests == []
        assert doc["live"]["called"] == 0 and doc["live"]["user_simulator"]["requests"] == 0
        assert doc["scores"]["excluded"]["user_error"] == 3
        right = doc["scores"]["figures"]["right_arguments"]
        assert (right["successes"], right["n"]) == (1, 2), right
        assert {a["case_id"]: a["status"] for a in doc["attempts"]} == {
            "goal": "scored", "sloppy": "scored", "quit": "user_error", "leak": "user_error",
            "lie": "user_error"}
