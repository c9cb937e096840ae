"""How much of a reply callgate reads from anything it calls over HTTP (a model's or a judge's
endpoint, an HTTP target): at most `REPLY_LIMIT` bytes, counted after decompression, so a gzip
bomb or an endless chunked reply stops there (and at the request's timeout, which the caller's
`aiohttp.ClientTimeout(total=...)` bounds) rather than filling memory. Also the redirect rule
of an HTTP target: never off its origin (scheme, host, port)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

REPLY_LIMIT = 64 * 1024 * 1024  # bytes of a reply body, after decompression (docs/targets.md)
_CHUNK = 256 * 1024


class ReplyTooLarge(Exception):
    """A reply body over the limit; reading stopped there."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the reply is over {limit >> 20} MiB (after decompression): "
                         "reading stopped there")
        self.limit = limit


async def read_body(response: Any, limit: int | None = None) -> bytes:
    """The body of an aiohttp response, decompressed, or ReplyTooLarge past `limit` bytes
    (default REPLY_LIMIT)."""
    limit = REPLY_LIMIT if limit is None else limit
    length = response.content_length
    if length is not None and length > limit and not response.headers.get("Content-Encoding"):
        raise ReplyTooLarge(limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > limit:
            response.close()  # the connection goes: the rest is never read
            raise ReplyTooLarge(limit)
        parts.append(chunk)
    return b"".join(parts)


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the port filled in for http and https."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port
