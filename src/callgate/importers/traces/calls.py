"""One model call read from a span: the conversation sent, the assistant message that came
back, and what the span says it cost. `genai` and `openinference` read the two conventions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from callgate.importers.traces.otlp import Span, SpanShapeError


@dataclass(frozen=True)
class ModelCall:
    span: Span
    # The messages sent, OpenAI chat-shaped: role, content (text or None), tool_calls,
    # tool_call_id. Only what the attempt needs is kept: user text and tool results.
    sent: tuple[dict[str, Any], ...]
    # The assistant message, OpenAI chat-shaped; None when the call failed (an error status).
    answer: dict[str, Any] | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    provider: str | None

    @property
    def latency_ms(self) -> float:
        return max(0, self.span.end_ns - self.span.start_ns) / 1e6


def tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """An OpenAI tool call; arguments kept as the text the model wrote where the span has it
    (GenAI's structured arguments are written back as JSON)."""
    if not isinstance(name, str) or not name:
        raise SpanShapeError("a tool call without a function name")
    if not isinstance(arguments, str):
        arguments = "{}" if arguments is None else json.dumps(arguments, ensure_ascii=False)
    call: dict[str, Any] = {"type": "function",
                            "function": {"name": name, "arguments": arguments}}
    if isinstance(call_id, str) and call_id:
        call["id"] = call_id
    return call


def int_or_none(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpanShapeError(f"{name} is {type(value).__name__}, not an integer")
    return value


def number_or_none(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpanShapeError(f"{name} is {type(value).__name__}, not a number")
    return float(value)
