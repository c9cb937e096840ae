"""MCP servers over stdio (tests/mcp_server.py, a real subprocess): `callgate suite tools`
snapshots the tool list and checks it, and a suite whose environment is the server runs its
multi-turn cases on it against the loopback model, final state read from the server."""

from __future__ import annotations

import gc
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV
from loopback import Loopback, ok, tool_call
from multiturn import mt_case
from paths import TESTS

from callgate.errors import InputError
from callgate.models.config import Candidate
from callgate.models.retry import RetryPolicy
from callgate.running.run import run_live
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.environment import EnvironmentError_, call_tool, fresh
from callgate.suites.mcp_tools import McpServer
from callgate.suites.suite import load_suite

SERVER = TESTS / "mcp_server.py"
STATE = {"orders": {"ord_1": {"status": "pending"}, "ord_3": {"status": "shipped"}}}


def server_command(*flags: str) -> str:
    return shlex.join([sys.executable, "mcp_server.py", *flags])


def mcp_suite(root: Path, cases: list[dict[str, Any]], **environment: Any) -> Path:
    """A suite beside a copy of the test server, tools.json as the server lists them."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(SERVER, root / "mcp_server.py")
    (root / "tools.json").write_text(json.dumps(SERVED_TOOLS))
    (root / "cases.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    spec = {"mcp": server_command(), "state": "read_state", **environment}
    (root / "suite.json").write_text(json.dumps({"environment": spec}))
    return root


def order_tool(name: str, description: str, *extra: str) -> dict[str, Any]:
    properties = {key: {"title": key.replace("_", " ").title(), "type": "string"}
                  for key in ("order_id", *extra)}
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"properties": properties, "required": list(properties),
                       "type": "object", "title": f"{name}Arguments"}}}


# What the test server lists, as tools.json holds it (read_state is suite.json's state tool).
SERVED_TOOLS = [
    order_tool("lookup_order", "Look up one order by its id."),
    order_tool("cancel_order", "Cancel an order that has not shipped yet.", "reason"),
    order_tool("track_shipment", "Track an order's parcel."),
]


def callgate(exe: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_snapshot_round_trip_and_check(tmp_path: Path, callgate_exe: str,
                                       cli_env: dict[str, str]) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(SERVER, suite / "mcp_server.py")
    done = callgate(callgate_exe, cli_env, "suite", "tools", str(suite), "--mcp", server_command())
    assert done.returncode == 0, done.stderr
    assert "4 tools" in done.stdout
    with McpServer([sys.executable, str(SERVER)]) as server:
        listed = [tool.as_catalogue_entry() for tool in server.list_tools()]
    written = json.loads((suite / "tools.json").read_text())
    assert written == listed
    assert written[:3] == SERVED_TOOLS
    assert sorted(p.name for p in suite.iterdir()) == ["mcp_server.py", "suite.json",
                                                        "tools.json"]
    # the server's name and version, kept for the tool surface a release runs with
    served = json.loads((suite / "suite.json").read_text())["source"]["mcp_server"]
    assert served == {"name": "orders", "version": served["version"]}
    assert "from orders" in done.stdout

    same = callgate(callgate_exe, cli_env, "suite", "tools", str(suite), "--check",
                    "--mcp", server_command())
    assert same.returncode == 0, same.stderr
    assert "matches the MCP server: 4 tools" in same.stdout

    before = (suite / "tools.json").read_bytes()
    changed = callgate(callgate_exe, cli_env, "suite", "tools", str(suite), "--check",
                       "--mcp", server_command("--cancel-doc", "Cancel any order."))
    assert changed.returncode == 1
    assert changed.stderr.strip().splitlines() == [
        f"error: {suite / 'tools.json'} differs from the MCP server: "
        "changed cancel_order (description)"]
    assert (suite / "tools.json").read_bytes() == before


@pytest.mark.slow
def test_a_server_that_fails_leaves_tools_json_alone(tmp_path: Path, callgate_exe: str,
                                                      cli_env: dict[str, str]) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(SERVER, suite / "mcp_server.py")
    (suite / "tools.json").write_text("[]\n")
    attempts = {
        "crash": ("--mcp", server_command("--crash")),
        "schema": ("--mcp", server_command("--bad-schema")),
        "hang": ("--mcp", shlex.join([sys.executable, "-c", "import time; time.sleep(60)"]),
                 "--timeout", "1"),
    }
    errors = {}
    for name, options in attempts.items():
        done = callgate(callgate_exe, cli_env, "suite", "tools", str(suite), *options)
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
        errors[name] = done.stderr.strip()
    assert errors["crash"].endswith(
        "the server did not start: MCPError: Connection closed "
        "(its stderr: mcp_server: cannot open the order database)")
    assert errors["schema"].startswith(
        f"error: {suite / 'tools.json'}: [4].function.parameters: the server's tool 'broken': "
        "not a valid JSON Schema Draft 7 document")
    assert "the server did not start within 1 s; give it longer with --timeout" in errors["hang"]
    assert (suite / "tools.json").read_text() == "[]\n"
    assert sorted(p.name for p in suite.iterdir()) == ["mcp_server.py", "tools.json"]


def trajectory(*tools: str) -> dict[str, Any]:
    return {"type": "trajectory", "calls": [{"tool": tool} for tool in tools]}


def test_suite_json_spells_the_mcp_environment(tmp_path: Path) -> None:
    case = mt_case("a", trajectory("lookup_order"), state=STATE)
    one = load_suite(mcp_suite(tmp_path / "one", [case]))
    other = load_suite(mcp_suite(tmp_path / "other", [case], mcp=server_command("--verbose")))
    assert one.fingerprint != other.fingerprint  # the command decides results
    (tmp_path / "other" / "mcp_server.py").write_text("# another server\n")
    assert load_suite(tmp_path / "other").fingerprint != other.fingerprint  # so does its file

    with pytest.raises(InputError, match=r"suite.json:1: environment.stat: Extra inputs"):
        load_suite(mcp_suite(tmp_path / "typo", [case], stat="read_state"))
    with pytest.raises(InputError, match=r"environment.mcp: cannot read the command"):
        load_suite(mcp_suite(tmp_path / "quote", [case], mcp='python "server.py'))
    no_reader = mcp_suite(tmp_path / "no_reader", [mt_case("f", {
        "type": "final_state", "calls": [{"tool": "lookup_order", "args": {"order_id": "ord_1"}}]},
        state=STATE)])
    spec = {"mcp": server_command()}
    (no_reader / "suite.json").write_text(json.dumps({"environment": spec}))
    with pytest.raises(InputError, match=r"cases.jsonl:1: expect: .*name the tool that reads"):
        load_suite(no_reader)


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return tool_call(name, arguments, call_id)


@pytest.mark.slow
def test_a_multi_turn_run_on_the_mcp_server(loopback: Loopback, tmp_path: Path) -> None:
    loopback.script_turns(
        "[cancel]",
        ok(calls=[call("lookup_order", "c0", order_id="ord_1")]),
        ok(calls=[call("cancel_order", "c1", order_id="ord_1", reason="duplicate"),
                  call("cancel_order", "c2", order_id="ord_3", reason="other")]),
        ok(content="ord_1 is cancelled; ord_3 has shipped."),
    )
    loopback.script_turns("[wrong]", ok(calls=[call("cancel_order", "w", order_id="ord_3",
                                                    reason="duplicate")]),
                          ok(content="Done."))
    loopback.script_turns("[down]", ok(calls=[call("track_shipment", "t", order_id="ord_die")]),
                          ok(content="Lost."))
    cancel_1 = {"type": "final_state", "calls": [
        {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]}
    suite = load_suite(mcp_suite(tmp_path / "shop", [
        mt_case("cancel", cancel_1, state=STATE),
        mt_case("wrong", cancel_1, state=STATE),
        mt_case("down", trajectory("track_shipment"), state=STATE),
    ]))
    # A server starting blocks the run's event loop (the environment interface is synchronous),
    # so a short request timeout would cut other conversations' requests meanwhile.
    settings = RunSettings(repeats=1, concurrency=3, timeout=60, progress=False,
                           retry=RetryPolicy(base_delay=0.01))
    candidate = Candidate(name="cand", model="openrouter/test/model",
                          api_base=loopback.base_url, api_key_env=KEY_ENV)
    with Store(tmp_path / "callgate.db") as store:
        live = run_live(suite, candidate, store, release="r1", settings=settings,
                        environ={KEY_ENV: KEY})
    verdicts = {v.case_id: v for v in live.result.verdicts}

    asked = [s for s in loopback.requests if s.marker.startswith("[cancel]")]
    third = max(asked, key=lambda seen: len(seen.body["messages"]))
    answers = [(m["tool_call_id"], json.loads(m["content"]))
               for m in third.body["messages"] if m["role"] == "tool"]
    assert answers == [
        ("c0", {"order_id": "ord_1", "status": "pending"}),  # the server's answer, read as JSON
        ("c1", {"order_id": "ord_1", "status": "cancelled"}),
        ("c2", {"error": "Error executing tool cancel_order: ord_3 is shipped"}),  # isError
    ]
    assert verdicts["cancel"].right_tool and verdicts["cancel"].right_arguments
    # The server's state after the model's calls differs from the reference's.
    wrong = verdicts["wrong"]
    assert not wrong.right_arguments
    assert "orders.ord_1.reason: missing" in wrong.reason
    down = verdicts["down"]
    assert down.status == "environment_error"
    assert "tools/call track_shipment: MCPError: Connection closed" in down.reason
    assert live.result.scores.excluded["environment_error"] == 1


def running(marker: str) -> list[str]:
    """The processes whose command line holds `marker`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in words:
            found.append(cmdline.parent.name)
    return found


