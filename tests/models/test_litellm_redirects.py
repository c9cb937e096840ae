"""litellm's routes and redirects: a 3xx is never followed (httpx drops Authorization off the
origin, but not x-api-key or x-goog-api-key, which Anthropic's and Gemini's routes send), so
the key reaches the named server only; the refused redirect is a provider fault, never the
model's mistake, and its message holds no key. Real aiohttp servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from callgate.models.config import Candidate
from callgate.models.replies import ProviderFailure
from callgate.models.routes import route_for

KEY = "sk-ant-test-5ecret-0123456789abcdef"


async def _redirected(model: str) -> tuple[Any, list[dict[str, str]], list[str]]:
    from aiohttp import web

    from callgate.models.litellm_client import LitellmClient

    seen_there: list[dict[str, str]] = []
    asked_here: list[str] = []

    async def there(request: web.Request) -> web.Response:
        seen_there.append(dict(request.headers))
        return web.json_response({"error": "should never be asked"})

    async def start(handler: Any) -> tuple[web.AppRunner, str]:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"

    other, other_base = await start(there)

    async def here(request: web.Request) -> web.Response:
        await request.read()
        asked_here.append(request.path)
        raise web.HTTPTemporaryRedirect(location=f"{other_base}{request.path_qs}")

    named, named_base = await start(here)
    client = LitellmClient(route_for(Candidate(model=model, api_base=f"{named_base}/v1",
                                               client="litellm")), KEY)
    try:
        got = await client.send({"model": model, "max_tokens": 10,
                                 "messages": [{"role": "user", "content": "hi"}]}, 20)
    finally:
        await client.aclose()
        await named.cleanup()
        await other.cleanup()
    return got, seen_there, asked_here


@pytest.mark.slow  # imports litellm (seconds)
@pytest.mark.parametrize("model", ["anthropic/claude-x", "gemini/g", "openrouter/a/b"])
def test_a_redirect_is_not_followed_and_the_key_stays_with_the_named_server(model: str) -> None:
    got, seen_there, asked_here = asyncio.run(_redirected(model))
    assert asked_here  # the named server was asked
    assert seen_there == []  # no request, so no key header, reached the other origin
    assert isinstance(got, ProviderFailure), got
    assert KEY not in got.message and "\n" not in got.message
