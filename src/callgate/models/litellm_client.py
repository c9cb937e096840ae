"""The litellm client, for every provider litellm knows (Anthropic, Gemini, Bedrock, ...):
`litellm.acompletion` with litellm's own retries off, its exceptions mapped onto the same
classified `ProviderFailure`s the lean client returns, and the key redacted from replies and
messages. litellm takes seconds to import and reaches the network at import unless told not to,
so `import_litellm` sets its offline switches first and is called only when a model is called or
priced.

litellm reads a reply whole and takes no size limit for a completion (its `max_response_bytes`
is for GETs of its own; the proxy's `max_response_size_mb` measures a reply after it is read),
so the cap is put under it: an httpx transport (`BoundedTransport`, httpx's public extension
point) that reads a reply body up to models.bounded.REPLY_LIMIT bytes after decompression
(gzip and deflate inflated here, within the limit; another Content-Encoding is refused) and
stops there. litellm is handed it through its own `client` argument, an `AsyncHTTPHandler` on
that transport, for the routes that go through litellm's HTTP handler (`BOUNDED_HANDLER_ROUTES`,
each checked to reach the transport). `openai/...` through litellm goes through the openai SDK,
which takes its own client (on httpx2, not httpx) and is not capped: the lean client serves
those routes unless `client = "litellm"` is asked for. Other routes are read as litellm reads
them, with no cap (docs/targets.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

from callgate.models import bounded
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
from callgate.models.routes import ModelRoute
from callgate.redaction import clean, without_secrets
from callgate.suites.responses import TOKEN_FIELDS

# Routes whose litellm handler takes an AsyncHTTPHandler as `client` and sends through its
# transport (tests/models/test_reply_caps.py); `openai` takes an openai SDK client instead.
BOUNDED_HANDLER_ROUTES = frozenset({"anthropic", "openrouter", "gemini"})
_INFLATED = frozenset({"gzip", "x-gzip", "deflate"})
# The replies over the limit in the request under way (a list each send, shared by whatever
# tasks litellm starts for it): how send() tells a reply it stopped from a dropped connection,
# whatever exception litellm wraps the stop in.
_stopped: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "callgate_litellm_stopped", default=None)


def _too_large(limit: int) -> bounded.ReplyTooLarge:
    """The stop, noted for the send under way."""
    found = _stopped.get()
    if found is not None:
        found.append(limit)
    return bounded.ReplyTooLarge(limit)


class _BoundedStream(httpx.AsyncByteStream):
    """A reply body as httpx reads it, inflated here if gzip or deflate, ReplyTooLarge once
    it passes `limit` bytes; the connection is closed there."""

    def __init__(self, raw: httpx.AsyncByteStream, encoding: str, limit: int) -> None:
        self._raw = raw
        self._limit = limit
        self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 32) if encoding in _INFLATED else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._raw:
            if self._inflate is not None:
                # At most one byte past the room: a bomb never inflates further than that.
                chunk = self._inflate.decompress(chunk, self._limit - size + 1)
            size += len(chunk)
            if size > self._limit:
                await self._raw.aclose()
                raise _too_large(self._limit)
            yield chunk

    async def aclose(self) -> None:
        await self._raw.aclose()


class BoundedTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, every reply body read up to models.bounded.REPLY_LIMIT."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = "gzip, deflate"  # what _BoundedStream inflates
        response = await self._inner.handle_async_request(request)
        limit = bounded.REPLY_LIMIT
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        headers = response.headers.copy()
        if encoding not in _INFLATED | {"identity", ""}:
            await response.aclose()
            raise httpx.DecodingError(
                f"the reply's Content-Encoding {encoding[:40]!r} was not asked for")
        if encoding in _INFLATED:
            del headers["Content-Encoding"]
            headers.pop("Content-Length", None)
        else:
            length = headers.get("Content-Length", "")
            if length.isdigit() and int(length) > limit:
                await response.aclose()
                raise _too_large(limit)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(response.status_code, headers=headers,
                              stream=_BoundedStream(response.stream, encoding, limit),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


def import_litellm() -> Any:
    """Import litellm with its network-at-import switched off (seconds, so only when needed)."""
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # else it prints help banners on stdout with each error
    return litellm


class LitellmClient:
    """litellm.acompletion, with its own retries off."""

    name = "litellm"

    def __init__(self, route: ModelRoute, key: str | None) -> None:
        self._litellm = import_litellm()
        self._route = route
        self._key = key
        if key is None and route.route == "openai" and route.api_base:
            # litellm's OpenAI route insists on a key; a keyless local server ignores this one.
            self._key_arg: str | None = "no-key"
        else:
            self._key_arg = key
        self._client: Any = None  # made on the first send, on the loop that sends

    def _bounded_client(self) -> Any:
        """The `client` litellm sends through, on BoundedTransport; None for a route whose
        handler takes none that callgate checked."""
        if self._client is None:
            route = self._route
            if route.route in BOUNDED_HANDLER_ROUTES:
                from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

                # No redirect is followed: httpx would carry key headers other than
                # Authorization (x-api-key, x-goog-api-key) to another host.
                self._client = AsyncHTTPHandler(transport=BoundedTransport(),
                                                follow_redirects=False)
        return self._client

    async def send(self, body: dict[str, Any], timeout: float) -> Reply | ProviderFailure:
        route = self._route
        params = dict(body)
        params.pop("model", None)
        messages = params.pop("messages")
        tools = params.pop("tools", None)
        kwargs: dict[str, Any] = {}
        if "reasoning_effort" in params:
            kwargs["reasoning_effort"] = params.pop("reasoning_effort")
        if route.lean_url is not None:
            # OpenAI-compatible routes: the rest goes in the body verbatim, as the lean client
            # sends it.
            if params:
                kwargs["extra_body"] = params
        else:
            kwargs.update(params)
        if tools:
            kwargs["tools"] = tools
        if route.api_base:
            kwargs["api_base"] = route.api_base
        if self._key_arg is not None:
            kwargs["api_key"] = self._key_arg
        client = self._bounded_client()
        if client is not None:
            kwargs["client"] = client
        stopped: list[int] = []
        _stopped.set(stopped)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout + 5):  # backstop: litellm enforces `timeout` itself
                response = await self._litellm.acompletion(
                    model=route.model,
                    messages=messages,
                    timeout=timeout,
                    num_retries=0,
                    max_retries=0,
                    **kwargs,
                )
        except TimeoutError:
            return ProviderFailure("timeout", timeout_message(timeout),
                                   latency_ms=ms_since(started))
        except Exception as exc:  # litellm maps every provider fault onto its exceptions
            if stopped:  # whatever litellm wrapped it in: a provider fault, not asked again
                return ProviderFailure("bad_response", str(bounded.ReplyTooLarge(stopped[0])),
                                       latency_ms=ms_since(started), final=True)
            return self._failure(exc, timeout, ms_since(started))
        latency = ms_since(started)
        payload = response.model_dump(mode="json")
        usage = payload.get("usage")
        if isinstance(usage, dict) and not any(usage.get(k) for k in TOKEN_FIELDS):
            # litellm fills in zeros for a reply that reported no usage: unknown is not 0.
            payload["usage"] = None
        if self._key:
            text = json.dumps(payload)
            if self._key in text:
                payload = json.loads(without_secrets(text, [self._key]))
        # litellm keeps the provider's headers (rate limits included) beside the body.
        hidden = getattr(response, "_hidden_params", None)
        headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
        return Reply(payload, latency, limits=parse_rate_limits(headers))

    def _failure(self, exc: Exception, timeout: float, latency: float) -> ProviderFailure:
        lt = self._litellm
        status = getattr(exc, "status_code", None)
        headers = getattr(exc, "litellm_response_headers", None)
        if headers is None:
            headers = getattr(getattr(exc, "response", None), "headers", None)
        if isinstance(exc, lt.Timeout):
            return ProviderFailure("timeout", timeout_message(timeout), latency_ms=latency)
        if isinstance(exc, lt.APIConnectionError):
            kind, status = "connection", None
        elif not isinstance(status, int) or status < 400:
            kind = "bad_response"
        else:
            kind = classify_status(status)
        if isinstance(exc, lt.ContentPolicyViolationError):
            kind = "refused"
        message = clean(_litellm_message(exc), [self._key])
        return ProviderFailure(
            kind,
            shorten(message),
            status=status if isinstance(status, int) else None,
            retry_after=parse_retry_after(headers),
            latency_ms=latency,
            limits=parse_rate_limits(headers),
        )

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await (client.close() if hasattr(client, "close") else client.aclose())


def _litellm_message(exc: Exception) -> str:
    """The provider's own message where litellm kept it, else litellm's text."""
    found = error_message(getattr(exc, "body", None))
    if found:
        return found
    text = str(getattr(exc, "message", None) or exc)
    _, sep, tail = text.partition("Exception - ")
    if sep:
        try:
            found = error_message(json.loads(tail))
        except ValueError:
            found = None
        return found or tail
    return text
