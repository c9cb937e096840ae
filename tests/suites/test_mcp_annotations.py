"""MCP tool annotations (readOnlyHint, destructiveHint, idempotentHint, openWorldHint):
`suite tools --mcp` keeps the ones a real SDK server gives in tools.json, beside `function`; the
suite loads them, a hand-written one with a typo is refused naming the field, and the model is
never sent them (a loopback model records what it receives)."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import KEY, KEY_ENV, lookup_case, marker
from loopback import Loopback, ok
from typer.testing import CliRunner

from callgate.cli import app
from callgate.errors import InputError
from callgate.models.config import Candidate
from callgate.models.retry import RetryPolicy
from callgate.running.run import LiveRunner
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.mcp_tools import McpServer
from callgate.suites.suite import load_suite

SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    app = MCPServer("annotated")

    @app.tool(description="Look up one order.",
              annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
    def lookup_order(order_id: str) -> str:
        return order_id

    @app.tool(description="Cancel an order.",
              annotations=ToolAnnotations(title="Cancel", readOnlyHint=False,
                                          destructiveHint=True, idempotentHint=True))
    def cancel_order(order_id: str) -> str:
        return order_id

    @app.tool(description="Say hello.")
    def hello() -> str:
        return "hello"

    app.run("stdio")
''')


@pytest.fixture
def server(tmp_path: Path) -> list[str]:
    script = tmp_path / "annotated_server.py"
    script.write_text(SERVER)
    return [sys.executable, str(script)]


@pytest.mark.slow
def test_the_hints_a_server_gives_are_read(server: list[str]) -> None:
    with McpServer(server, timeout=30) as running:
        listed = {tool.name: tool.annotations for tool in running.list_tools()}
    assert listed == {
        "lookup_order": {"readOnlyHint": True, "openWorldHint": False},
        "cancel_order": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
        "hello": None,  # no annotations: none written, not the spec's defaults
    }


@pytest.mark.slow
def test_suite_tools_keeps_them_and_the_model_is_never_sent_them(
        server: list[str], tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    done = CliRunner().invoke(app, ["suite", "tools", str(suite), "--mcp",
                                    " ".join(server), "--timeout", "30"])
    assert done.exit_code == 0, done.output
    written = {t["function"]["name"]: t for t in json.loads((suite / "tools.json").read_text())}
    assert written["cancel_order"]["annotations"] == {
        "readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}
    assert written["lookup_order"]["annotations"] == {"readOnlyHint": True,
                                                      "openWorldHint": False}
    assert "annotations" not in written["hello"]
    assert "title" not in json.dumps(written["cancel_order"]["annotations"])

    # The snapshot checks against the same server.
    same = CliRunner().invoke(app, ["suite", "tools", str(suite), "--check", "--mcp",
                                    " ".join(server), "--timeout", "30"])
    assert same.exit_code == 0, same.output

    case = lookup_case("c1")
    (suite / "cases.jsonl").write_text(json.dumps(case) + "\n")
    loaded = load_suite(suite)
    assert loaded.tools["cancel_order"].annotations is not None
    assert loaded.tools["cancel_order"].annotations.destructiveHint is True
    with Loopback() as model:
        model.script(marker("c1"), ok(content="done"))
        settings = RunSettings(repeats=1, concurrency=1, timeout=10,
                               retry=RetryPolicy(base_delay=0.01), progress=False)
        candidate = Candidate(model="openai/x", api_base=model.base_url, api_key_env=KEY_ENV,
                              client="lean")
        with Store(tmp_path / "s.db") as store:
            asyncio.run(LiveRunner(loaded, candidate, store, "r", settings=settings,
                                   environ={KEY_ENV: KEY}).run())
        [request] = model.requests
    sent = request.body["tools"]
    assert [t["function"]["name"] for t in sent] == list(written)
    assert all(set(t) == {"type", "function"} for t in sent)
    assert "Hint" not in request.raw


def test_a_hint_with_a_typo_is_refused_naming_the_field(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    tool = {"type": "function",
            "function": {"name": "cancel_order", "parameters": {"type": "object"}},
            "annotations": {"destructivehint": True}}
    (suite / "tools.json").write_text(json.dumps([tool]))
    (suite / "cases.jsonl").write_text(json.dumps(
        {"id": "a", "messages": [{"role": "user", "content": "hi"}],
         "expect": {"type": "no_call"}}) + "\n")
    with pytest.raises(InputError) as refused:
        load_suite(suite)
    assert "[0].annotations.destructivehint" in str(refused.value)


# --------------------------------------------------------------------------- policies

# tools.json as `suite tools --mcp` writes it from a server that gives hints.
ANNOTATED_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}},
     **({"annotations": hints} if hints else {})}
    for name, hints in (
        ("lookup_order", {"readOnlyHint": True, "destructiveHint": True}),  # read-only wins
        ("cancel_order", {"destructiveHint": True}),
        ("change_address", {"readOnlyHint": False, "destructiveHint": False}),
        ("hello", None),  # no hints: not a write tool, whatever MCP's defaults
    )
]


def _suite(tmp_path: Path, policies: dict, tools: list | None = None,
           case_policies: dict | None = None) -> Path:
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    (suite / "tools.json").write_text(json.dumps(tools or ANNOTATED_TOOLS))
    case = {"id": "a", "messages": [{"role": "user", "content": "cancel ord_1"}],
            "expect": {"type": "no_call"}}
    if case_policies is not None:
        case["policies"] = case_policies
    (suite / "cases.jsonl").write_text(json.dumps(case) + "\n")
    (suite / "suite.json").write_text(json.dumps({"policies": policies}))
    return suite


def test_write_tools_annotated_are_the_tools_whose_hints_say_they_write(tmp_path: Path) -> None:
    from callgate.checks.parsing import ParsedCall
    from callgate.checks.policies import violations

    loaded = load_suite(_suite(tmp_path, {"write_tools": "annotated",
                                          "confirm_before_write": True}))
    assert loaded.policies.write_tools == ("cancel_order", "change_address")
    calls = [ParsedCall(0, "lookup_order", {}, None), ParsedCall(1, "cancel_order", {}, None)]
    found = violations(loaded.policies_of(loaded.cases["a"]), calls)
    assert [(v.policy, v.reason.split(":")[0]) for v in found] == [
        ("confirm_before_write", "call 2 (cancel_order)")]


def test_write_tools_annotated_with_no_hints_is_refused(tmp_path: Path) -> None:
    plain = [{"type": "function", "function": {"name": "cancel_order"}}]
    with pytest.raises(InputError) as refused:
        load_suite(_suite(tmp_path, {"write_tools": "annotated", "confirm_before_write": True},
                          tools=plain))
    message = str(refused.value)
    assert "suite.json" in message and "policies.write_tools" in message
    assert "no tool of tools.json has annotations that say it writes" in message


def test_write_tools_annotated_is_for_suite_json_only(tmp_path: Path) -> None:
    with pytest.raises(InputError) as refused:
        load_suite(_suite(tmp_path, {"write_tools": ["cancel_order"]},
                          case_policies={"write_tools": "annotated"}))
    assert "cases.jsonl" in str(refused.value) and "write_tools" in str(refused.value)
