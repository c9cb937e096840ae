"""Replies read up to a cap wherever callgate reads them: an MCP server's stdout a line at a
time (suites.mcp_tools.LINE_LIMIT; the SDK's reader has no bound of its own), the lean client's
reply body (models.bounded.REPLY_LIMIT), and litellm's. A reply over the cap is a provider or
environment fault that is not asked again, never the model's mistake, and reading stops there.
Real subprocesses and real loopback servers; the caps are lowered so the tests send megabytes,
not the 64 MiB of the default."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import sys
import textwrap
from pathlib import Path

import pytest
from loopback import Loopback, ok

from callgate.models import bounded
from callgate.models.config import Candidate
from callgate.models.lean import LeanClient
from callgate.models.replies import ProviderFailure
from callgate.models.replies import Reply as ModelReply
from callgate.models.routes import route_for
from callgate.suites.mcp_tools import LINE_LIMIT, McpFailure, McpServer

# An MCP server without the SDK: tools/call `big` answers with a text of argv[1] bytes,
# `endless` writes bytes with no newline until it is killed, `small` answers "ok".
SERVER = textwrap.dedent('''
    import json, sys
    size = int(sys.argv[1])
    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n")
        sys.stdout.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue
        method = request["method"]
        if method == "initialize":
            result = {"protocolVersion": request["params"]["protocolVersion"],
                      "capabilities": {"tools": {}}, "serverInfo": {"name": "big", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": n, "inputSchema": {"type": "object"}}
                                for n in ("big", "endless", "small")]}
        elif request["params"]["name"] == "endless":
            while True:
                sys.stdout.write("x" * 65536)
        else:
            text = "x" * size if request["params"]["name"] == "big" else "ok"
            result = {"content": [{"type": "text", "text": text}]}
        send({"jsonrpc": "2.0", "id": request["id"], "result": result})
''')
MIB = 1 << 20


def _server(tmp_path: Path, size: int) -> list[str]:
    script = tmp_path / "big_server.py"
    script.write_text(SERVER)
    return [sys.executable, str(script), str(size)]


def test_the_default_line_cap_is_the_reply_cap() -> None:
    assert LINE_LIMIT == bounded.REPLY_LIMIT


@pytest.mark.slow
def test_an_mcp_reply_under_the_cap_is_read_whole(tmp_path: Path) -> None:
    with McpServer(_server(tmp_path, MIB), timeout=30, line_limit=2 * MIB) as server:
        assert len(server.call_tool("big", {}).text) == MIB
        assert server.call_tool("small", {}).text == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["big", "endless"])
def test_an_mcp_line_over_the_cap_stops_reading(tmp_path: Path, tool: str) -> None:
    with McpServer(_server(tmp_path, 3 * MIB), timeout=30, line_limit=MIB) as server:
        assert server.call_tool("small", {}).text == "ok"
        with pytest.raises(McpFailure) as failure:
            server.call_tool(tool, {})
        message = str(failure.value)
        assert message.startswith(f"tools/call {tool}: the server wrote a line over 1 MiB")
        assert message.endswith("reading stopped there")
        # The session is over: asking again says why at once, without waiting for a timeout.
        with pytest.raises(McpFailure, match="over 1 MiB"):
            server.call_tool("small", {})


# --------------------------------------------------------------------------- the lean client


def _send(base: str) -> ModelReply | ProviderFailure:
    client = LeanClient(route_for(Candidate(model="openai/x", api_base=base)), None, 1)

    async def go() -> ModelReply | ProviderFailure:
        try:
            return await client.send({"model": "x", "messages": []}, 10)
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_a_lean_reply_over_the_cap_is_a_provider_fault_not_asked_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded, "REPLY_LIMIT", MIB)
    with Loopback() as server:
        server.script("", ok(content="x" * (2 * MIB)))
        got = _send(server.base_url)
    assert isinstance(got, ProviderFailure)
    assert got.kind == "bad_response" and "the reply is over 1 MiB" in got.message
    # Before, a bad_response was asked again (RETRYABLE) although the docs said it was not.
    assert got.retryable is False


# --------------------------------------------------------------------------- litellm

BIG_TEXT = "x" * (2 * MIB)


def _completion(text: str) -> dict:
    return {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            # Anthropic's shape beside it, for anthropic/...
            "type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": text}]}


async def _litellm_against(model: str, reply: str, key: str | None = "k"
                           ) -> tuple[ModelReply | ProviderFailure, list[str]]:
    """litellm's client against a real aiohttp server on 127.0.0.1 that answers `reply`:
    `small`, `big` (2 MiB), `gzip` (2 MiB inflated from about 2 KB) or `endless` (chunks
    until the client stops reading)."""
    from aiohttp import web

    from callgate.models.litellm_client import LitellmClient

    paths: list[str] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        paths.append(request.path)
        if reply == "endless":
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            with contextlib.suppress(ConnectionError):
                while True:
                    await response.write(b"x" * 65536)
            return response
        body = json.dumps(_completion(BIG_TEXT if reply in ("big", "gzip") else "hi")).encode()
        if reply == "gzip":
            return web.Response(body=gzip.compress(body), content_type="application/json",
                                headers={"Content-Encoding": "gzip"})
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    client = LitellmClient(route_for(Candidate(model=model, api_base=base, client="litellm")), key)
    try:
        got = await client.send({"model": model, "messages": [{"role": "user", "content": "hi"}],
                                 "max_tokens": 10}, 20)
    finally:
        await client.aclose()
        await runner.cleanup()
    return got, paths


@pytest.fixture
def one_mib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded, "REPLY_LIMIT", MIB)


@pytest.mark.slow  # imports litellm (seconds)
@pytest.mark.usefixtures("one_mib")
@pytest.mark.parametrize("model", ["openrouter/a/b", "anthropic/claude-x", "gemini/g"])
@pytest.mark.parametrize("reply", ["big", "gzip", "endless"])
def test_a_litellm_reply_over_the_cap_is_a_provider_fault_not_asked_again(
        model: str, reply: str) -> None:
    got, paths = asyncio.run(_litellm_against(model, reply))
    assert paths  # the request reached the server: the transport sent it
    assert isinstance(got, ProviderFailure), got
    assert got.kind == "bad_response" and got.retryable is False
    assert got.message == "the reply is over 1 MiB (after decompression): reading stopped there"


@pytest.mark.slow
@pytest.mark.usefixtures("one_mib")
def test_a_litellm_reply_under_the_cap_is_read() -> None:
    got, _ = asyncio.run(_litellm_against("openrouter/a/b", "small"))
    assert isinstance(got, ModelReply)
    assert got.body["choices"][0]["message"]["content"] == "hi"
