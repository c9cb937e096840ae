"""Every litellm route callgate bounds (models.litellm_routes.BOUNDED_ROUTES) reaches its
transport: a reply over the cap is the `bad_response` provider fault `the reply is over ...`,
not asked again, never the model's mistake; and a 307 or 302 to another origin is not
followed, so no request (and no key header: Authorization, x-api-key, api-key) reaches the
other server. A route callgate does not bound says so in one line on stderr when its client is
made. Real aiohttp servers on 127.0.0.1; the cap is lowered to 1 MiB."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY_ENV, lookup_case, no_call_case
from conftest import write_suite as write_cli_suite
from loopback import Loopback

from callgate.models import bounded, litellm_routes
from callgate.models.config import Candidate
from callgate.models.replies import ProviderFailure
from callgate.models.replies import Reply as ModelReply
from callgate.models.routes import route_for

MIB = 1 << 20
KEY = "sk-test-routes-5ecret-0123456789abcdef"  # never printed: only booleans are asserted
# One model per bounded route; litellm sends each its own way (models/litellm_routes.py).
HANDLER_MODELS = ["anthropic/claude-x", "openrouter/a/b", "gemini/g", "deepseek/d",
                  "fireworks_ai/f", "together_ai/t", "xai/x", "groq/g", "mistral/m",
                  "hosted_vllm/h", "ollama/o", "ollama_chat/o", "databricks/d",
                  "huggingface/h", "azure_ai/a", "bedrock/anthropic.claude-3-sonnet-20240229-v1:0",
]
SDK_MODELS = ["openai/o", "custom_openai/x", "perplexity/p", "deepinfra/d", "cerebras/c",
              "nvidia_nim/n", "sambanova/Meta-Llama-3.3-70B-Instruct", "nebius/n",
              "lm_studio/l", "vercel_ai_gateway/v", "azure/a"]
MODELS = HANDLER_MODELS + SDK_MODELS
LOOKUP = {"type": "function", "function": {
    "name": "lookup", "description": "Look an order up.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}


def _body(text: str) -> bytes:
    """A completion in the shapes the routes read (OpenAI's, Anthropic's, Gemini's, Ollama's,
    Bedrock's)."""
    message = {"role": "assistant", "content": text}
    return json.dumps({
        "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2,
                  "inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "type": "message", "role": "assistant", "stop_reason": "end_turn",
        "content": [{"type": "text", "text": text}], "message": message, "response": text,
        "done": True, "service_tier": "on_demand",
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1,
                          "totalTokenCount": 2},
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn"}).encode()


class Seen:
    """What the two servers saw, as counts and flags only (the key is never kept)."""

    def __init__(self) -> None:
        self.named = 0
        self.named_with_key = 0
        self.other = 0
        self.other_with_key = 0


def _carries_key(headers: Any, query: str) -> bool:
    return any(KEY in value for value in headers.values()) or KEY in query


async def _against(model: str, reply: str) -> tuple[Any, Seen]:
    """callgate's litellm client for `model` against a server on 127.0.0.1 that answers
    `reply`: `small`, `big` (2 MiB), `gzip` (2 MiB inflated from a few KB), `endless` (chunks until
    the client stops reading), or `307` / `302` to a second server on another port."""
    from aiohttp import web

    from callgate.models.litellm_client import LitellmClient

    seen = Seen()

    async def other(request: web.Request) -> web.Response:
        await request.read()
        seen.other += 1
        seen.other_with_key += _carries_key(request.headers, request.query_string)
        return web.Response(body=_body("from the other server"), content_type="application/json")

    async def named(request: web.Request) -> web.StreamResponse:
        await request.read()
        seen.named += 1
        seen.named_with_key += _carries_key(request.headers, request.query_string)
        if reply in ("307", "302"):
            status = web.HTTPTemporaryRedirect if reply == "307" else web.HTTPFound
            raise status(location=f"{other_base}{request.path_qs}")
        if reply == "endless":
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            with contextlib.suppress(ConnectionError):
                while True:
                    await response.write(b"x" * 65536)
            return response
        body = _body("hi" if reply == "small" else "x" * (2 * MIB))
        if reply == "gzip":
            return web.Response(body=gzip.compress(body), content_type="application/json",
                                headers={"Content-Encoding": "gzip"})
        return web.Response(body=body, content_type="application/json")

    async def start(handler: Any) -> tuple[web.AppRunner, str]:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"

    other_runner, other_base = await start(other)
    named_runner, named_base = await start(named)
    route = route_for(Candidate(model=model, api_base=f"{named_base}/v1", client="litellm"))
    client = LitellmClient(route, KEY)
    try:
        body: dict[str, Any] = {"model": model, "max_tokens": 10,
                                "messages": [{"role": "user", "content": "hi"}]}
        if not model.startswith("perplexity/"):  # litellm refuses tools on perplexity's route
            body["tools"] = [LOOKUP]  # as a run sends them (and litellm's bridge check reads)
        got = await client.send(body, 20)
    finally:
        await client.aclose()
        await named_runner.cleanup()
        await other_runner.cleanup()
    return got, seen


@pytest.fixture
def one_mib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded, "REPLY_LIMIT", MIB)


@pytest.fixture
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No key or endpoint of the developer's environment is read instead of the test's; fake
    AWS credentials keep litellm's Bedrock route from looking any up."""
    for name, value in (("AWS_REGION_NAME", "us-east-1"), ("AWS_ACCESS_KEY_ID", "AKIAFAKE"),
                        ("AWS_SECRET_ACCESS_KEY", "fake")):
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK",
                 "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "AZURE_API_KEY",
                 "AZURE_OPENAI_API_KEY", "AZURE_API_BASE", "AZURE_API_VERSION",
                 "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"):
        monkeypatch.delenv(name, raising=False)
    yield


