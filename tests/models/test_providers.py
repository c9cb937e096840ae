"""Request building, reply classification and pricing; and the proof that the lean client and
litellm produce the same Responses from the same server replies (and send the same bodies)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import KEY, KEY_ENV, lookup_case, marker, no_call_case, write_suite
from loopback import Loopback, Reply, completion, error, ok, tool_call

from callgate.errors import InputError
from callgate.models.config import Candidate
from callgate.models.lean import LeanClient
from callgate.models.litellm_client import LitellmClient
from callgate.models.pricing import Pricing
from callgate.models.replies import (
    ProviderFailure,
    RateLimits,
    classify_status,
    parse_rate_limits,
    parse_retry_after,
)
from callgate.models.replies import Reply as ModelReply
from callgate.models.retry import RetryPolicy
from callgate.models.routes import api_key, route_for
from callgate.running.run import LiveRunner
from callgate.running.settings import RunSettings
from callgate.store.db import Store
from callgate.suites.responses import parse_response
from callgate.suites.suite import load_suite

# --------------------------------------------------------------------------- building requests


def test_openrouter_target_and_body() -> None:
    candidate = Candidate(
        model="openrouter/openai/gpt-4o-mini",
        provider={"order": ["openai"], "allow_fallbacks": False},
        extra={"temperature": 0},
    )
    route = route_for(candidate)
    assert route.lean_url == "https://openrouter.ai/api/v1/chat/completions"
    assert route.key_env == "OPENROUTER_API_KEY"
    body = route.body([{"role": "user", "content": "hi"}], [{"type": "function"}])
    assert body == {
        "model": "openai/gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function"}],
        "reasoning_effort": "low",
        "provider": {"order": ["openai"], "allow_fallbacks": False, "require_parameters": True},
        "usage": {"include": True},
        "temperature": 0,
    }
    assert "tools" not in route.body([{"role": "user", "content": "hi"}], [])
    record = route.request_record("lean", body)
    assert record["api_key_env"] == "OPENROUTER_API_KEY" and record["body"] == body


def test_own_server_gets_no_openai_key_by_default() -> None:
    route = route_for(Candidate(model="openai/llama3", api_base="http://127.0.0.1:11434/v1/"))
    assert route.lean_url == "http://127.0.0.1:11434/v1/chat/completions"
    assert route.key_env is None
    assert route.served_by() == "127.0.0.1:11434"
    assert route_for(Candidate(model="openai/gpt-4o")).key_env == "OPENAI_API_KEY"
    assert (
        "reasoning_effort"
        not in route_for(Candidate(model="openai/x", reasoning_effort="omit")).params
    )


def test_routes_the_lean_client_cannot_serve_go_to_litellm() -> None:
    for model in ("anthropic/claude-sonnet-4-5", "hosted_vllm/x", "gpt-4o"):
        assert route_for(Candidate(model=model)).lean_url is None
    with pytest.raises(InputError, match="use client litellm"):
        LeanClient(route_for(Candidate(model="anthropic/claude-sonnet-4-5")), None, 1)


def test_cache_key_covers_the_request_and_the_repeat() -> None:
    messages, tools = [{"role": "user", "content": "hi"}], [{"type": "function"}]
    base = route_for(Candidate(model="openrouter/a/b"))
    key = base.cache_key(messages, tools, 0)
    assert key == base.cache_key(messages, tools, 0) and len(key) == 64
    others = [
        base.cache_key(messages, tools, 1),
        base.cache_key(messages, [], 0),
        base.cache_key([{"role": "user", "content": "hi!"}], tools, 0),
        route_for(Candidate(model="openrouter/a/c")).cache_key(messages, tools, 0),
        route_for(Candidate(model="openrouter/a/b", api_base="http://x")).cache_key(
            messages, tools, 0
        ),
        route_for(Candidate(model="openrouter/a/b", reasoning_effort="high")).cache_key(
            messages, tools, 0
        ),
    ]
    assert len({key, *others}) == 7


def test_the_key_comes_from_the_named_variable() -> None:
    route = route_for(Candidate(model="openrouter/a/b", api_key_env="MY_KEY"))
    assert api_key(route, {"MY_KEY": "k"}) == "k"
    with pytest.raises(InputError, match="MY_KEY is not set"):
        api_key(route, {})
    assert api_key(route_for(Candidate(model="openai/x", api_base="http://h")), {}) is None


def test_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < (parse_retry_after({"Retry-After": later}) or 0) <= 30
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_rate_limit_headers_in_each_providers_spelling() -> None:
    soon = datetime.now(UTC) + timedelta(seconds=30)
    # OpenAI: per-minute counts, the reset as a duration; token limits as a share.
    openai = parse_rate_limits({
        "x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "6m0.5s", "x-ratelimit-limit-tokens": "200000",
        "x-ratelimit-remaining-tokens": "150000", "x-ratelimit-reset-tokens": "20ms"})
    assert openai == RateLimits(499, 500, 0.75, 360.5)
    # OpenRouter: the reset as epoch milliseconds.
    epoch_ms = str(int(soon.timestamp() * 1000))
    openrouter = parse_rate_limits({"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "3",
                                    "X-RateLimit-Reset": epoch_ms})
    assert openrouter is not None and (openrouter.requests_left, openrouter.requests_limit) == (
        3, 20)
    assert 25 < (openrouter.reset or 0) <= 30
    # Anthropic: the reset as an RFC 3339 time, and the smallest token share of three.
    anthropic = parse_rate_limits({
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": soon.isoformat().replace("+00:00", "Z"),
        "anthropic-ratelimit-input-tokens-limit": "1000",
        "anthropic-ratelimit-input-tokens-remaining": "900",
        "anthropic-ratelimit-output-tokens-limit": "1000",
        "anthropic-ratelimit-output-tokens-remaining": "40"})
    assert anthropic is not None and anthropic.requests_left == 0
    assert anthropic.tokens_share == pytest.approx(0.04)
    assert 25 < (anthropic.reset or 0) <= 30
    # The IETF draft a gateway in front of vLLM sends: seconds, with a policy suffix.
    assert parse_rate_limits({"RateLimit-Limit": "100, 100;w=60", "RateLimit-Remaining": "7",
                              "RateLimit-Reset": "12"}) == RateLimits(7, 100, None, 12)
    # litellm's copies: the raw headers prefixed with llm_provider-.
    assert parse_rate_limits({"llm_provider-x-ratelimit-remaining-requests": "9",
                              "llm_provider-content-type": "application/json"}) == RateLimits(9)
    assert parse_rate_limits({"content-type": "application/json"}) is None
    assert parse_rate_limits({"x-ratelimit-remaining-requests": "lots"}) is None
    assert parse_rate_limits(None) is None


@pytest.mark.slow
def test_both_clients_read_the_rate_limit_headers(
    litellm_loaded: None, loopback: Loopback
) -> None:
    headers = {"x-ratelimit-limit-requests": "20", "x-ratelimit-remaining-requests": "4",
               "x-ratelimit-reset-requests": "800ms"}
    loopback.script("[ok]", Reply(body=completion(calls=[CALL]), headers=headers))
    loopback.script("[429]", Reply(status=429, body={"error": {"message": "slow down"}},
                                   headers={**headers, "x-ratelimit-remaining-requests": "0",
                                            "Retry-After": "1"}))
    candidate = Candidate(model="openai/m", api_base=loopback.base_url, api_key_env=KEY_ENV)
    target = route_for(candidate)

    async def both(mark: str) -> list[object]:
        body = target.body([{"role": "user", "content": f"{mark} hi"}], [])
        lean = LeanClient(target, KEY, 2)
        try:
            return [await lean.send(body, 5), await LitellmClient(target, KEY).send(body, 5)]
        finally:
            await lean.aclose()

    for answer in asyncio.run(both("[ok]")):
        assert isinstance(answer, ModelReply), answer
        assert answer.limits == RateLimits(4, 20, None, 0.8)
    for answer in asyncio.run(both("[429]")):
        assert isinstance(answer, ProviderFailure) and answer.kind == "rate_limit", answer
        assert answer.limits == RateLimits(0, 20, None, 0.8) and answer.retry_after == 1


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (429, "rate_limit", True),
        (500, "server_error", True),
        (503, "server_error", True),
        (408, "timeout", True),
        (401, "auth", False),
        (402, "payment", False),
        (403, "refused", False),
        (404, "not_found", False),
        (400, "bad_request", False),
    ],
)
def test_status_classes(status: int, kind: str, retryable: bool) -> None:
    assert classify_status(status) == kind
    assert ProviderFailure(kind, "").retryable is retryable


def test_cost_is_reported_or_unknown_never_zero() -> None:
    router = Pricing(route_for(Candidate(model="openrouter/a/b")))
    router.prepare()  # OpenRouter prices itself: no cost map, no litellm import
    assert router.cost(completion(cost=0.0021)) == 0.0021
    assert router.cost(completion(cost=None)) is None
    assert router.cost(completion(usage=False)) is None
    assert router.cost({"usage": {"cost": "0.1"}}) is None


@pytest.mark.slow
def test_litellm_cost_map_prices_listed_models_only(litellm_loaded: None) -> None:
    listed = Pricing(route_for(Candidate(model="openai/gpt-4o-mini")))
    listed.prepare()
    cost = listed.cost(completion(cost=None, model="gpt-4o-mini"))
    assert cost is not None and cost > 0
    local = Pricing(route_for(Candidate(model="openai/my-model", api_base="http://h/v1")))
    local.prepare()
    assert local.cost(completion(cost=None, model="gpt-4o-mini")) is None


# --------------------------------------------------------------------------- lean == litellm

CALL = tool_call("lookup_order", {"order_id": "ord_1"})
SCRIPT: dict[str, list[Reply]] = {
    "c-call": [ok(calls=[CALL])],
    "c-parallel": [
        ok(calls=[CALL, tool_call("lookup_order", {"order_id": "ord_2"}, "call_2")]),
    ],
    "c-text": [ok(content="Your order is on its way.")],
    "c-none": [ok(content="We open at nine.")],
    "c-cut": [ok(calls=[tool_call("lookup_order", '{"order_id": "ord')], finish_reason="length")],
    "c-nousage": [ok(calls=[CALL], usage=False, provider=None)],
    "c-badargs": [ok(calls=[tool_call("lookup_order", '{"order_id": ord_1}')])],
    "c-unicode": [ok(calls=[tool_call("lookup_order", {"order_id": "ord_1"})], content="Já ✓")],
    "c-wrong": [ok(calls=[tool_call("cancel_order", {"order_id": "ord_1", "reason": "other"})])],
    "c-429": [error(429, "slow down", **{"Retry-After": "0.1"}), ok(calls=[CALL])],
    "c-500": [error(500, "upstream broke"), ok(calls=[CALL])],
    "c-malformed": [Reply(raw='{"id": "x", "choices": [{"message": '), ok(calls=[CALL])],
    "c-400": [error(400, "tools[0] is not supported here")],
    "c-filter": [ok(content=None, finish_reason="content_filter")],
    "c-endturn": [ok(content="done", finish_reason="end_turn")],
    "c-nofinish": [
        Reply(
            body={
                **completion(content="hm"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hm"}}],
            }
        )
    ],
    "c-200error": [Reply(body={"error": {"code": 502, "message": "upstream"}}), ok(calls=[CALL])],
}
NO_CALL = {"c-none"}


@pytest.fixture(scope="module")
def litellm_loaded() -> None:
    from callgate.models.litellm_client import import_litellm

    import_litellm()


def _run_path(client: str, model: str, loopback: Loopback, tmp: Path) -> dict[str, Any]:
    loopback.reset()
    for case_id, replies in SCRIPT.items():
        loopback.script(marker(case_id), *replies)
    cases = [no_call_case(c) if c in NO_CALL else lookup_case(c) for c in SCRIPT]
    suite = load_suite(write_suite(tmp / "suite", cases))
    candidate = Candidate(
        model=model,
        api_base=loopback.base_url,
        api_key_env=KEY_ENV,
        client=client,
        provider={"order": ["loopback"], "allow_fallbacks": False}
        if model.startswith("openrouter/")
        else None,
    )
    settings = RunSettings(
        repeats=1, concurrency=4, timeout=5, retry=RetryPolicy(base_delay=0.01), progress=False
    )
    with Store(tmp / f"{client}.db") as store:
        runner = LiveRunner(suite, candidate, store, "r", settings=settings, environ={KEY_ENV: KEY})
        live = asyncio.run(runner.run())
        rows = list(store.db.query("SELECT case_id, body FROM responses"))
    responses = {
        row["case_id"]: parse_response(json.loads(row["body"])).model_dump(exclude={"latency_ms"})
        for row in rows
    }
    wire: dict[str, list[Any]] = {}
    for seen in loopback.requests:
        wire.setdefault(seen.marker.split("]")[0] + "]", []).append(seen.body)
    return {
        "live": live,
        "responses": responses,
        "verdicts": {v.case_id: v for v in live.result.verdicts},
        "wire": wire,
        "auth": {seen.headers.get("Authorization") for seen in loopback.requests},
    }


@pytest.mark.slow
@pytest.mark.parametrize("model", ["openrouter/test/model", "openai/test-model"])
def test_lean_and_litellm_give_identical_responses(
    litellm_loaded: None, loopback: Loopback, tmp_path: Path, model: str
) -> None:
    lean = _run_path("lean", model, loopback, tmp_path / "lean")
    slow = _run_path("litellm", model, loopback, tmp_path / "litellm")
    assert lean["live"].client == "lean" and slow["live"].client == "litellm"
    assert set(lean["responses"]) == set(SCRIPT)
    for case_id in SCRIPT:
        assert lean["responses"][case_id] == slow["responses"][case_id], case_id
        assert lean["verdicts"][case_id] == slow["verdicts"][case_id], case_id
    # The same body went over the wire, with the same key.
    assert lean["wire"] == slow["wire"]
    assert lean["auth"] == slow["auth"] == {f"Bearer {KEY}"}
    # Spot checks of what both produced.
    got = lean["responses"]
    if model.startswith("openrouter/"):
        assert got["c-call"]["provider"] == "Loopback" and got["c-call"]["cost"] == 0.000125
        assert got["c-nousage"]["cost"] is None and got["c-nousage"]["provider"] is None
    else:
        assert got["c-nousage"]["provider"] == f"127.0.0.1:{loopback.port}"
    verdicts = lean["verdicts"]
    assert verdicts["c-call"].right_arguments
    assert verdicts["c-parallel"].tool == "extra_call" or not verdicts["c-parallel"].right_tool
    assert verdicts["c-text"].tool == "missing_call"
    assert verdicts["c-none"].right_tool
    assert verdicts["c-cut"].status == "truncated"
    assert verdicts["c-badargs"].arguments == "invalid_json"
    assert verdicts["c-wrong"].tool == "wrong_tool"
    assert verdicts["c-429"].right_arguments and verdicts["c-500"].right_arguments
    assert verdicts["c-malformed"].right_arguments and verdicts["c-200error"].right_arguments
    assert got["c-400"]["error"] == {
        "kind": "bad_request",
        "message": "tools[0] is not supported here",
        "status": 400,
    }
    assert verdicts["c-400"].status == "provider_error"
    assert verdicts["c-filter"].status == "provider_error"
    assert got["c-filter"]["error"]["kind"] == "refused"
    assert got["c-endturn"]["finish_reason"] == "stop"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        (error(401, f"invalid key {KEY}"), "auth", 401),
        (error(403, "flagged by moderation"), "refused", 403),
        (error(404, "no endpoints found"), "not_found", 404),
        (error(429, "slow down", **{"Retry-After": "7"}), "rate_limit", 429),
        (error(503, "overloaded"), "server_error", 503),
        (Reply(raw="<html>bad gateway</html>", status=502), "server_error", 502),
        (Reply(raw='{"choices": [', status=200), "bad_response", 200),
        (Reply(body=completion(calls=[CALL])), "timeout", None),  # held past the deadline
    ],
)
def test_both_clients_classify_failures_alike(
    litellm_loaded: None, loopback: Loopback, reply: Reply, kind: str, status: int | None
) -> None:
    held = threading.Event()  # the timeout case's reply comes only after both have given up
    loopback.script("[x]", replace(reply, hold=held) if kind == "timeout" else reply)
    candidate = Candidate(model="openrouter/t/m", api_base=loopback.base_url, api_key_env=KEY_ENV)
    route = route_for(candidate)
    body = route.body([{"role": "user", "content": "[x] hi"}], [])
    # A short deadline only where it is what is tested: elsewhere a loaded machine must not
    # turn the answer into a timeout.
    deadline = 0.4 if kind == "timeout" else 60

    async def both() -> list[object]:
        lean = LeanClient(route, KEY, 2)
        try:
            return [await lean.send(body, deadline),
                    await LitellmClient(route, KEY).send(body, deadline)]
        finally:
            await lean.aclose()

    try:
        results = asyncio.run(both())
    finally:
        held.set()
    for result in results:
        assert isinstance(result, ProviderFailure), result
        assert (result.kind, result.status) == (kind, status)
        assert KEY not in result.message
    lean, slow = results
    assert lean.retry_after == slow.retry_after
    if kind == "auth":  # the key echoed back is masked by both (litellm masks it itself too)
        assert lean.message == "invalid key [redacted]"
        assert "REDACTED" in slow.message.upper()
    elif status is not None and status not in (200, 502):
        assert lean.message == slow.message


def test_connection_refused_is_a_connection_failure(litellm_loaded: None) -> None:
    candidate = Candidate(
        model="openrouter/t/m", api_base=f"http://127.0.0.1:{_closed_port()}/v1", api_key_env="K"
    )
    route = route_for(candidate)
    body = route.body([{"role": "user", "content": "hi"}], [])

    async def both() -> list[object]:
        lean = LeanClient(route, "k", 1)
        try:
            return [await lean.send(body, 2), await LitellmClient(route, "k").send(body, 2)]
        finally:
            await lean.aclose()

    for result in asyncio.run(both()):
        assert isinstance(result, ProviderFailure) and result.kind == "connection"
        assert result.retryable
