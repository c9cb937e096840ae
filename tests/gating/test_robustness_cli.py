"""`callgate run --perturb` end to end: the installed CLI as a subprocess against a loopback
model that finds tools by name (tests/name_model.py): the figures printed and in --json, the
clean run reused from the store, the gate asked for in callgate.toml failing a release that
became brittle (exit 1), and bad input refused with exit 2 before any call."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import LOOKUP, write_suite
from factories import TRACK_SHIPMENT
from live_runs import config
from loopback import Loopback
from name_model import NameModel

TOOLS = [LOOKUP, TRACK_SHIPMENT]


def _cases(count: int) -> list[dict]:
    out = []
    for index in range(count):
        tool = "lookup_order" if index % 2 == 0 else "track_shipment"
        out.append({"id": f"c{index:02d}", "tags": ["clean"],
                    "messages": [{"role": "user", "content": f"[c{index:02d}] {tool} ord_1"}],
                    "expect": {"type": "calls",
                               "calls": [{"tool": tool, "args": {"order_id": "ord_1"}}]}})
    return out


def _callgate(exe: str, env: dict[str, str], cwd: Path, *args: str
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exe, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.slow
def test_run_perturb_reports_gates_and_refuses(tmp_path: Path, callgate_exe: str,
                                               cli_env: dict[str, str]) -> None:
    suite = write_suite(tmp_path / "suite", _cases(40), TOOLS)
    with Loopback(default=NameModel(TOOLS, p=0.9, seed=1)) as server:
        toml = config(tmp_path, server)
        args = ["run", str(suite), "-m", "router", "--config", str(toml), "-k", "2",
                "--perturb", "mask-names", "--perturb", "reorder-tools", "--perturb-seed", "1"]
        first = _callgate(callgate_exe, cli_env, tmp_path, *args, "--release", "r1")
        assert first.returncode == 0, first.stderr
        assert "mask-names: 40 paired case(s)" in first.stdout
        assert "right tool: 100.0% clean →" in first.stdout
        assert "reorder-tools: 40 paired case(s)" in first.stdout
        assert "robustness: " in first.stdout and "(worst share kept: mask-names)" in first.stdout
        asked = len(server.requests)
        assert asked == 3 * 40 * 2
        # again, as JSON: every answer from the store
        again = _callgate(callgate_exe, cli_env, tmp_path, *args, "--release", "r1", "--json")
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == asked
        doc = json.loads(again.stdout)
        assert doc["live"]["cached"] == 80
        assert [(p["kind"], p["called"], p["cached"]) for p in doc["perturbations"]] == [
            ("mask-names", 0, 80), ("reorder-tools", 0, 80)]
        masked = doc["robustness"]["perturbations"][0]
        assert masked["right_tool"]["low"] <= 10 <= masked["right_tool"]["high"]
        assert doc["robustness"]["decision"] == "not_gated"
        released = _callgate(callgate_exe, cli_env, tmp_path, "gate", "-m", "router",
                             "--release", "r1")
        assert released.returncode == 0, released.stdout + released.stderr

        # bad input: exit 2, one line, nothing called or stored
        for bad, said in ((["--perturb", "rename"], "rename needs the team's file"),
                          (["--perturb", "rename=gone.json"], "gone.json: file not found"),
                          (["--perturb", "shuffle"], "unknown kind"),
                          (["--perturb", "mask-names", "--until-decided"],
                           "cannot go with --until-decided")):
            refused = _callgate(callgate_exe, cli_env, tmp_path, *args[:8], *bad,
                                "--release", "r9")
            assert refused.returncode == 2, (bad, refused.stderr)
            assert said in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
        assert len(server.requests) == asked

    # a release that reads names only: the gate, asked for in callgate.toml, fails it
    with Loopback(default=NameModel(TOOLS, p=0.3, seed=2)) as server:
        toml = config(tmp_path, server)
        toml.write_text(toml.read_text() + "[gate]\nrobustness_max_drop = 10\n")
        brittle = _callgate(callgate_exe, cli_env, tmp_path, "run", str(suite), "-m", "router",
                            "--config", str(toml), "-k", "2", "--perturb", "mask-names",
                            "--perturb-seed", "1", "--release", "r2", "--json")
    assert brittle.returncode == 1, brittle.stderr
    figures = json.loads(brittle.stdout)["robustness"]
    assert figures["baseline_release"] == "r1" and figures["decision"] == "regression"
    assert figures["change"] < -10