@pytest.mark.slow
def test_a_hung_call_is_the_environments_error_and_the_server_ends(tmp_path: Path) -> None:
    marker = f"--test-{tmp_path.name}"
    root = mcp_suite(tmp_path / "shop", [mt_case("a", trajectory("track_shipment"), state=STATE)],
                     mcp=server_command(marker), timeout=15)
    factory = load_suite(root).environment
    assert factory is not None
    env = fresh(factory, STATE)
    assert running(marker)
    assert call_tool(env, "lookup_order", {"order_id": "ord_9"}) == {
        "error": "Error executing tool lookup_order: no order ord_9"}
    with pytest.raises(EnvironmentError_, match=r"track_shipment: no answer within 15 s"):
        call_tool(env, "track_shipment", {"order_id": "ord_hang"})
    del env  # dropping the environment ends its server, hung or not
    gc.collect()
    assert running(marker) == []


@pytest.mark.slow
def test_callgate_run_on_the_mcp_server(loopback: Loopback, tmp_path: Path, callgate_exe: str,
                                        cli_env: dict[str, str]) -> None:
    """Through the CLI: the run's calls are executed on the server, the key never reaches it,
    and no server outlives the run."""
    loopback.script_turns(
        "[cancel]",
        ok(calls=[call("cancel_order", "c1", order_id="ord_1", reason="duplicate")]),
        ok(content="Cancelled."),
    )
    seen_env = tmp_path / "server-env.jsonl"
    marker = f"--test-{tmp_path.name}"
    suite = mcp_suite(tmp_path / "shop", [mt_case("cancel", {"type": "final_state", "calls": [
        {"tool": "cancel_order", "args": {"order_id": "ord_1", "reason": "duplicate"}}]},
        state=STATE)], mcp=server_command(marker, "--env-file", str(seen_env)))
    done = callgate(callgate_exe, cli_env, "run", str(suite), "-m", "openai/local-model",
                    "--api-base", loopback.base_url, "--api-key-env", KEY_ENV, "-k", "1",
                    "--db", str(tmp_path / "c.db"), "--json")
    assert done.returncode == 0, done.stderr
    (attempt,) = json.loads(done.stdout)["attempts"]
    assert attempt["right_tool"] and attempt["right_arguments"], attempt
    started = [json.loads(line) for line in seen_env.read_text().splitlines()]
    # the suite check's replay, the conversation, the checks' run of its calls and the reference
    assert len(started) == 4
    assert all(KEY not in json.dumps(environ) and KEY_ENV not in environ for environ in started)
    assert json.loads(started[0]["CALLGATE_STATE"]) == STATE
    assert running(marker) == []


