"""An MCP server at the edges (tests/raw_mcp_server.py, a real subprocess speaking JSON-RPC
without the SDK): a tools/list cursor that repeats stops, an answer the SDK refuses is one line
naming its field, lines that are not JSON-RPC print no traceback, a server slow to start names
--timeout and suite.json's timeout, and a timeout of 1e400 is refused at load."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from multiturn import mt_case
from paths import TESTS

from callgate.errors import InputError
from callgate.suites.environment import EnvironmentError_, McpEnvironments, McpSpec
from callgate.suites.mcp_tools import McpFailure, McpServer
from callgate.suites.suite import load_suite

RAW = TESTS / "raw_mcp_server.py"


def raw(*flags: str) -> list[str]:
    return [sys.executable, str(RAW), *flags]


def test_a_repeated_cursor_stops_the_listing() -> None:
    with McpServer(raw("--repeat-cursor"), timeout=20) as server, \
            pytest.raises(McpFailure, match="gave the cursor 'page-2' twice, after 2 tools"):
        server.list_tools()


def test_an_answer_the_sdk_refuses_is_one_line_naming_the_field() -> None:
    with McpServer(raw("--bad-tool"), timeout=20) as server, \
            pytest.raises(McpFailure) as refused:
        server.list_tools()
    assert str(refused.value) == (
        "tools/list: the server's answer is not MCP: tools.1.inputSchema: Input should be a "
        "valid dictionary or instance of InputSchema")


def test_a_slow_environment_server_names_suite_jsons_timeout(tmp_path: Path) -> None:
    spec = McpSpec(mcp=shlex.join(raw("--slow-start", "10")), timeout=0.5)
    factory = McpEnvironments(spec, tmp_path, tmp_path / "suite.json")
    with pytest.raises(EnvironmentError_) as failed:
        factory({})
    assert "did not start within 0.5 s" in str(failed.value)
    assert str(failed.value).endswith("raise the environment's \"timeout\" in suite.json")


@pytest.mark.parametrize("timeout", ["1e400", "1e9", "0"])
def test_an_environment_timeout_out_of_bounds_is_refused_at_load(
    timeout: str, tmp_path: Path
) -> None:
    root = tmp_path / "suite"
    root.mkdir()
    (root / "tools.json").write_text("[]")
    (root / "cases.jsonl").write_text(json.dumps(mt_case("a", {"type": "no_call"})) + "\n")
    (root / "suite.json").write_text(
        '{"environment": {"mcp": "python server.py", "timeout": ' + timeout + "}}")
    with pytest.raises(InputError) as refused:
        load_suite(root)
    message = str(refused.value)
    assert message.startswith(f"{root / 'suite.json'}:1: environment.timeout: ")
    assert "\n" not in message


def tools(exe: str, env: dict[str, str], suite: Path, *options: str
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exe, "suite", "tools", str(suite), *options], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_suite_tools_says_what_went_wrong_on_one_line(
    tmp_path: Path, callgate_exe: str, cli_env: dict[str, str]
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    for flags, code, said in (
        (["--repeat-cursor"], 2, "gave the cursor 'page-2' twice"),
        (["--bad-tool"], 2, "tools.1.inputSchema: Input should be a valid dictionary"),
        (["--slow-start", "10"], 2, "did not start within 1 s; give it longer with --timeout "
                                    "(now 1 s), or the environment's \"timeout\" in suite.json"),
        (["--garbage"], 0, ""),
    ):
        done = tools(callgate_exe, cli_env, suite, "--mcp", shlex.join(raw(*flags)),
                     "--timeout", "1" if "--slow-start" in flags else "30")
        assert done.returncode == code, (flags, done.stderr)
        assert "Traceback" not in done.stderr and said in done.stderr
        assert len(done.stderr.strip().splitlines()) == (1 if code else 0), done.stderr
    (suite / "suite.json").write_text(json.dumps({"environment": {
        "mcp": shlex.join(raw("--slow-start", "2")), "timeout": 60}}))
    done = tools(callgate_exe, cli_env, suite)  # suite.json's timeout is the default
    assert done.returncode == 0, done.stderr
