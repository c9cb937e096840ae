"""Spans of the OpenInference conventions, as openinference-instrumentation-openai (and so
Arize Phoenix) writes them: `openinference.span.kind` `LLM`, the messages flattened into
attributes (`llm.input_messages.<i>.message.role`, `...content`, `...tool_calls.<j>.tool_call.
function.name` and `.arguments`, `...tool_call_id`), usage in `llm.token_count.*`, cost in
`llm.cost.total` where the application sets it."""

from __future__ import annotations

from typing import Any

from callgate.importers.traces.calls import ModelCall, int_or_none, number_or_none, tool_call
from callgate.importers.traces.otlp import STATUS_ERROR, Span, SpanShapeError
from callgate.reading import loads

KIND = "openinference.span.kind"
# Kinds that are not a model's answer (the agent's steps, its tools, retrieval): read past.
OTHER_KINDS = frozenset({"CHAIN", "TOOL", "AGENT", "RETRIEVER", "EMBEDDING", "RERANKER",
                         "GUARDRAIL", "EVALUATOR", "PROMPT", "UNKNOWN"})


def is_openinference(span: Span) -> bool:
    return KIND in span.attributes


def read_openinference(span: Span) -> ModelCall | None:
    """The model call of an OpenInference span; None for a span of another kind."""
    attrs = span.attributes
    kind = attrs.get(KIND)
    if kind in OTHER_KINDS:
        return None
    if kind != "LLM":
        raise SpanShapeError(f"{KIND} {str(kind)[:40]!r}, which callgate does not read")
    sent = tuple(_message(m, "llm.input_messages") for m in indexed(attrs, "llm.input_messages"))
    outputs = indexed(attrs, "llm.output_messages")
    if not outputs and span.status_code != STATUS_ERROR:
        raise SpanShapeError("an LLM span without llm.output_messages (the instrumentation "
                             "captured no content: do not set OPENINFERENCE_HIDE_OUTPUTS or "
                             "OPENINFERENCE_HIDE_OUTPUT_MESSAGES)")
    if len(outputs) > 1:
        raise SpanShapeError(f"{len(outputs)} output messages (n > 1): callgate scores one "
                             "answer per model call")
    answer = _message(outputs[0], "llm.output_messages") if outputs else None
    if answer is not None:
        if answer.get("role") not in ("assistant", None):
            raise SpanShapeError(f"an output message of role {str(answer.get('role'))[:20]!r}")
        answer = {"role": "assistant", **{k: v for k, v in answer.items() if k != "role"}}
    finish = attrs.get("llm.finish_reason")
    return ModelCall(
        span=span, sent=sent, answer=answer,
        finish_reason=str(finish) if finish is not None else None,
        prompt_tokens=int_or_none(attrs.get("llm.token_count.prompt"), "llm.token_count.prompt"),
        completion_tokens=int_or_none(attrs.get("llm.token_count.completion"),
                                      "llm.token_count.completion"),
        cost=number_or_none(attrs.get("llm.cost.total"), "llm.cost.total"),
        provider=_served_by(attrs.get("output.value")),
    )


def _served_by(output: Any) -> str | None:
    """The provider that served the answer, where the recorded response body names one
    (OpenRouter's top-level `provider`)."""
    if not isinstance(output, str) or not output.startswith("{") or '"provider"' not in output:
        return None
    try:
        body = loads(output)
    except ValueError:
        return None
    provider = body.get("provider") if isinstance(body, dict) else None
    return provider if isinstance(provider, str) and provider else None


def indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`prefix.<i>.rest` attributes as a list (by i) of nested dicts of `rest`."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix + "."):
            continue
        index, _, rest = key[len(prefix) + 1:].partition(".")
        if not index.isdigit() or not rest:
            raise SpanShapeError(f"attribute {key[:80]!r}: expected {prefix}.<index>.<field>")
        node = found.setdefault(int(index), {})
        *path, last = rest.split(".")
        for part in path:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise SpanShapeError(f"attribute {key[:80]!r} nests under a value")
            node = child
        node[last] = value
    return [found[i] for i in sorted(found)]


def _ordered(node: Any) -> list[Any]:
    """A nested dict keyed by indexes ("0", "1", ...) as a list in index order."""
    if not isinstance(node, dict):
        return []
    return [node[k] for k in sorted(node, key=lambda k: int(k) if k.isdigit() else -1)
            if k.isdigit()]


def _message(raw: dict[str, Any], prefix: str) -> dict[str, Any]:
    message = raw.get("message")
    if not isinstance(message, dict):
        raise SpanShapeError(f"{prefix}: an entry without message.* attributes")
    out: dict[str, Any] = {"role": message.get("role")}
    content = message.get("content")
    if content is None and "contents" in message:
        texts = [part.get("message_content", {}).get("text")
                 for part in _ordered(message["contents"]) if isinstance(part, dict)]
        content = "".join(t for t in texts if isinstance(t, str)) or None
    out["content"] = content if isinstance(content, str) else None
    calls = []
    for entry in _ordered(message.get("tool_calls")):
        call = entry.get("tool_call") if isinstance(entry, dict) else None
        if not isinstance(call, dict):
            raise SpanShapeError(f"{prefix}: a tool call without tool_call.* attributes")
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        calls.append(tool_call(call.get("id"), function.get("name"),
                               function.get("arguments")))
    if calls:
        out["tool_calls"] = calls
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = message["tool_call_id"]
    return out