def test_every_bounded_route_is_tested_here() -> None:
    tested = {model.partition("/")[0] for model in MODELS}
    assert tested == litellm_routes.BOUNDED_ROUTES


@pytest.mark.slow  # imports litellm (seconds)
@pytest.mark.usefixtures("one_mib", "no_provider_env")
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("reply", ["big", "gzip"])
def test_a_reply_over_the_cap_on_every_bounded_route_is_a_provider_fault(
        model: str, reply: str) -> None:
    got, seen = asyncio.run(_against(model, reply))
    assert seen.named == 1  # the request reached the server through the transport, once
    assert isinstance(got, ProviderFailure), type(got)
    assert got.kind == "bad_response" and got.retryable is False
    assert got.message == "the reply is over 1 MiB (after decompression): reading stopped there"


@pytest.mark.slow
@pytest.mark.usefixtures("one_mib", "no_provider_env")
@pytest.mark.parametrize("model", MODELS)
def test_a_reply_under_the_cap_on_every_bounded_route_is_read(model: str) -> None:
    got, seen = asyncio.run(_against(model, "small"))
    assert seen.named == 1 and seen.named_with_key == 1
    assert isinstance(got, ModelReply), got
    assert "hi" in json.dumps(got.body["choices"][0]["message"])


@pytest.mark.slow
@pytest.mark.usefixtures("one_mib", "no_provider_env")
@pytest.mark.parametrize("model", ["openai/o", "azure/a", "deepseek/d", "mistral/m"])
def test_an_endless_reply_stops_at_the_cap(model: str) -> None:
    got, _ = asyncio.run(_against(model, "endless"))
    assert isinstance(got, ProviderFailure), type(got)
    assert got.kind == "bad_response" and got.retryable is False
    assert got.message.startswith("the reply is over 1 MiB")


@pytest.mark.slow
@pytest.mark.usefixtures("no_provider_env")
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("status", ["307", "302"])
def test_a_redirect_on_every_bounded_route_is_not_followed(model: str, status: str) -> None:
    got, seen = asyncio.run(_against(model, status))
    assert seen.named == 1 and seen.named_with_key == 1  # the key went to the named server
    assert seen.other == 0 and seen.other_with_key == 0  # and nothing to the other origin
    assert isinstance(got, ProviderFailure), type(got)
    leaked = KEY in got.message
    assert not leaked, "the key is in the failure's message"
    assert "\n" not in got.message


