"""What one request to a model comes back as, whichever client sent it: a `Reply` (the
completion JSON and its latency) or a `ProviderFailure` classified by kind (rate limit, server
error, timeout, auth, ...), with which kinds are worth retrying (`RETRYABLE`) and which stop the
run (`FATAL`). Also the helpers both clients use to build failures: the kind of an HTTP status,
the wait a `Retry-After` header asks for, the message of an error body, and the shortening and
redaction that keep an API key out of every message.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

RETRYABLE = frozenset({"rate_limit", "server_error", "timeout", "connection", "bad_response"})
# Failures that every further attempt would repeat: the run stops at the first one.
FATAL = frozenset({"auth", "payment", "not_found"})
MESSAGE_LIMIT = 500
REDACTED = "[redacted]"


@dataclass(frozen=True)
class Reply:
    """A completion as the provider returned it."""

    body: dict[str, Any]
    latency_ms: float
    finish_reason: str | None = None  # set when the client normalised the body's value


@dataclass(frozen=True)
class ProviderFailure:
    """A request that produced no usable completion, classified."""

    kind: str
    message: str
    status: int | None = None
    retry_after: float | None = None
    latency_ms: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE


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


def error_message(data: Any) -> str | None:
    """The message of an OpenAI-style error body: {"error": {"message": ...}}."""
    if isinstance(data, Mapping):
        inner = data.get("error", data)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    return None


def redact(text: str, secret: str | None) -> str:
    return text.replace(secret, REDACTED) if secret and secret in text else text


def shorten(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "…"


def timeout_message(timeout: float) -> str:
    return f"no response within {timeout:g} s"


def ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