@pytest.mark.slow
def test_a_server_tool_named_like_the_adapters_methods_is_the_servers(tmp_path: Path) -> None:
    """A model's call to a server tool named `close` runs that tool (it shut the adapter's
    server down before, and every later call was an environment error); the state reader
    named in suite.json is not the model's to call."""
    marker = f"--test-{tmp_path.name}"
    root = mcp_suite(tmp_path / "shop", [mt_case("a", trajectory("lookup_order"), state=STATE)],
                     mcp=server_command(marker, "--close-tool"), timeout=15)
    factory = load_suite(root).environment
    assert factory is not None
    env = fresh(factory, STATE)
    assert call_tool(env, "close", {"order_id": "ord_1"}) == {"order_id": "ord_1",
                                                              "ticket": "closed"}
    assert call_tool(env, "lookup_order", {"order_id": "ord_1"})["order_id"] == "ord_1"
    assert call_tool(env, "read_state", {}) == {"error": "unknown tool read_state"}


@pytest.mark.slow
def test_a_server_that_never_answers_initialize_is_ended_at_once(tmp_path: Path) -> None:
    """A server stuck before its session starts has no session to end: closing it cancels
    the start, and its process goes (it lingered, and closing waited timeout + 10 s)."""
    import time

    from callgate.suites.mcp_tools import McpFailure

    marker = f"--test-{tmp_path.name}"
    server = McpServer([sys.executable, "-c", "import time; time.sleep(60)", marker],
                       cwd=tmp_path, timeout=1)
    started = time.monotonic()
    with pytest.raises(McpFailure, match="did not start within 1 s"):
        server.start()
    assert time.monotonic() - started < 6
    deadline = time.monotonic() + 5
    while running(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert running(marker) == []
