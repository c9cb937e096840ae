"""How much of a reply callgate reads from anything it calls over HTTP (a model's or a judge's
endpoint, an HTTP target): at most `REPLY_LIMIT` bytes, counted after decompression, so a gzip
bomb or an endless chunked reply stops there (and at the request's timeout, which the caller's
`aiohttp.ClientTimeout(total=...)` bounds) rather than filling memory. Also the redirect rule
of an HTTP target and of a model's endpoint (the lean client): a redirect is followed only on
the origin the user named (scheme, host, port), at most MAX_REDIRECTS times, so a request and
its Authorization header are never sent to a host the user did not name."""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin, urlsplit

REPLY_LIMIT = 64 * 1024 * 1024  # bytes of a reply body, after decompression (docs/targets.md)
_CHUNK = 256 * 1024
MAX_REDIRECTS = 5  # hops on the named origin
REDIRECTS = frozenset({301, 302, 303, 307, 308})


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


class RedirectRefused(Exception):
    """A redirect callgate does not follow: off the named origin, without a Location, or one
    hop too many. The message is one line; the Location it quotes is shortened."""


def redirect_target(named: str, current: str, status: int, location: str | None,
                    hops: int, what: str = "endpoint") -> str:
    """The URL a redirect from `current` points to, or RedirectRefused when it must not be
    followed: no Location, off the origin of `named` (the `what`'s), or past MAX_REDIRECTS
    hops. The one redirect rule of the lean client and of HTTP targets."""
    if not location:
        raise RedirectRefused(f"answered HTTP {status} with no Location")
    if hops >= MAX_REDIRECTS:
        raise RedirectRefused(f"more than {MAX_REDIRECTS} redirects")
    url = urljoin(current, location)
    if origin(url) != origin(named):
        shown = " ".join(location.split())
        shown = shown if len(shown) <= 200 else shown[:200] + "…"
        raise RedirectRefused(f"answered HTTP {status} to {shown}: a redirect off the "
                              f"{what}'s origin (scheme, host, port) is not followed")
    return url


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
