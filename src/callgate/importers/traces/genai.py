"""Spans of the OpenTelemetry GenAI semantic conventions, as opentelemetry-instrumentation-
openai-v2 writes them with the latest conventions and content on the span
(`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`,
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only`): `gen_ai.input.messages` and
`gen_ai.output.messages` are JSON arrays of `{role, parts: [{type: text | tool_call |
tool_call_response | reasoning, ...}], finish_reason}`; usage in `gen_ai.usage.*`."""

from __future__ import annotations

import json
from typing import Any

from callgate.importers.traces.calls import ModelCall, int_or_none, number_or_none, tool_call
from callgate.importers.traces.otlp import STATUS_ERROR, Span, SpanShapeError
from callgate.reading import loads

# gen_ai.operation.name values that are a model answering a conversation.
CHAT_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
# Operations that are not a model's answer: read past, not refused.
OTHER_OPERATIONS = frozenset({"embeddings", "execute_tool", "invoke_agent", "create_agent",
                              "retrieval", "invoke_workflow"})
_NO_CONTENT = ("no gen_ai.output.messages (the instrumentation captured no content: set "
               "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and "
               "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only)")


def is_genai(span: Span) -> bool:
    return "gen_ai.operation.name" in span.attributes


def read_genai(span: Span) -> ModelCall | None:
    """The model call of a GenAI span; None for a span that is not a model's answer."""
    attrs = span.attributes
    operation = attrs.get("gen_ai.operation.name")
    if operation in OTHER_OPERATIONS:
        return None
    if operation not in CHAT_OPERATIONS:
        raise SpanShapeError(f"gen_ai.operation.name {str(operation)[:40]!r}, which callgate "
                             f"does not read (it reads {', '.join(sorted(CHAT_OPERATIONS))})")
    sent = tuple(_sent(m) for m in _messages(attrs, "gen_ai.input.messages", required=False))
    outputs = _messages(attrs, "gen_ai.output.messages", required=span.status_code != STATUS_ERROR)
    if len(outputs) > 1:
        raise SpanShapeError(f"{len(outputs)} output messages (n > 1): callgate scores one "
                             "answer per model call")
    answer, finish = (_answer(outputs[0]) if outputs else (None, None))
    reasons = attrs.get("gen_ai.response.finish_reasons")
    if finish is None and isinstance(reasons, list) and reasons:
        finish = str(reasons[0])
    return ModelCall(
        span=span, sent=sent, answer=answer, finish_reason=finish,
        prompt_tokens=int_or_none(attrs.get("gen_ai.usage.input_tokens"),
                                  "gen_ai.usage.input_tokens"),
        completion_tokens=int_or_none(attrs.get("gen_ai.usage.output_tokens"),
                                      "gen_ai.usage.output_tokens"),
        cost=number_or_none(attrs.get("gen_ai.usage.cost"), "gen_ai.usage.cost"),
        provider=None,  # gen_ai.provider.name is the API's vendor, not who served the answer
    )


def _messages(attrs: dict[str, Any], key: str, *, required: bool) -> list[dict[str, Any]]:
    raw = attrs.get(key)
    if raw is None:
        if required:
            raise SpanShapeError(_NO_CONTENT if key == "gen_ai.output.messages" else f"no {key}")
        return []
    try:
        messages = loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise SpanShapeError(f"{key} is not JSON") from None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise SpanShapeError(f"{key} is not a list of message objects")
    return messages


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts", [])
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise SpanShapeError("a message whose parts are not a list of objects")
    return parts


def _sent(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": str(message.get("role", ""))}
    texts = [str(p.get("content", "")) for p in _parts(message) if p.get("type") == "text"]
    out["content"] = "".join(texts) if texts else None
    for part in _parts(message):
        if part.get("type") == "tool_call_response":
            out["tool_call_id"] = part.get("id")
            response = part.get("response")
            out["content"] = response if isinstance(response, str) else json.dumps(response)
    calls = [tool_call(p.get("id"), p.get("name"), p.get("arguments"))
             for p in _parts(message) if p.get("type") == "tool_call"]
    if calls:
        out["tool_calls"] = calls
    return out


def _answer(message: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    if message.get("role", "assistant") != "assistant":
        raise SpanShapeError(f"an output message of role {str(message.get('role'))[:20]!r}")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in _parts(message):
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("content", "")))
        elif kind == "tool_call":
            calls.append(tool_call(part.get("id"), part.get("name"), part.get("arguments")))
        elif kind != "reasoning":
            raise SpanShapeError(f"an output part of type {str(kind)[:40]!r}, which callgate "
                                 "does not read (text, tool_call, reasoning)")
    answer: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        answer["tool_calls"] = calls
    finish = message.get("finish_reason")
    return answer, str(finish) if finish is not None else None
