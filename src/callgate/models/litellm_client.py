"""The litellm client, for every provider litellm knows (Anthropic, Gemini, Bedrock, ...):
`litellm.acompletion` with litellm's own retries off, its exceptions mapped onto the same
classified `ProviderFailure`s the lean client returns, and the key redacted from replies and
messages. litellm takes seconds to import and reaches the network at import unless told not to,
so `import_litellm` sets its offline switches first and is called only when a model is called or
priced.

litellm reads a reply whole and takes no size limit for a completion (its `max_response_bytes`
is for GETs of its own; the proxy's `max_response_size_mb` measures a reply after it is read),
and follows redirects (httpx drops only `Authorization` off the origin, not x-api-key,
x-goog-api-key or api-key). So callgate hands litellm a `client` of its own, through litellm's
`client` argument: on models.bounded_transport.BoundedTransport, which reads a reply body up to
models.bounded.REPLY_LIMIT bytes after decompression and stops there, and following no
redirect. models.litellm_routes says which routes take which client (litellm's
`AsyncHTTPHandler` for its HTTP handler's routes, an openai SDK client for openai/, azure/ and
the providers litellm sends through the SDK), each checked to reach the transport; a route
outside them (cohere, vertex_ai, watsonx, ...), and a request litellm bridges to the Responses
API (its async bridge drops `client`), is read as litellm reads it, with no cap and litellm's
redirects, and a one-line warning on stderr says so, once per model (docs/targets.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from callgate.models import bounded
from callgate.models.bounded_transport import STOPPED
from callgate.models.litellm_routes import (
    bounded_client,
    bridged,
    provider_of,
    warn_unbounded,
)
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
        self._tried = False
        self._bridges: dict[tuple[bool, str], bool] = {}
        self._provider = provider_of(self._litellm, route)
        warn_unbounded(route, self._provider)  # at the start of a run, for an unbounded route

    def _bounded_client(self) -> Any:
        """The `client` litellm sends through, on BoundedTransport and following no redirect
        (models.litellm_routes); None for a route callgate does not bound (warned at start)."""
        if self._client is None and not self._tried:
            self._tried = True
            self._client = bounded_client(self._litellm, self._route, self._provider,
                                          self._key_arg)
            if self._client is None:
                warn_unbounded(self._route, self._provider, made=False)
        return self._client

    def _bridged(self, tools: Any, effort: Any) -> bool:
        """litellm's answer, kept per (tools or not, effort): does it bridge the request?"""
        asked = (bool(tools), json.dumps(effort))
        found = self._bridges.get(asked)
        if found is None:
            found = self._bridges[asked] = bridged(self._route, self._provider, tools, effort)
        return found

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
        if client is not None and self._bridged(tools, kwargs.get("reasoning_effort")):
            warn_unbounded(route, self._provider, bridge=True)
            client = None  # litellm's async bridge to the Responses API would drop it
        if client is not None:
            kwargs["client"] = client
        stopped: list[int] = []
        STOPPED.set(stopped)
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
        self._tried = False
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
