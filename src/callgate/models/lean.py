"""The lean client: a plain aiohttp POST to an OpenAI-compatible chat-completions endpoint
(`openrouter/...`, `openai/...`, and any `openai/...` model with an api_base such as vLLM or
Ollama). It sends the same body litellm sends for these routes and reads the replies the same
way, finish_reason normalisation included, at a fraction of the CPU; tests run both clients
against one server and compare. A redirect is followed only on the endpoint's own origin
(models.bounded: the API key is never sent to another host), and a reply is read up to
REPLY_LIMIT; either refusal is a `bad_response` provider fault that is not asked again.
aiohttp is imported inside the methods that send, so scoring recorded answers never loads it.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from callgate.errors import InputError
from callgate.models.bounded import (
    REDIRECTS,
    RedirectRefused,
    ReplyTooLarge,
    read_body,
    redirect_target,
)
from callgate.models.config import FLAGS
from callgate.models.replies import (
    ProviderFailure,
    Reply,
    classify_status,
    error_message,
    ms_since,
    parse_rate_limits,
    parse_retry_after,
    shorten,
    timeout_message,
)
from callgate.models.routes import LEAN_BASES, ModelRoute
from callgate.reading import loads
from callgate.redaction import clean, without_secrets

if TYPE_CHECKING:  # imported where a request is sent: scoring recorded answers never needs it
    import aiohttp


# litellm's finish_reason normalisation (litellm_core_utils.core_helpers.map_finish_reason) for
# the values OpenAI-compatible servers send; anything else becomes "stop", as in litellm.
FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "function_call": "function_call",
    "stop_sequence": "stop",
    "end_turn": "stop",
    "eos": "stop",
    "eos_token": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


class LeanClient:
    """aiohttp straight to an OpenAI-compatible /chat/completions endpoint."""

    name = "lean"

    def __init__(self, route: ModelRoute, key: str | None, concurrency: int) -> None:
        if route.lean_url is None:
            raise InputError(
                FLAGS,
                f"client lean: {route.model} is not an OpenAI-compatible route callgate calls "
                f"directly ({', '.join(f'{r}/...' for r in LEAN_BASES)}); use client litellm",
            )
        self._url = route.lean_url
        self._key = key
        self._limit = concurrency
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._limit, ttl_dns_cache=300),
                raise_for_status=False,
            )
        return self._session

    async def send(self, body: dict[str, Any], timeout: float) -> Reply | ProviderFailure:
        import aiohttp

        session = self._open()
        data = json.dumps(body, ensure_ascii=False).encode()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):  # every hop of a redirect inside one timeout
                status, headers, raw = await self._post(session, data, timeout)
        except (ReplyTooLarge, RedirectRefused) as exc:
            # Provider or config faults, not the model's: asking again fetches the same.
            message = clean(f"{self._url}: {exc}", [self._key])
            return ProviderFailure("bad_response", shorten(message), latency_ms=ms_since(started),
                                   final=True)
        except TimeoutError:
            return ProviderFailure("timeout", timeout_message(timeout),
                                   latency_ms=ms_since(started))
        except aiohttp.ClientError as exc:
            message = clean(f"{type(exc).__name__}: {exc}", [self._key])
            return ProviderFailure("connection", shorten(message), latency_ms=ms_since(started))
        latency = ms_since(started)
        text = raw.decode("utf-8", errors="replace")
        if self._key and self._key in text:
            text = without_secrets(text, [self._key])
        try:
            payload = loads(text, constants=True)  # NaN costs are cleaned in reply_line
        except ValueError as exc:  # not JSON, or nested too deep to read
            if status >= 400:
                return self._status_failure(status, text, headers, latency)
            return ProviderFailure(
                "bad_response",
                shorten(f"the body is not valid JSON ({exc}): {text}"),
                status=status,
                latency_ms=latency,
            )
        if status >= 400:
            return self._status_failure(status, payload, headers, latency)
        if not isinstance(payload, dict):
            return ProviderFailure(
                "bad_response", shorten(f"not a JSON object: {text}"), status, latency_ms=latency
            )
        if "error" in payload and not payload.get("choices"):
            # OpenRouter can answer 200 with an error object (its `code` is an HTTP status).
            code = payload["error"].get("code") if isinstance(payload["error"], dict) else None
            kind = classify_status(code) if isinstance(code, int) else "bad_response"
            return ProviderFailure(
                kind,
                shorten(error_message(payload) or text),
                status=code if isinstance(code, int) else status,
                retry_after=parse_retry_after(headers),
                latency_ms=latency,
                limits=parse_rate_limits(headers),
            )
        return Reply(payload, latency, _normalised_finish_reason(payload),
                     parse_rate_limits(headers))

    async def _post(self, session: aiohttp.ClientSession, data: bytes, timeout: float
                    ) -> tuple[int, Any, bytes]:
        """Status, headers and body of the POST; a redirect is followed (re-POSTed, the same
        headers) only on the endpoint's origin, at most MAX_REDIRECTS hops."""
        import aiohttp

        url = self._url
        hops = 0
        while True:
            async with session.post(url, data=data, headers=self._headers,
                                    timeout=aiohttp.ClientTimeout(total=timeout),
                                    allow_redirects=False) as response:
                if response.status not in REDIRECTS:
                    return response.status, response.headers, await read_body(response)
                status, location = response.status, response.headers.get("Location")
            url = redirect_target(self._url, url, status, location, hops)
            hops += 1

    @staticmethod
    def _status_failure(status: int, payload: Any, headers: Any, latency: float) -> ProviderFailure:
        message = error_message(payload) if not isinstance(payload, str) else None
        if message is None:
            message = payload if isinstance(payload, str) else json.dumps(payload)
        return ProviderFailure(
            classify_status(status),
            shorten(message),
            status=status,
            retry_after=parse_retry_after(headers),
            latency_ms=latency,
            limits=parse_rate_limits(headers),
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _normalised_finish_reason(payload: dict[str, Any]) -> str | None:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    raw = choices[0].get("finish_reason")
    mapped = FINISH_REASONS.get(raw, "stop") if isinstance(raw, str) else "stop"
    return None if mapped == raw else mapped
