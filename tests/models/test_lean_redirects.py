"""The lean client and redirects: a 3xx off the endpoint's origin is never followed (the API key
in the Authorization header goes to the named origin only), one on the origin is re-POSTed at
most MAX_REDIRECTS times, and a refused redirect is a `bad_response` provider fault that is not
asked again, whose one-line message never holds the key. Two loopback servers on 127.0.0.1:
different ports are different origins."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import KEY, KEY_ENV, lookup_case, marker, write_suite
from loopback import Loopback, Reply, ok, tool_call

from callgate.models.bounded import MAX_REDIRECTS
from callgate.models.config import Candidate
from callgate.models.lean import LeanClient
from callgate.models.replies import ProviderFailure
from callgate.models.replies import Reply as ModelReply
from callgate.models.retry import RetryPolicy
from callgate.models.routes import route_for
from callgate.running.run import LiveRunner
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.suite import load_suite

BODY = {"model": "x", "messages": [{"role": "user", "content": "[r] hi"}]}


@pytest.fixture
def servers() -> Iterator[tuple[Loopback, Loopback]]:
    with Loopback() as named, Loopback() as other:
        yield named, other


def _send(base: str, key: str | None = KEY) -> ModelReply | ProviderFailure:
    client = LeanClient(route_for(Candidate(model="openai/x", api_base=base)), key, 1)

    async def go() -> ModelReply | ProviderFailure:
        try:
            return await client.send(BODY, 5)
        finally:
            await client.aclose()

    return asyncio.run(go())


def _redirect(to: str, status: int = 307) -> Reply:
    return Reply(status=status, headers={"Location": to})


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_not_followed(
        servers: tuple[Loopback, Loopback], status: int) -> None:
    named, other = servers
    named.script("[r]", _redirect(f"{other.base_url}/chat/completions?k={KEY}", status))
    got = _send(named.base_url)
    assert isinstance(got, ProviderFailure)
    assert other.requests == []  # no request, so no Authorization header, reached it
    assert len(named.requests) == 1
    assert named.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    assert got.kind == "bad_response" and got.retryable is False
    assert f"answered HTTP {status}" in got.message
    assert "off the endpoint's origin" in got.message
    assert KEY not in got.message and "\n" not in got.message


def test_another_scheme_or_host_is_another_origin(servers: tuple[Loopback, Loopback]) -> None:
    named, _ = servers
    for location in (named.base_url.replace("http://", "https://"),
                     named.base_url.replace("127.0.0.1", "localhost")):
        named.reset()
        named.script("[r]", _redirect(location + "/chat/completions"))
        got = _send(named.base_url)
        assert isinstance(got, ProviderFailure) and "off the endpoint's origin" in got.message
        assert len(named.requests) == 1


def test_a_redirect_on_the_origin_is_followed_with_the_same_post(
        servers: tuple[Loopback, Loopback]) -> None:
    named, other = servers
    # A relative Location on the same server: re-POSTed, body and key included.
    named.script("[r]", _redirect("/moved/chat/completions"),
                 ok(calls=[tool_call("lookup_order", {"order_id": "ord_1"})]))
    got = _send(named.base_url)
    assert isinstance(got, ModelReply)
    assert [seen.path for seen in named.requests] == ["/api/v1/chat/completions",
                                                     "/moved/chat/completions"]
    assert named.requests[1].body == BODY
    assert named.requests[1].headers["Authorization"] == f"Bearer {KEY}"
    assert other.requests == []


def test_a_redirect_on_the_origin_that_then_leaves_it_stops_there(
        servers: tuple[Loopback, Loopback]) -> None:
    named, other = servers
    named.script("[r]", _redirect("/hop/chat/completions"),
                 _redirect(f"{other.base_url}/chat/completions"))
    got = _send(named.base_url)
    assert isinstance(got, ProviderFailure) and "off the endpoint's origin" in got.message
    assert len(named.requests) == 2 and other.requests == []


def test_redirects_stop_after_a_few_hops(servers: tuple[Loopback, Loopback]) -> None:
    named, _ = servers
    named.script("[r]", _redirect("/again/chat/completions"))  # for ever, on its own origin
    got = _send(named.base_url)
    assert isinstance(got, ProviderFailure)
    assert got.message.endswith(f"more than {MAX_REDIRECTS} redirects")
    assert got.retryable is False
    assert len(named.requests) == MAX_REDIRECTS + 1


def test_a_redirect_without_location_is_refused(servers: tuple[Loopback, Loopback]) -> None:
    named, _ = servers
    named.script("[r]", Reply(status=302))
    got = _send(named.base_url)
    assert isinstance(got, ProviderFailure) and got.message.endswith("with no Location")


def test_a_run_records_a_provider_error_and_never_asks_again(
        servers: tuple[Loopback, Loopback], tmp_path: Path) -> None:
    named, other = servers
    named.script(marker("c1"), _redirect(f"{other.base_url}/chat/completions"))
    suite = load_suite(write_suite(tmp_path / "suite", [lookup_case("c1")]))
    candidate = Candidate(model="openai/x", api_base=named.base_url, api_key_env=KEY_ENV,
                          client="lean")
    settings = RunSettings(repeats=1, concurrency=1, timeout=5,
                           retry=RetryPolicy(base_delay=0.01), progress=False)
    with Store(tmp_path / "s.db") as store:
        runner = LiveRunner(suite, candidate, store, "r", settings=settings,
                            environ={KEY_ENV: KEY})
        asyncio.run(runner.run())
        rows = list(store.db.query("SELECT body FROM responses"))
    assert len(named.requests) == 1  # not retried: the same redirect would come back
    assert other.requests == []
    [row] = rows
    error = json.loads(row["body"])["error"]
    assert error["kind"] == "bad_response"
    assert "off the endpoint's origin" in error["message"]
    assert KEY not in row["body"]
