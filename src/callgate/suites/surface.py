"""The tool surface a suite puts before the model: each tool's description and parameters
schema, the suite's system prompt and, for a snapshot of an MCP server, the server's name and
version; beside it, a digest of each case's expectation (what the checker compares against).
Kept with every run, so the gate can say what a release changed (gating/surface_diff.py)."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from callgate.reading import canonical_json

if TYPE_CHECKING:
    from callgate.suites.suite import Suite

# suite.json's `source` may name the MCP server its tools.json was snapshotted from:
# {"mcp_server": {"name": ..., "version": ...}} (written by `callgate suite tools`).
MCP_SERVER_KEY = "mcp_server"


class SurfaceTool(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class ToolSurface(BaseModel):
    """What the model is shown, by tool name, and each case's expectation as a digest with the
    tool names it names apart (`[digest, tool, ...]`), so a renamed tool does not count as a
    changed expectation."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tools: dict[str, SurfaceTool]
    system: str | None = None
    mcp_server: dict[str, str] | None = None
    expectations: dict[str, list[str]] = Field(default_factory=dict)


def _text(content: Any) -> str | None:
    """A message's content as text (a list of parts joined), None for none."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
                       for part in content)
    return canonical_json(content)


def _system_of(raw: Mapping[str, Any]) -> str | None:
    messages = raw.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    first = messages[0]
    if isinstance(first, Mapping) and first.get("role") in ("system", "developer"):
        return _text(first.get("content"))
    return None


def _abstracted(value: Any, names: list[str]) -> Any:
    """The expectation with every tool name it holds replaced by its place in `names`."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "tool" and isinstance(item, str):
                names.append(item)
                out[key] = len(names) - 1
            elif key == "per_tool" and isinstance(item, Mapping):
                ordered = sorted(item)
                names.extend(ordered)
                out[key] = [[len(names) - len(ordered) + i, item[k]]
                            for i, k in enumerate(ordered)]
            else:
                out[key] = _abstracted(item, names)
        return out
    if isinstance(value, list):
        return [_abstracted(item, names) for item in value]
    return value


def expectation_key(raw: Mapping[str, Any]) -> list[str]:
    """A case's expectation (and its never_right) as `[digest, tool, ...]`."""
    names: list[str] = []
    body = _abstracted({"expect": raw.get("expect"), "never_right": raw.get("never_right")},
                       names)
    digest = hashlib.sha256(canonical_json(body).encode()).hexdigest()[:16]
    return [digest, *names]


def surface_of(raw_tools: list[dict[str, Any]], raw_cases: Mapping[str, Mapping[str, Any]],
               meta: Mapping[str, Any] | None = None) -> ToolSurface:
    """The surface of a suite's tools.json (`raw_tools`), cases (as applied, suite.json's
    system message in them) and suite.json (`meta`). The system prompt is the one most cases
    open with (suite.json's, where it gives one)."""
    tools = {}
    for entry in raw_tools:
        function = entry.get("function") if isinstance(entry, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            tools[function["name"]] = SurfaceTool(
                description=function.get("description") or "",
                parameters=dict(function.get("parameters") or {}))
    systems: Counter[str] = Counter()
    expectations = {}
    for case_id, raw in raw_cases.items():
        system = _system_of(raw)
        if system is not None:
            systems[system] += 1
        expectations[case_id] = expectation_key(raw)
    meta = meta or {}
    given = meta.get("system")
    system_text = (_text(given.get("content")) if isinstance(given, Mapping)
                   else given if isinstance(given, str) else None)
    if system_text is None and systems:
        system_text = systems.most_common(1)[0][0]
    source = meta.get("source")
    server = source.get(MCP_SERVER_KEY) if isinstance(source, Mapping) else None
    mcp_server = ({str(k): str(v) for k, v in server.items()} if isinstance(server, Mapping)
                  else None)
    return ToolSurface(tools=tools, system=system_text, mcp_server=mcp_server,
                       expectations=expectations)


def suite_surface(suite: Suite) -> ToolSurface:
    """The surface of a loaded Suite (callgate.suites.suite), suite.json read again for its
    system message and source."""
    from callgate.reading import read_json

    meta_path = suite.path / "suite.json"
    meta = read_json(meta_path) if meta_path.is_file() else {}
    return surface_of(suite.raw_tools, suite.raw_cases,
                      meta if isinstance(meta, Mapping) else {})


def surface_json(suite: Suite) -> str:
    """suite_surface as the JSON text runs.tool_surface keeps."""
    return canonical_json(suite_surface(suite).model_dump(mode="json", exclude_none=True))
