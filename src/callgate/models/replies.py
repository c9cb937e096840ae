"""What one request to a model comes back as, whichever client sent it: a `Reply` (the
completion JSON and its latency) or a `ProviderFailure` classified by kind (rate limit, server
error, timeout, auth, ...), with which kinds are worth retrying (`RETRYABLE`) and which stop the
run (`FATAL`). Also the helpers both clients use to build failures: the kind of an HTTP status,
the wait a `Retry-After` header asks for, the message of an error body, the shortening of a
message (callgate.redaction keeps keys and terminal control out of it), and what a reply's
rate-limit headers say is left (`RateLimits`), in the spellings of OpenAI, OpenRouter,
Anthropic and the IETF draft that gateways in front of vLLM send.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from callgate.redaction import clean

RETRYABLE = frozenset({"rate_limit", "server_error", "timeout", "connection", "bad_response"})
# Failures that every further attempt would repeat: the run stops at the first one.
FATAL = frozenset({"auth", "payment", "not_found"})
MESSAGE_LIMIT = 500


@dataclass(frozen=True)
class RateLimits:
    """What a reply's rate-limit headers say is left: the requests left before the limit (and
    the limit), the smallest share of a token limit left, and the seconds until the requests
    limit is whole again. None where the provider did not say."""

    requests_left: float | None = None
    requests_limit: float | None = None
    tokens_share: float | None = None
    reset: float | None = None


@dataclass(frozen=True)
class Reply:
    """A completion as the provider returned it."""

    body: dict[str, Any]
    latency_ms: float
    finish_reason: str | None = None  # set when the client normalised the body's value
    limits: RateLimits | None = None


@dataclass(frozen=True)
class ProviderFailure:
    """A request that produced no usable completion, classified."""

    kind: str
    message: str
    status: int | None = None
    retry_after: float | None = None
    latency_ms: float | None = None
    limits: RateLimits | None = None
    # Not asked again whatever its kind: a reply over REPLY_LIMIT, a redirect off the
    # endpoint's origin (asking again would only fetch the same again).
    final: bool = False

    def __post_init__(self) -> None:
        # What an endpoint (a model's, a judge's, a target's) said, as it may be shown and
        # stored: keys and terminal control out (the one rule, callgate.redaction).
        object.__setattr__(self, "message", clean(self.message))

    @property
    def retryable(self) -> bool:
        return not self.final and self.kind in RETRYABLE


def classify_status(status: int) -> str:
    if status == 429:
        return "rate_limit"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server_error"
    if status == 401:
        return "auth"
    if status == 402:
        return "payment"
    if status == 403:
        return "refused"
    if status == 404:
        return "not_found"
    if 400 <= status < 500:
        return "bad_request"
    return "bad_response"


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is None and isinstance(headers, Mapping):
        value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    return None if value is None else str(value)


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


# Request-limit headers, each as (remaining, limit, reset). OpenAI (and litellm's copies of
# them) count per minute and give the reset as a duration ("1s", "6m0s", "20ms"); OpenRouter
# gives the reset as epoch milliseconds; Anthropic as an RFC 3339 time; the IETF draft
# (`ratelimit-*`, as gateways in front of vLLM send it) as seconds.
_REQUEST_HEADERS = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-limit-requests",
     "x-ratelimit-reset-requests"),
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-limit",
     "anthropic-ratelimit-requests-reset"),
    ("x-ratelimit-remaining", "x-ratelimit-limit", "x-ratelimit-reset"),
    ("ratelimit-remaining", "ratelimit-limit", "ratelimit-reset"),
)
_TOKEN_HEADERS = (
    ("x-ratelimit-remaining-tokens", "x-ratelimit-limit-tokens"),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-limit"),
    ("anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-limit"),
    ("anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-limit"),
)
_LITELLM_PREFIX = "llm_provider-"  # litellm's copy of every raw provider header
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_rate_limits(headers: Any) -> RateLimits | None:
    """What the rate-limit headers of a reply say is left (None when it sends none)."""
    if not headers:
        return None
    found: dict[str, str] = {}
    for key, value in headers.items():  # one pass; most replies carry a handful of headers
        name = str(key).lower()
        if "ratelimit" in name:
            found[name.removeprefix(_LITELLM_PREFIX)] = str(value)
    if not found:
        return None
    left = limit = reset = share = None
    for remaining_name, limit_name, reset_name in _REQUEST_HEADERS:
        left = _number(found.get(remaining_name))
        if left is not None:
            limit = _number(found.get(limit_name))
            reset = _reset_seconds(found.get(reset_name))
            break
    for remaining_name, limit_name in _TOKEN_HEADERS:
        tokens, tokens_limit = _number(found.get(remaining_name)), _number(found.get(limit_name))
        if tokens is not None and tokens_limit:
            share = min(share if share is not None else 1.0, max(0.0, tokens / tokens_limit))
    if left is None and share is None:
        return None
    return RateLimits(left, limit, share, reset)


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.split(",")[0].split(";")[0])  # "20, 20;w=1" in the IETF draft
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _reset_seconds(text: str | None, now: float | None = None) -> float | None:
    """Seconds until a reset given as a duration, seconds, epoch (s or ms) or a date."""
    if text is None:
        return None
    text = text.strip()
    seconds = _number(text)
    if seconds is None:
        parts = _DURATION.findall(text)
        if parts and "".join(n + u for n, u in parts) == text.replace(" ", ""):
            return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    current = time.time() if now is None else now
    if seconds > 1e11:  # epoch milliseconds (OpenRouter)
        return max(0.0, seconds / 1000 - current)
    if seconds > 1e9:  # epoch seconds
        return max(0.0, seconds - current)
    return seconds


def error_message(data: Any) -> str | None:
    """The message of an OpenAI-style error body: {"error": {"message": ...}}."""
    if isinstance(data, Mapping):
        inner = data.get("error", data)
        message = inner.get("message") if isinstance(inner, Mapping) else None
        if isinstance(message, str):
            return message
        if isinstance(inner, str):
            return inner
    return None


def shorten(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "…"


def timeout_message(timeout: float) -> str:
    return f"no response within {timeout:g} s"


def ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