@pytest.mark.slow
@pytest.mark.usefixtures("no_provider_env")
def test_an_unbounded_route_says_so_once_when_its_client_is_made(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from callgate.models.litellm_client import LitellmClient

    monkeypatch.setattr(litellm_routes, "_warned", set())
    for _ in range(2):
        LitellmClient(route_for(Candidate(model="cohere/command-r", client="litellm")), KEY)
    LitellmClient(route_for(Candidate(model="deepseek/d", client="litellm")), KEY)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "warning: cohere/command-r: litellm's cohere route is not bounded by callgate: its "
        "replies are not capped at 64 MiB and redirects follow litellm's defaults "
        "(docs/targets.md)"]


@pytest.mark.slow
@pytest.mark.usefixtures("no_provider_env")
def test_azure_without_a_key_callgate_can_use_says_it_is_unbounded(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from callgate.models.litellm_client import LitellmClient

    monkeypatch.setattr(litellm_routes, "_warned", set())
    client = LitellmClient(route_for(Candidate(model="azure/a", api_base="http://127.0.0.1:9",
                                               client="litellm")), None)
    assert capsys.readouterr().err == ""  # azure is bounded when its client can be made
    assert client._bounded_client() is None  # no key: Azure AD is left to litellm
    assert "litellm's azure route is not bounded" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.usefixtures("one_mib", "no_provider_env")
def test_a_request_litellm_bridges_to_the_responses_api_says_it_is_unbounded(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # litellm's async bridge drops the `client` it is given: gpt-5-codex's cost-map mode is
    # `responses`, so its requests are read as litellm reads them, and the run says so.
    monkeypatch.setattr(litellm_routes, "_warned", set())
    asyncio.run(_against("openai/o", "small"))
    assert capsys.readouterr().err == ""
    asyncio.run(_against("openai/gpt-5-codex", "small"))
    assert capsys.readouterr().err.splitlines() == [
        "warning: openai/gpt-5-codex: litellm sends this model's requests to the Responses "
        "API, which callgate does not bound: its replies are not capped at 1 MiB and "
        "redirects follow litellm's defaults (docs/targets.md)"]


@pytest.mark.slow
@pytest.mark.usefixtures("one_mib", "no_provider_env")
@pytest.mark.parametrize("reply", ["big", "307"])
def test_the_openai_routes_stay_bounded_on_litellms_http_handler_switch(
        monkeypatch: pytest.MonkeyPatch, reply: str) -> None:
    # With EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER litellm sends openai/... through its HTTP
    # handler, which takes an AsyncHTTPHandler, not an openai SDK client.
    monkeypatch.setenv("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER", "true")
    got, seen = asyncio.run(_against("openai/o", reply))
    assert seen.named == 1 and seen.other == 0
    assert isinstance(got, ProviderFailure), type(got)
    if reply == "big":
        assert got.message.startswith("the reply is over 1 MiB")


@pytest.mark.slow
@pytest.mark.parametrize(("model", "warned"), [("cohere/command-r", True), ("deepseek/d", False)])
def test_a_run_on_an_unbounded_route_warns_once_at_its_start(
        loopback: Loopback, tmp_path: Path, callgate_exe: str, cli_env: dict[str, str],
        model: str, warned: bool) -> None:
    root = write_cli_suite(tmp_path / "suite", [lookup_case("one"), no_call_case("two")])
    done = subprocess.run(
        [callgate_exe, "run", str(root), "-m", model, "--client", "litellm", "--api-base",
         loopback.base_url, "--api-key-env", KEY_ENV, "--no-cache", "--db", "c.db", "--json"],
        env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    expected = [f"warning: {model}: litellm's cohere route is not bounded by callgate: its "
                "replies are not capped at 64 MiB and redirects follow litellm's defaults "
                "(docs/targets.md)"]
    assert lines == (expected if warned else []), done.returncode
    # deepseek's requests reached the loopback (through callgate's bounded client); litellm's
    # cohere route refuses their reasoning_effort before sending, after the warning.
    assert bool(loopback.requests) is not warned
