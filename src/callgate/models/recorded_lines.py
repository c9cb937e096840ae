"""A live attempt as a recorded-response line (docs/formats.md), the same shape `callgate score`
reads from a file: `reply_line` for a completion (with its cost, provider, a normalised
finish_reason, a content-filter refusal, and token counts or costs the store cannot hold set to
unknown with a note) and `failure_line` for an attempt that got no usable completion.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from callgate.models.pricing import Pricing
from callgate.models.replies import ProviderFailure, Reply
from callgate.models.routes import ModelRoute
from callgate.suites.responses import INT64_MAX, TOKEN_FIELDS


def reply_line(
    case_id: str, repeat: int, reply: Reply, *, route: ModelRoute, pricing: Pricing
) -> dict[str, Any]:
    """A recorded-response line (docs/formats.md) for a completion: parse it with parse_response."""
    body, notes = _sane_usage(reply.body)
    line: dict[str, Any] = {
        "case_id": case_id,
        "repeat": repeat,
        "response": body,
        "latency_ms": round(reply.latency_ms, 3),
    }
    if notes:
        line["note"] = "; ".join(notes)
    if reply.finish_reason is not None:
        line["finish_reason"] = reply.finish_reason
    if _filtered(body, reply.finish_reason):
        # The provider's filter answered, not the model: a refusal, kept with its body.
        line["error"] = {
            "kind": "refused",
            "message": "the provider's content filter stopped the answer (content_filter)",
        }
    cost = pricing.cost(body)
    if cost is not None:
        line["cost"] = cost
    provider = body.get("provider")
    if not (isinstance(provider, str) and provider):
        provider = route.served_by()
        if provider:
            line["provider"] = provider
    return line


def _sane_usage(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The body with token counts SQLite cannot hold and NaN/Infinity costs set to null
    (unknown), and a note on each: a provider's bad bookkeeping never stops a run."""
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return body, []
    clean, notes = dict(usage), []
    for key in TOKEN_FIELDS:
        value = clean.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and not (
            0 <= value <= INT64_MAX
        ):
            clean[key] = None
            notes.append(f"usage.{key} is out of range; kept as unknown (null)")
    cost = clean.get("cost")
    if isinstance(cost, float) and not math.isfinite(cost):
        clean["cost"] = None
        notes.append(f"usage.cost is {cost}; kept as unknown (null)")
    return ({**body, "usage": clean}, notes) if notes else (body, [])


def _filtered(body: Mapping[str, Any], normalised: str | None) -> bool:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return False
    choice = choices[0]
    message = choice.get("message")
    calls = message.get("tool_calls") if isinstance(message, Mapping) else None
    return (normalised or choice.get("finish_reason")) == "content_filter" and not calls


def failure_line(case_id: str, repeat: int, failure: ProviderFailure, note: str = ""
                 ) -> dict[str, Any]:
    """A recorded-response line for an attempt that got no usable completion."""
    error: dict[str, Any] = {"kind": failure.kind, "message": failure.message + note}
    if failure.status is not None:
        error["status"] = failure.status
    line: dict[str, Any] = {"case_id": case_id, "repeat": repeat, "error": error}
    if failure.latency_ms is not None:
        line["latency_ms"] = round(failure.latency_ms, 3)
    return line
