"""The tools a model call was offered, as the span records them: OpenInference's
`llm.tools.<i>.tool.json_schema` (each an OpenAI function-tool object as JSON, what
openinference-instrumentation-openai writes) or the GenAI conventions' `gen_ai.tool.definitions`
(a JSON array of `{type, name, description, parameters}`, what opentelemetry-util-genai writes;
opentelemetry-instrumentation-openai-v2 2.4b0 does not set it). Each comes back as an OpenAI
function-tool object; None when the span records no tools.

Read only for production samples (docs/traces.md): scoring against a suite uses the suite's
tools, so a span's tool list never refuses a trace there."""

from __future__ import annotations

from typing import Any

from callgate.importers.traces.openinference import indexed, is_openinference
from callgate.importers.traces.otlp import Span, SpanShapeError
from callgate.reading import loads

GENAI_TOOLS = "gen_ai.tool.definitions"
OPENINFERENCE_TOOLS = "llm.tools"


def _json(raw: Any, key: str) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return loads(raw)
    except ValueError:
        raise SpanShapeError(f"{key} is not JSON") from None


def genai_tools(attrs: dict[str, Any]) -> tuple[dict[str, Any], ...] | None:
    if GENAI_TOOLS not in attrs:
        return None
    found = _json(attrs[GENAI_TOOLS], GENAI_TOOLS)
    if not isinstance(found, list):
        raise SpanShapeError(f"{GENAI_TOOLS} is not a JSON array of tool definitions")
    tools = []
    for index, item in enumerate(found):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise SpanShapeError(f"{GENAI_TOOLS}[{index}]: a tool definition without a name")
        function: dict[str, Any] = {"name": item["name"]}
        if isinstance(item.get("description"), str):
            function["description"] = item["description"]
        if item.get("parameters") is not None:
            function["parameters"] = _json(item["parameters"], f"{GENAI_TOOLS}[{index}]"
                                           ".parameters")
        tools.append({"type": str(item.get("type") or "function"), "function": function})
    return tuple(tools)


def offered_tools(span: Span) -> tuple[dict[str, Any], ...] | None:
    """The tools the span's model call was offered; None when it records none."""
    if is_openinference(span):
        return openinference_tools(span.attributes)
    return genai_tools(span.attributes)


def openinference_tools(attrs: dict[str, Any]) -> tuple[dict[str, Any], ...] | None:
    entries = indexed(attrs, OPENINFERENCE_TOOLS)
    if not entries:
        return None
    tools = []
    for index, entry in enumerate(entries):
        key = f"{OPENINFERENCE_TOOLS}.{index}.tool.json_schema"
        raw = entry.get("tool", {}).get("json_schema") if isinstance(entry, dict) else None
        if raw is None:
            raise SpanShapeError(f"{OPENINFERENCE_TOOLS}.{index}: no tool.json_schema")
        tool = _json(raw, key)
        if not isinstance(tool, dict):
            raise SpanShapeError(f"{key} is not a JSON object")
        if "function" not in tool and isinstance(tool.get("name"), str):
            # A bare function object (some frameworks write the function, not the tool)
            tool = {"type": "function", "function": tool}
        function = tool.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise SpanShapeError(f"{key}: a tool without function.name")
        tools.append(tool)
    return tuple(tools)
