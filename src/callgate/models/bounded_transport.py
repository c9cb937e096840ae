"""The httpx transport every litellm request callgate bounds is sent through
(models.litellm_routes hands litellm a client on it): httpx's own transport, each reply body
read up to models.bounded.REPLY_LIMIT bytes after decompression (gzip and deflate inflated
here, within the limit; another Content-Encoding is refused), stopped there. httpx's public
extension point, so it sits under litellm's `AsyncHTTPHandler` and under the openai SDK's
client alike. Imports httpx only, never litellm."""

from __future__ import annotations

import contextvars
import zlib
from collections.abc import AsyncIterator

import httpx

from callgate.models import bounded

_INFLATED = frozenset({"gzip", "x-gzip", "deflate"})
# The replies over the limit in the request under way (a list each send, shared by whatever
# tasks litellm starts for it): how send() tells a reply it stopped from a dropped connection,
# whatever exception litellm wraps the stop in.
STOPPED: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "callgate_litellm_stopped", default=None)


def _too_large(limit: int) -> bounded.ReplyTooLarge:
    """The stop, noted for the send under way."""
    found = STOPPED.get()
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
